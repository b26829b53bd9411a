"""``get_path_to_root_or_compaction``: the shortest branch suffix the context needs (SPEC 3)."""

from __future__ import annotations

import pytest
import sessiontree_testkit as kit

from sessiontree import SessionError
from sessiontree.domain.events import ContextCompacted, MessageAppended


def ids(entries):
    return [e.id for e in entries]


def test_without_compaction_the_path_is_the_whole_branch():
    """No compaction: the path is the root-to-leaf branch."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    b = s.append_message(kit.assistant("b"))
    assert ids(s.get_path_to_root_or_compaction(b)) == [a, b] == ids(s.get_branch())


def test_a_retained_tail_stops_the_path_at_the_compaction():
    """With a retained tail nothing before the compaction is needed."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    c = s.append_compaction("sum", a, 1, retained_tail=[kit.user("a")])
    d = s.append_message(kit.user("d"))
    assert ids(s.get_path_to_root_or_compaction(d)) == [c, d]


def test_first_kept_entry_id_starts_the_path():
    """Without a tail the path starts at ``first_kept_entry_id``."""
    s = kit.open_session()
    s.append_message(kit.user("a"))
    b = s.append_message(kit.assistant("b"))
    c = s.append_compaction("sum", b, 1)
    assert ids(s.get_path_to_root_or_compaction(c)) == [b, c]


def test_null_first_kept_starts_the_path_at_the_compaction():
    """Without a kept id or a tail the path starts at the compaction."""
    s = kit.open_session()
    s.append_message(kit.user("a"))
    c = s.append_compaction("sum", None, 1)
    assert ids(s.get_path_to_root_or_compaction(c)) == [c]


def test_only_the_latest_compaction_bounds_the_path():
    """An older compaction between the kept id and the latest one does not stop the walk."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    old = s.append_compaction("old", None, 1)
    new = s.append_compaction("new", a, 1)
    assert ids(s.get_path_to_root_or_compaction(new)) == [a, old, new]


def test_a_kept_id_off_the_branch_walks_to_the_root():
    """A foreign log whose kept id is off the branch gives the whole branch."""
    storage = kit.new_storage()
    sid = storage.session_id
    storage.save([
        MessageAppended(originator_id=sid, originator_version=2, timestamp=kit.T0_ISO, id="a", parent_id=None, message=kit.user("a")),
        MessageAppended(originator_id=sid, originator_version=3, timestamp=kit.T0_ISO, id="b", parent_id=None, message=kit.user("b")),
        ContextCompacted(originator_id=sid, originator_version=4, timestamp=kit.T0_ISO, id="c", parent_id="a", summary="s", first_kept_entry_id="b", tokens_before=1),
    ])
    s = kit.open_session(storage)
    assert ids(s.get_path_to_root_or_compaction("c")) == ["a", "c"]


def test_the_path_defaults_to_the_current_leaf_and_skips_leaf_records():
    """Without an argument the path ends at the current leaf; leaf records never appear."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    s.append_message(kit.user("b"))
    s.move_to(a)
    assert ids(s.get_path_to_root_or_compaction()) == [a]


def test_an_unknown_leaf_is_not_found():
    """Asking for the path of an unknown entry raises not_found naming it."""
    with pytest.raises(SessionError, match="'nope'") as caught:
        kit.open_session().get_path_to_root_or_compaction("nope")
    assert caught.value.code == "not_found"
