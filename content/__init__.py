"""Content out of line (blobs and their stores) and redaction on write."""
