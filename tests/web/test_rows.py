"""The viewer's tree rows are the rows ``sessiontree show`` lays out: same order, indents and marks, any session."""

from __future__ import annotations

import sessiontree_strategies as strat
import sessiontree_testkit as kit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree.cli import treeview
from sessiontree.web.rows import MAX_WINDOW, TreeRows


def _expected(reader, mode):
    nodes = list(treeview.walk(treeview.build(reader, mode)))
    return [(n.head.id, n.branch_depth, len(n.children), n.on_branch, n.is_leaf, n.hidden_leaf is not None, n.label)
            for n in nodes]


def _actual(rows):
    got = rows.window(0, len(rows)) if len(rows) <= MAX_WINDOW else []
    return [(r["id"], r["depth"], r["children"], r["on_branch"], r["leaf"], r["leaf_below"], r["label"]) for r in got]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=strat.operations(max_size=40), mode=st.sampled_from(treeview.FILTERS), at=st.integers(0, 100))
def test_rows_match_the_command_lines_tree(ops, mode, at):
    session = kit.open_session()
    for op in ops:
        strat.apply_operation(session, op)
    for reader in (session, session.at(1 + at % session.version)):  # a live session and a time-travel view
        assert _actual(TreeRows(reader, mode)) == _expected(reader, mode)


def test_a_window_is_clamped_and_bounded():
    session = kit.open_session()
    ids = [session.append_message(kit.user(f"m{i}")) for i in range(1500)]
    rows = TreeRows(session)
    assert len(rows) == 1500 and rows.focus == 1499
    assert [r["id"] for r in rows.window(1495, 50)] == ids[1495:]
    assert len(rows.window(0, 5000)) == MAX_WINDOW
    assert rows.window(-10, 2)[0]["index"] == 0
    assert rows.window(2000, 10) == []


def _descendants(session, entry_id):
    children = {}
    for head in session.iter_heads():
        if head.type != "leaf":
            children.setdefault(head.parent_id, []).append(head.id)
    out, stack = set(), [entry_id]
    while stack:
        for kid in children.get(stack.pop(), ()):
            out.add(kid)
            stack.append(kid)
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=strat.operations(max_size=40), pick=st.integers(0, 1000))
def test_guides_draw_each_branch_and_folding_hides_exactly_its_subtree(ops, pick):
    """Each row's guides have one mark per indent level; a branch's first row is ├ when a sibling branch follows it
    and └ when it is the last; folding a branch hides exactly the entries below its first row (filter ``all``)."""
    session = kit.open_session()
    for op in ops:
        strat.apply_operation(session, op)
    rows = TreeRows(session, "all")
    got = rows.window(0, len(rows)) if len(rows) <= MAX_WINDOW else []
    for r in got:
        assert len(r["guides"]) == r["depth"]
        if r["branch_start"]:
            siblings = [x for x in got if x["parent_id"] == r["parent_id"] and x["branch_start"]]
            assert r["guides"][-1] == ("└" if siblings[-1]["id"] == r["id"] else "├")
    starts = [r for r in got if r["branch_start"]]
    if not starts:
        assert rows.collapsed(frozenset(r["id"] for r in got)).window(0, MAX_WINDOW) == got
        return
    start = starts[pick % len(starts)]
    view = rows.collapsed(frozenset({start["id"]}))
    shown = [r["id"] for r in view.window(0, MAX_WINDOW)]
    hidden = {r["id"] for r in got} - set(shown)
    assert hidden == _descendants(session, start["id"])
    assert len(view) == len(got) - len(hidden)
    folded = next(r for r in view.window(0, MAX_WINDOW) if r["id"] == start["id"])
    assert folded["folded"]["rows"] == len(hidden)
    assert [r["index"] for r in view.window(0, MAX_WINDOW)] == list(range(len(view)))
