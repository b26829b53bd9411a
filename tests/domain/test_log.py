"""The entry log: append order, id index, per-type positions, lazy entries and paths."""

from __future__ import annotations

import attrs

from sessiontree.domain.events import LeafMoved, MessageAppended
from sessiontree.domain.log import EntryLog, LazyEntry
from sessiontree.domain.messages import UserMessage

T = "2026-11-29T11:30:20.123Z"


def msg(id: str, parent: str | None, version: int = 2) -> MessageAppended:
    return MessageAppended(
        originator_id="s", originator_version=version, timestamp=T, id=id, parent_id=parent,
        message=UserMessage(content=id),
    )


@attrs.define
class Lazy:
    """A stand-in for a storage's undecoded line: type, id and parent known, body on demand."""

    type: str
    id: str
    parent_id: str | None
    entry: object
    loads: int = 0

    def load(self):
        self.loads += 1
        return self.entry


def log_of(*entries) -> EntryLog:
    log = EntryLog()
    for e in entries:
        log.add(e)
    return log


def test_positions_follow_append_order():
    """Entries are indexed by id and by type in the order they were added."""
    log = log_of(msg("a", None), LeafMoved(originator_id="s", originator_version=3, timestamp=T, id="l", parent_id="a", target_id=None), msg("b", None))
    assert [log.position(i) for i in ("a", "l", "b", "zz")] == [0, 1, 2, None]
    assert log.positions_of("message") == [0, 2]
    assert log.positions_of("message", limit=2) == [0]
    assert log.position("b", limit=2) is None


def test_lazy_entries_are_decoded_once_and_only_when_needed():
    """A lazy entry's type, id and parent are read without loading; ``get`` loads it once."""
    lazy = Lazy("message", "a", None, msg("a", None))
    assert isinstance(lazy, LazyEntry)
    log = log_of(lazy, msg("b", "a"))
    assert log.path_positions("b") == [0, 1]
    assert lazy.loads == 0
    assert log.get(0) == msg("a", None)
    assert log.get(0) is log.get(0)
    assert lazy.loads == 1


def test_path_positions_stop_at_a_missing_parent():
    """A walk up from the leaf stops quietly at an orphan's missing parent, as pi does."""
    log = log_of(msg("a", None), msg("b", "ghost"), msg("c", "b"))
    assert log.path_positions("c") == [1, 2]
    assert log.path_positions(None) == []


def test_path_positions_honour_the_stop_predicate():
    """``stop`` ends the walk at the first position where it holds (that position included)."""
    log = log_of(msg("a", None), msg("b", "a"), msg("c", "b"))
    assert log.path_positions("c", stop=lambda p: p == 1) == [1, 2]


def test_truncate_forgets_entries_and_their_index():
    """``truncate`` drops entries from a length on, ids and type positions included."""
    log = log_of(msg("a", None), msg("b", "a"))
    log.truncate(1)
    assert len(log) == 1 and log.position("b") is None and log.positions_of("message") == [0]


def _block(entries, *, checked):
    """A LazyBlock over ``entries`` that counts its loads (checked: with the producer's index)."""
    from sessiontree.domain.log import LazyBlock

    loads = []

    def load(i):
        loads.append(i)
        return entries[i]

    ids = [e.id for e in entries]
    index = {entry_id: i for i, entry_id in enumerate(ids)}
    ppos = [index.get(e.parent_id, -1) if e.parent_id is not None else -1 for e in entries]
    block = LazyBlock(
        [e.type for e in entries],
        ids,
        None if checked else [e.parent_id for e in entries],
        [None] * len(entries),
        load,
        checked=(index, ppos) if checked else None,
    )
    return block, loads


def test_a_block_is_indexed_in_bulk_and_decoded_on_demand():
    """Given a block of three entries, the log knows their ids, types, parents and paths
    without decoding, decodes one only when asked, and a checked block's lists are taken
    over without changing what the block itself shows."""
    entries = [msg("a", None, 2), msg("b", "a", 3), msg("c", "b", 4)]
    for checked in (True, False):
        block, loads = _block(entries, checked=checked)
        log = EntryLog()
        log.extend_block(block)
        assert log.path_positions("c") == [0, 1, 2] and log.parent_of(2) == "b"
        assert log.positions_of("message") == [0, 1, 2] and loads == []
        assert log.get(1) == entries[1] and loads == [1]
        assert log.get_many([0, 1, 2]) == entries and sorted(loads) == [0, 1, 2]
        log.add(msg("d", "c", 5))
        assert len(block) == 3 and block[-1] == entries[2] and len(log) == 4
        assert [block.parent_id(i) for i in range(3)] == [None, "a", "b"]
        assert log.path_positions("d") == [0, 1, 2, 3]
        log.truncate(3)
        assert len(log) == 3 and log.position("d") is None and len(block) == 3


def test_a_block_with_a_repeated_id_is_refused():
    """An id already in the log (or twice in a block) is `corrupt`."""
    import pytest

    from sessiontree.domain.errors import SessionError

    log = EntryLog()
    log.add(msg("a", None, 2))
    block, _ = _block([msg("b", "a", 3), msg("a", "b", 4)], checked=False)
    with pytest.raises(SessionError) as err:
        log.extend_block(block, " in session s")
    assert err.value.code == "corrupt" and "'a'" in err.value.message
    assert log.position("a") == 0 and len(log) == 1
