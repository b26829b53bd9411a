"""Walks over the entry log from a leaf towards the root: the branch, and the part of it a
context needs (SPEC 3). They follow the log's parent positions, so building a context costs
O(context), not O(session)."""

from __future__ import annotations

from typing import Any, cast

from sessiontree.domain.events import ContextCompacted
from sessiontree.domain.log import EntryLog

# The default of a ``leaf_id`` argument: the current leaf. None is a leaf too: before the first entry (SPEC 2.2).
CURRENT_LEAF: Any = type("CurrentLeaf", (), {"__repr__": lambda self: "<current leaf>"})()


def path_to_root_or_compaction(log: EntryLog, leaf_id: str | None, limit: int | None = None) -> list[int]:
    """Positions, root first, of the shortest branch suffix the context needs. Walking back from the leaf, the first
    compaction met is the latest: with a retained tail the path stops there; otherwise it goes on to its
    ``first_kept_entry_id`` (or stops at the compaction when that is null). A kept id that is not on the branch means a
    walk to the root; the context then keeps nothing before the compaction. ``leaf`` records are left out."""
    out: list[int] = []
    start = log.position(leaf_id, limit) if leaf_id is not None else None
    if start is None:
        return out
    types, ppos = log.links()
    pos = start
    while pos >= 0 and types[pos] != "compaction":  # the common case: type tests only
        if types[pos] != "leaf":
            out.append(pos)
        pos = ppos[pos]
    if pos >= 0:
        out.append(pos)
        compaction = cast(ContextCompacted, log.get(pos))
        kept = compaction.first_kept_entry_id
        if compaction.retained_tail is None and kept is not None:
            stop_at = log.position(kept)
            pos = ppos[pos]
            while pos >= 0:
                if types[pos] != "leaf":
                    out.append(pos)
                if pos == stop_at:
                    break
                pos = ppos[pos]
    out.reverse()
    return out


def branch_positions(log: EntryLog, leaf_id: str | None, limit: int | None = None) -> list[int]:
    """Positions of the whole root-to-leaf path (``leaf`` side records left out)."""
    return [p for p in log.path_positions(leaf_id, limit) if log.type_of(p) != "leaf"]
