"""Pruning whole sessions and their archives."""
