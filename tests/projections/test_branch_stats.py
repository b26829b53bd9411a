"""Stats of the whole session and of every branch in one pass (issue 19): the very figures (floats to the bit, dicts in
the same order) that folding the session and then each branch's path again gave, on random trees."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import sessiontree_strategies as strat
from sessiontree_statskit import ordered, whole_branch_stats

from sessiontree.domain.aggregate import leaf_at
from sessiontree.domain.events import LeafMoved
from sessiontree.domain.log import EntryLog
from sessiontree.projections.stats import branch_stats, tip_positions


@st.composite
def trees(draw: Any) -> tuple[EntryLog, str | None]:
    """A log of random entries whose parents are mostly the entry before, else an earlier one, none, a later one or
    a missing one; leaf records point anywhere. With it, a leaf: the log's own, or any id, or None."""
    entries = draw(st.lists(strat.entry_events(), max_size=30), label="entries")
    ids = [f"e{n}" for n in range(len(entries))]
    out = []
    for pos, entry in enumerate(entries):
        kind = draw(st.sampled_from(["previous", "previous", "previous", "earlier", "root", "later", "missing"]))
        parent: str | None = None
        if kind == "previous" and pos:
            parent = ids[pos - 1]
        elif kind == "earlier" and pos:
            parent = ids[draw(st.integers(0, pos - 1))]
        elif kind == "later" and pos + 1 < len(ids):
            parent = ids[draw(st.integers(pos + 1, len(ids) - 1))]
        elif kind == "missing":
            parent = "gone"
        changes: dict[str, Any] = {"id": ids[pos], "parent_id": parent}
        if isinstance(entry, LeafMoved):
            changes["target_id"] = draw(st.none() | st.sampled_from(ids))
        out.append(attrs.evolve(entry, **changes))
    log = EntryLog.of(out)
    leaf = draw(st.sampled_from(["log", "any", "none"]), label="leaf")
    if leaf == "any" and ids:
        return log, draw(st.sampled_from(ids))
    return log, None if leaf == "none" else leaf_at(log, len(log))


@settings(max_examples=300, deadline=None)
@given(tree=trees())
def test_one_pass_gives_what_folding_each_branch_again_gave(tree: tuple[EntryLog, str | None]) -> None:
    log, leaf = tree
    expected_whole, expected_branches = whole_branch_stats(log, leaf)
    folded = branch_stats(log, leaf, len(log), log.stream(0, len(log)))
    assert ordered(folded.whole) == ordered(expected_whole)
    assert ordered(folded.whole.branch) == ordered(expected_whole.branch)
    assert [(t, c, ordered(s)) for t, c, s in folded.branches] == [(t, c, ordered(s)) for t, c, s in expected_branches]


@settings(max_examples=100, deadline=None)
@given(tree=trees(), data=st.data())
def test_a_prefix_of_the_log_folds_as_its_own_log(tree: tuple[EntryLog, str | None], data: Any) -> None:
    """Over the first ``limit`` entries (a time-travel view) the pass sees nothing after them."""
    log, _ = tree
    limit = data.draw(st.integers(0, len(log)), label="limit")
    prefix = EntryLog.of(log.get_many(range(limit)))
    leaf = leaf_at(prefix, limit)
    assert tip_positions(log, limit) == tip_positions(prefix, limit)
    folded, expected = branch_stats(log, leaf, limit, log.stream(0, limit)), branch_stats(prefix, leaf, limit, prefix)
    assert ordered(folded.whole) == ordered(expected.whole)
    assert [(t, c, ordered(s)) for t, c, s in folded.branches] == [(t, c, ordered(s)) for t, c, s in expected.branches]
