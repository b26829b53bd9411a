"""Stats of the whole session and of every branch in one pass over the log, each entry decoded once and not kept.

A branch's stats are the fold of its root-to-tip path, so the stats at an entry are those at its parent with the
entry applied. Walking the log in order (a parent comes before its children), the pass keeps a running state only for
entries with children still to come: the last child takes its parent's state over, an earlier one gets a copy. Each
branch's figures are then the very sums the fold of its path makes, added in the same order (floats included).
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Iterable, Sequence
from typing import Any

import attrs

from sessiontree.domain.log import EntryLog
from sessiontree.projections.context import branch_positions
from sessiontree.projections.stats import SessionStats, StatsProjection


@attrs.frozen
class BranchStats:
    """``whole``: the session's stats, ``.branch`` the current branch's; ``branches``: ``(tip id, is current, stats)``
    for the last entry of every branch in log order, then the current leaf if it sits inside the tree."""

    whole: SessionStats
    branches: list[tuple[str, bool, SessionStats]]


def copy_stats(stats: SessionStats) -> SessionStats:
    """A copy sharing nothing mutable (dicts in the same order), cheaper than ``copy.deepcopy``."""
    return attrs.evolve(
        stats, entries_by_type=dict(stats.entries_by_type), messages_by_role=dict(stats.messages_by_role),
        by_model={key: attrs.evolve(per) for key, per in stats.by_model.items()},
    )


def tip_positions(log: EntryLog, limit: int) -> list[int]:
    """Positions of the entries without children in the tree (``leaf`` records are not nodes), in log order; what
    ``branch_tips`` finds in the tree projection, from the envelopes alone."""
    types, _, parents, orphans = log.envelopes()
    parented = bytearray(limit)
    for pos in range(limit):
        if types[pos] == "leaf":
            continue
        parent = parents[pos]
        if parent < 0 and pos in orphans:  # its parent is later in the log (or missing)
            later = log.position(orphans[pos], limit)
            parent = -1 if later is None else later
        if parent >= 0:
            parented[parent] = 1
    return [pos for pos in range(limit) if types[pos] != "leaf" and not parented[pos]]


def fold_branches(
    types: Sequence[str], parents: Sequence[int], count: int, entries: Iterable[Any], wanted: Collection[int]
) -> tuple[SessionStats, dict[int, SessionStats]]:
    """The stats of ``entries`` (the log's first ``count`` entries, in order, with their ``types`` and ``parents``
    positions) and of the path ending at each position of ``wanted`` (``leaf`` records are on no path: they pass
    their parent's state on)."""
    pending = array("l", [0]) * count
    for pos in range(count):
        if parents[pos] >= 0:
            pending[parents[pos]] += 1
    projection = StatsProjection()
    apply = projection.apply
    whole = projection.initial()
    running: dict[int, SessionStats] = {}  # positions whose children are still to come
    found: dict[int, SessionStats] = {}
    for pos, entry in enumerate(entries):
        apply(whole, entry)
        parent = parents[pos]
        needed = pending[pos] > 0 or pos in wanted
        if parent >= 0:
            pending[parent] -= 1
            base = running[parent] if pending[parent] else running.pop(parent)
            if not needed:
                continue
            state = copy_stats(base) if pending[parent] else base
        elif not needed:
            continue
        else:
            state = SessionStats()
        if types[pos] != "leaf":
            apply(state, entry)
        if pos in wanted:
            found[pos] = copy_stats(state) if pending[pos] else state
        if pending[pos]:
            running[pos] = state
    return whole, found


def branch_stats(log: EntryLog, leaf_id: str | None, limit: int, entries: Iterable[Any]) -> BranchStats:
    """What ``stats`` shows for the first ``limit`` entries of ``log`` with the leaf at ``leaf_id``: ``entries`` are
    those entries in order (a pass that keeps none of them)."""
    types, ids, parents, _ = log.envelopes()
    current_path = branch_positions(log, leaf_id, limit)
    current = current_path[-1] if current_path else None
    tips = tip_positions(log, limit)
    if current is not None and current not in tips:  # the leaf sits inside the tree
        tips.append(current)
    wanted = set(tips)
    whole, found = fold_branches(types, parents, limit, entries, wanted)
    whole.branch = copy_stats(found[current]) if current is not None else SessionStats()
    return BranchStats(whole, [(ids[pos], pos == current, found[pos]) for pos in tips])


__all__ = ["BranchStats", "branch_stats", "copy_stats", "fold_branches", "tip_positions"]
