"""The built-in projections: leaf, labels, session name and tree (SPEC 3)."""

from __future__ import annotations

import pytest
import sessiontree_testkit as kit

from sessiontree import SessionError
from sessiontree.projections import LabelsProjection, LeafProjection, SessionNameProjection, TreeProjection, fold


def test_latest_label_per_target_wins_across_branches():
    """The latest label entry for a target wins, wherever on the tree it was appended."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    s.append_label_change(a, "first")
    s.move_to(a)
    s.append_label_change(a, "second")
    assert s.get_label(a) == "second"
    assert s.get_labels() == {a: "second"}


@pytest.mark.parametrize("clear", [None, ""])
def test_null_or_empty_label_clears(clear):
    """A null or empty label removes the target's label."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    s.append_label_change(a, "x")
    s.append_label_change(a, clear)
    assert s.get_label(a) is None and s.get_labels() == {}


def test_get_label_and_get_entry_of_an_unknown_entry_are_none_and_entry_raises():
    """As in the seed (and ``dict.get``), asking for an id that does not exist answers None;
    ``session.entry(id)`` is the accessor that raises."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    s.append_label_change(a, "kept")
    assert s.get_label("ghost") is None and s.get_entry("ghost") is None
    assert s.get_label(a) == "kept" and s.get_entry(a) is s.entry(a)
    with pytest.raises(SessionError) as caught:
        s.entry("ghost")
    assert caught.value.code == "not_found" and "'ghost'" in str(caught.value)


@pytest.mark.parametrize("clear", [None, "", "   "])
def test_latest_session_info_names_the_session(clear):
    """The latest session_info wins; a null, empty or blank name clears it."""
    s = kit.open_session()
    assert s.get_session_name() is None
    s.append_session_info("first")
    s.append_session_info("second")
    assert s.get_session_name() == "second"
    s.append_session_info(clear)
    assert s.get_session_name() is None


def test_tree_children_and_roots():
    """``get_children`` lists children in append order; None lists the roots."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    b = s.append_message(kit.user("b"))
    s.move_to(a)
    c = s.append_message(kit.user("c"))
    s.move_to(None)
    r = s.append_message(kit.user("r"))
    assert [e.id for e in s.get_children(a)] == [b, c]
    assert [e.id for e in s.get_children(None)] == [a, r]
    assert s.get_children(c) == []


def test_leaf_records_are_not_tree_nodes():
    """``leaf`` entries are never children in the tree."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    s.move_to(a)
    assert s.get_children(a) == []
    assert [n.entry.id for n in s.get_tree()] == [a]


def test_get_tree_nests_nodes_with_labels():
    """``get_tree`` gives nested nodes carrying each entry's label."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    b = s.append_message(kit.user("b"))
    s.append_label_change(b, "here")
    [root] = s.get_tree()
    assert root.entry.id == a and root.label is None
    assert [(n.entry.id, n.label) for n in root.children] == [(b, "here")]


def test_get_branch_of_another_leaf():
    """``get_branch(leaf_id)`` gives the root-to-entry path of any entry."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    b = s.append_message(kit.user("b"))
    s.move_to(a)
    c = s.append_message(kit.user("c"))
    assert [e.id for e in s.get_branch(b)] == [a, b]
    assert [e.id for e in s.get_branch()] == [a, c]


def test_builtins_are_plain_folds():
    """Each built-in projection folded over the log gives what the session reports."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    s.append_label_change(a, "x")
    s.append_session_info("n")
    s.move_to(a)
    entries = s.get_entries()
    assert fold(LabelsProjection(), entries) == s.get_labels()
    assert fold(SessionNameProjection(), entries) == s.get_session_name()
    assert fold(LeafProjection(), entries) == s.leaf_id == a
    assert fold(TreeProjection(), entries) == {None: [a], a: [entries[1].id], entries[1].id: [entries[2].id]}


def test_builtin_projection_states_by_name():
    """``projection(name)`` serves the built-ins by name too."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    s.append_label_change(a, "x")
    assert s.projection("labels") == {a: "x"}
    assert s.projection("leaf") == s.leaf_id
    assert s.projection("stats").entry_count == 2
    assert {"labels", "leaf", "session_name", "stats", "tree"} <= set(s.projection_names)
