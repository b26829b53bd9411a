"""The one-pass functions' old module, kept so ``import sessiontree.streaming`` goes on working: they live in
:mod:`sessiontree.reader` now (issue 34, item 6)."""

from sessiontree.reader import entries, passing, stats

__all__ = ["entries", "passing", "stats"]
