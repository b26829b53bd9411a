"""The entry log: append order, id index, per-type positions, lazy entries and paths."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry, LeafMoved, MessageAppended
from sessiontree.domain.log import EntryLog, Head
from sessiontree.domain.messages import UserMessage

SID = "s"
T = "2026-11-29T11:30:00.000Z"


def msg(id: str, parent: str | None, version: int = 2) -> MessageAppended:
    return MessageAppended(
        originator_id=SID, originator_version=version, timestamp=T, id=id, parent_id=parent, message=UserMessage(content=id)
    )


class CountingLoader:
    """A stand-in for a storage's loader: decodes entries by position, counting its calls."""

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self.calls: list[list[int]] = []

    def load(self, positions: Sequence[int]) -> list[Entry]:
        self.calls.append(list(positions))
        return [self.entries[p] for p in positions]

    @property
    def held(self) -> int:
        return len(self.entries)


def lazy(entries: list[Entry]) -> tuple[EntryLog, CountingLoader]:
    """A lazy log of ``entries``, known by their envelopes, as a storage hands it over."""
    index = {e.id: i for i, e in enumerate(entries)}
    parents = [index.get(e.parent_id, -1) if e.parent_id is not None else -1 for e in entries]
    loader = CountingLoader(entries)
    return EntryLog.lazy([e.type for e in entries], [e.id for e in entries], parents, index, loader), loader


def test_positions_follow_append_order():
    """Entries are indexed by id and by type in the order they were added."""
    log = EntryLog.of([msg("a", None), msg("b", "a"), LeafMoved(originator_id=SID, originator_version=4, timestamp=T, id="l", parent_id="b", target_id="a")])
    assert [log.position(i) for i in ("a", "b", "l")] == [0, 1, 2]
    assert log.positions_of("message") == [0, 1] and log.positions_of("leaf") == [2]
    assert log.positions_of("message", limit=1) == [0]
    assert log.types() == ["message", "leaf"]


def test_a_log_of_entries_refuses_a_repeated_id():
    """An id twice in the entries a log is made of is ``corrupt``, naming the id."""
    with pytest.raises(SessionError) as caught:
        EntryLog.of([msg("a", None), msg("a", "a")], " in session s")
    assert caught.value.code == "corrupt" and "'a'" in caught.value.message and "session s" in caught.value.message


def test_lazy_entries_are_decoded_once_in_batches_and_only_when_needed():
    """The envelopes answer ids, types, parents and walks without the loader; ``get_many``
    asks it once for every undecoded position and keeps what it got."""
    entries = [msg("a", None), msg("b", "a"), msg("c", "b")]
    log, loader = lazy(entries)
    assert [log.id_of(p) for p in range(3)] == ["a", "b", "c"] and log.parent_of(2) == "b"
    assert log.path_positions("c") == [0, 1, 2] and loader.calls == []
    assert list(log.heads()) == [Head("message", "a", None), Head("message", "b", "a"), Head("message", "c", "b")]
    assert log.get_many([2, 0]) == [entries[2], entries[0]] and loader.calls == [[2, 0]]
    assert log.get(2) is entries[2] and log.get_many([0, 1, 2]) == entries
    assert loader.calls == [[2, 0], [1]]


def test_threads_asking_for_the_same_entries_decode_them_once():
    """Threads reading one lazy log at once never ask the loader for a position twice."""
    entries = [msg(f"e{i}", f"e{i - 1}" if i else None, i + 2) for i in range(400)]
    log, loader = lazy(entries)
    start = threading.Barrier(4)

    def read() -> None:
        start.wait()
        for p in range(0, 400, 7):
            assert log.get(p) is entries[p]

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    asked = [p for call in loader.calls for p in call]
    assert sorted(asked) == sorted(set(asked)) == list(range(0, 400, 7))


def test_an_appended_entry_joins_a_lazy_log():
    """``add`` after a lazy block: its parent is found by id, the index and types follow."""
    log, _ = lazy([msg("a", None)])
    log.add(msg("b", "a", 3))
    assert log.path_positions("b") == [0, 1] and log.positions_of("message") == [0, 1] and log.has("b")


def test_an_appended_entry_the_loader_holds_is_not_kept_but_decoded_again():
    """An entry the loader can give back is not kept decoded; reading it asks the loader."""
    entries = [msg("a", None), msg("b", "a", 3)]
    log, loader = lazy(entries[:1])
    loader.entries = entries  # the storage now holds line 2 too
    log.add(entries[1])
    assert loader.calls == [] and log.get(1) == entries[1] and loader.calls == [[1]]
    held, other = lazy(entries[:1])
    held.add(entries[1])  # this loader does not hold position 1: the log keeps the entry
    assert held.get(1) is entries[1] and other.calls == []


def test_path_positions_stop_at_a_missing_parent():
    """A walk up from the leaf stops quietly at an orphan's missing parent, as pi does."""
    log = EntryLog.of([msg("a", None), msg("x", "nowhere"), msg("y", "x")])
    assert log.path_positions("y") == [1, 2]
    assert log.parent_of(1) == "nowhere"


def test_path_positions_honour_the_stop_predicate_and_the_limit():
    """``stop`` ends the walk at the first position where it holds; a leaf past ``limit`` has no path."""
    log = EntryLog.of([msg("a", None), msg("b", "a"), msg("c", "b")])
    assert log.path_positions("c", stop=lambda pos: pos == 1) == [1, 2]
    assert log.path_positions("c", limit=2) == [] and log.path_positions("b", limit=2) == [0, 1]
    assert log.path_positions(None) == []


def test_iterating_a_log_gives_its_decoded_entries() -> Any:
    """A log iterates over its entries in order (decoding lazy ones)."""
    entries = [msg("a", None), msg("b", "a")]
    log, _ = lazy(entries)
    assert list(log) == entries and len(log) == 2
