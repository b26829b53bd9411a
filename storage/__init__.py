"""The storage ports and their backends: memory, JSONL files with their sidecar index, SQLite and PostgreSQL
recorders, the listing, URLs, safe files.
"""
