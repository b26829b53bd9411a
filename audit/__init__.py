"""The hash chain, checkpoints, verify, and erasure (the rewrite of a line and what is scrubbed after)."""
