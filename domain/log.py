"""The ordered log of a session's entries, with an id index and per-type positions.

Entries may be held *lazily*: a storage adapter that can read an entry's type, id and
parent without decoding the rest hands over a :class:`LazyEntry`, and the log decodes it
(once) the first time anything beyond those three fields is needed. What a caller sees
never depends on this: every public accessor returns decoded entries.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, runtime_checkable

from sessiontree.domain.events import Entry
from sessiontree.domain.gcpause import building_many


@runtime_checkable
class LazyEntry(Protocol):
    """An entry whose type, id and parent are known and whose body is decoded on demand."""

    type: str
    id: str
    parent_id: str | None

    def load(self) -> Entry: ...


class EntryLog:
    """Entries in append order (position 0 is the first entry after the header)."""

    __slots__ = ("_items", "_index", "_by_type")

    def __init__(self) -> None:
        self._items: list[Any] = []
        self._index: dict[str, int] = {}
        self._by_type: dict[str, list[int]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def add(self, entry: Any) -> None:
        """Add an entry or a :class:`LazyEntry` at the end (ids are checked by the caller)."""
        pos = len(self._items)
        self._items.append(entry)
        self._index[entry.id] = pos
        positions = self._by_type.get(entry.type)
        if positions is None:
            self._by_type[entry.type] = [pos]
        else:
            positions.append(pos)

    def truncate(self, length: int) -> None:
        """Drop every entry from ``length`` on (used to undo an append that failed to save)."""
        while len(self._items) > length:
            entry = self._items.pop()
            del self._index[entry.id]
            self._by_type[entry.type].pop()

    def position(self, entry_id: str, limit: int | None = None) -> int | None:
        """Where ``entry_id`` sits, or None (also None when it sits at or past ``limit``)."""
        pos = self._index.get(entry_id)
        if pos is None or (limit is not None and pos >= limit):
            return None
        return pos

    def head(self, pos: int) -> Any:
        """The raw item at ``pos``: an Entry or a LazyEntry (type, id, parent_id only)."""
        return self._items[pos]

    def get(self, pos: int) -> Entry:
        """The decoded entry at ``pos``."""
        item = self._items[pos]
        if isinstance(item, Entry):
            return item
        entry = item.load()
        self._items[pos] = entry
        return entry

    def parent_of(self, pos: int) -> str | None:
        return self._items[pos].parent_id

    def type_of(self, pos: int) -> str:
        return self._items[pos].type

    def positions_of(self, entry_type: str, limit: int | None = None) -> list[int]:
        """Positions of every entry of ``entry_type`` before ``limit``, in order."""
        positions = self._by_type.get(entry_type, [])
        if limit is None or not positions or positions[-1] < limit:
            return positions
        return positions[: bisect_left(positions, limit)]

    def types(self) -> list[str]:
        return list(self._by_type)

    def get_many(self, positions: Iterable[int]) -> list[Entry]:
        """The decoded entries at ``positions``, in that order.

        Decoding many lazy entries makes many objects that all survive; the cyclic garbage
        collector is paused meanwhile, since its full passes over a growing heap would
        otherwise dominate (none of these objects forms a cycle).
        """
        items = self._items
        out: list[Entry] = []
        with building_many():
            for pos in positions:
                item = items[pos]
                if not isinstance(item, Entry):
                    item = items[pos] = item.load()
                out.append(item)
        return out

    def iter_entries(self, limit: int | None = None) -> Iterator[Entry]:
        end = len(self._items) if limit is None else min(limit, len(self._items))
        get = self.get
        for pos in range(end):
            yield get(pos)

    def iter_heads(self, limit: int | None = None) -> Iterator[Any]:
        end = len(self._items) if limit is None else min(limit, len(self._items))
        return iter(self._items[:end]) if end != len(self._items) else iter(self._items)

    def path_positions(
        self, leaf_id: str | None, limit: int | None = None, stop: Callable[[int], bool] | None = None
    ) -> list[int]:
        """Positions from the root (or the first position where ``stop`` is true) to ``leaf_id``.

        The walk follows ``parent_id`` links and stops silently at a missing parent, as pi
        does, so a file with orphans still yields a usable path.
        """
        out: list[int] = []
        if leaf_id is None:
            return out
        index = self._index
        items = self._items
        pos = index.get(leaf_id)
        while pos is not None and (limit is None or pos < limit):
            out.append(pos)
            if stop is not None and stop(pos):
                break
            parent = items[pos].parent_id
            if parent is None:
                break
            nxt = index.get(parent)
            if nxt is None or nxt >= pos:
                break
            pos = nxt
        out.reverse()
        return out
