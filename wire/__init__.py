"""The wire format: schemas, encoders, the codec, JSON text (every feature reads and writes it)."""
