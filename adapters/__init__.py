"""Adapters: where sessions are stored (memory, JSONL files, databases) and the wire codec."""
