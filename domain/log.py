"""The ordered log of a session's entries, with an id index and per-type positions.

Besides the entries, flat lists hold each position's type, id and *parent position* (-1 for a root), which walks from a
leaf follow. A storage may hand over only those lists and an :class:`EntryLoader` (the port it implements): the log then
asks it for entries by position when first needed. Every accessor returns decoded entries either way.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import NamedTuple, Protocol

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry


class Head(NamedTuple):
    """What the log knows of an entry without decoding it."""

    type: str
    id: str
    parent_id: str | None


class EntryLoader(Protocol):
    """What a storage implements to decode entries on demand (by their positions). ``held``: how many leading
    positions it can give back, so the log need not keep an entry appended below it."""

    held: int

    def load(self, positions: Sequence[int]) -> list[Entry]: ...

    # Optional: ``reloadable(position) -> bool``, whether it can decode that position again after giving it once
    # (then :meth:`EntryLog.passing` need not keep the entry).


class EntryLog:
    """Entries in append order (position 0 is the first entry after the header)."""

    __slots__ = ("_by_type", "_ids", "_index", "_items", "_loader", "_loading", "_orphans", "_passing", "_ppos", "_types")

    def __init__(self) -> None:
        self._items: list[Entry | None] = []  # None: not decoded yet (the loader has it)
        self._types: list[str] = []
        self._ids: list[str] = []
        self._ppos: list[int] = []
        self._orphans: dict[int, str] = {}  # position -> a parent id that is not earlier in the log
        self._index: dict[str, int] = {}
        self._by_type: dict[str, list[int]] = {}
        self._loader: EntryLoader | None = None
        self._loading = threading.Lock()
        self._passing = 0  # > 0: inside passing(), entries decoded are not kept

    @classmethod
    def of(cls, entries: Iterable[Entry], context: str = "") -> EntryLog:
        """A log of decoded entries (``corrupt`` for an id that appears twice)."""
        log = cls()
        for entry in entries:
            if entry.id in log._index:
                raise SessionError("corrupt", f"duplicate entry id {entry.id!r}{context}")
            log.add(entry)
        return log

    @classmethod
    def lazy(
        cls, types: list[str], ids: list[str], parents: list[int], index: dict[str, int], loader: EntryLoader,
        orphans: dict[int, str] | None = None,
    ) -> EntryLog:
        """A log of entries known by their envelopes, decoded by ``loader`` when needed. The storage has checked the tree:
        ``index`` maps each id to its position (ids unique), each parent position is earlier or -1, and ``orphans`` names
        the parents of the entries whose parent is not earlier in the log."""
        log = cls()
        log._items = [None] * len(ids)
        log._types, log._ids, log._ppos, log._index, log._loader = types, ids, parents, index, loader
        log._orphans = orphans or {}
        by_type = log._by_type
        # The index's values are the positions in order: sharing its int objects saves 28 bytes an entry.
        for pos, kind in zip(index.values(), types):
            positions = by_type.get(kind)
            if positions is None:
                by_type[kind] = [pos]
            else:
                positions.append(pos)
        return log

    def __len__(self) -> int:
        return len(self._items)

    def add(self, entry: Entry) -> None:
        """Add an entry at the end (ids are checked by the caller); kept decoded unless the loader holds what it needs to
        decode it again (a line costs less memory than its objects, and nothing the cyclic collector must walk)."""
        pos = len(self._items)
        parent = entry.parent_id
        loader = self._loader
        self._items.append(None if loader is not None and pos < loader.held else entry)
        self._types.append(entry.type)
        self._ids.append(entry.id)
        ppos = -1 if parent is None else self._index.get(parent, -1)
        self._ppos.append(ppos)
        if ppos < 0 and parent is not None:
            self._orphans[pos] = parent
        self._index[entry.id] = pos
        positions = self._by_type.get(entry.type)
        if positions is None:
            self._by_type[entry.type] = [pos]
        else:
            positions.append(pos)

    def get(self, pos: int) -> Entry:
        """The decoded entry at ``pos``."""
        entry = self._items[pos]
        return entry if entry is not None else self.get_many([pos])[0]

    def get_many(self, positions: Iterable[int]) -> list[Entry]:
        """The decoded entries at ``positions``, in that order (decoded together)."""
        items = self._items
        wanted = positions if isinstance(positions, list) else list(positions)
        missing = [pos for pos in wanted if items[pos] is None]
        if missing and self._passing:
            return self._pass(wanted, missing)
        if missing:
            with self._loading:  # one decode of each entry, also when threads ask at once
                missing = [pos for pos in missing if items[pos] is None]
                if missing:
                    assert self._loader is not None
                    for pos, entry in zip(missing, self._loader.load(missing)):
                        items[pos] = entry
        return [items[pos] for pos in wanted]  # type: ignore[misc]  # every wanted position is decoded now

    def _pass(self, wanted: list[int], missing: list[int]) -> list[Entry]:
        """``get_many`` inside :meth:`passing`: the missing entries decoded and handed over, kept only where the loader
        could not decode them again (its ``reloadable(position)``, if it has one; without it, all are kept)."""
        items = self._items
        with self._loading:
            missing = [pos for pos in dict.fromkeys(missing) if items[pos] is None]
            assert self._loader is not None
            reloadable = getattr(self._loader, "reloadable", None)
            keep = {pos for pos in missing if reloadable is None or not reloadable(pos)}
            fresh = dict(zip(missing, self._loader.load(missing))) if missing else {}
            for pos in keep:
                items[pos] = fresh[pos]
        return [fresh[pos] if items[pos] is None else items[pos] for pos in wanted]  # type: ignore[misc]

    @contextmanager
    def passing(self) -> Iterator[None]:
        """While inside, entries decoded for any reader are handed over and not kept in the log, so one pass over a
        large log (export, replay) holds the entries it is using, not every entry it went through. Nothing else
        changes: an entry asked for again is decoded again."""
        with self._loading:
            self._passing += 1
        try:
            yield
        finally:
            with self._loading:
                self._passing -= 1

    def stream(self, start: int = 0, limit: int | None = None) -> Iterator[Entry]:
        """The entries from position ``start`` to ``limit`` in order, as :meth:`stream_at` gives them."""
        return self.stream_at(range(start, len(self._items) if limit is None else min(limit, len(self._items))))

    def stream_at(self, positions: Sequence[int], batch: int = 64) -> Iterator[Entry]:
        """The entries at ``positions``, in that order, decoded ``batch`` at a time and not kept (see :meth:`passing`):
        a pass holds one batch (small, as one entry may be megabytes)."""
        with self.passing():
            for first in range(0, len(positions), batch):
                yield from self.get_many(list(positions[first : first + batch]))

    def iter_entries(self, limit: int | None = None) -> Iterator[Entry]:
        end = len(self._items) if limit is None else min(limit, len(self._items))
        for start in range(0, end, 1024):  # decoded in batches, not one by one
            yield from self.get_many(range(start, min(start + 1024, end)))

    def __iter__(self) -> Iterator[Entry]:
        return self.iter_entries()

    def heads(self, limit: int | None = None) -> Iterator[Head]:
        """Every entry's type, id and parent id, in order, without decoding anything."""
        end = len(self._items) if limit is None else min(limit, len(self._items))
        for pos in range(end):
            yield Head(self._types[pos], self._ids[pos], self.parent_of(pos))

    def position(self, entry_id: str, limit: int | None = None) -> int | None:
        """Where ``entry_id`` sits, or None (also None when it sits at or past ``limit``)."""
        pos = self._index.get(entry_id)
        if pos is None or (limit is not None and pos >= limit):
            return None
        return pos

    def has(self, entry_id: str) -> bool:
        return entry_id in self._index

    def type_of(self, pos: int) -> str:
        return self._types[pos]

    def id_of(self, pos: int) -> str:
        return self._ids[pos]

    def parent_of(self, pos: int) -> str | None:
        q = self._ppos[pos]
        return self._ids[q] if q >= 0 else self._orphans.get(pos if pos >= 0 else pos + len(self._ppos))

    def links(self) -> tuple[Sequence[str], Sequence[int]]:
        """Every position's type and parent position, for fast walks (read them, never change them)."""
        return self._types, self._ppos

    def envelopes(self) -> tuple[Sequence[str], Sequence[str], Sequence[int], dict[int, str]]:
        """Every position's type, id and parent position, and the parent ids not earlier in the log (read them only)."""
        return self._types, self._ids, self._ppos, self._orphans

    def positions_of(self, entry_type: str, limit: int | None = None) -> list[int]:
        """Positions of every entry of ``entry_type`` before ``limit``, in order."""
        positions = self._by_type.get(entry_type, [])
        if limit is None or not positions or positions[-1] < limit:
            return positions
        return positions[: bisect_left(positions, limit)]

    def types(self) -> list[str]:
        return [kind for kind, positions in self._by_type.items() if positions]

    def path_positions(
        self, leaf_id: str | None, limit: int | None = None, stop: Callable[[int], bool] | None = None
    ) -> list[int]:
        """Positions from the root (or the first position where ``stop`` is true) to ``leaf_id``. The walk stops
        silently at a missing parent, as pi does, so a file with orphans still yields a usable path."""
        out: list[int] = []
        pos = self.position(leaf_id, limit) if leaf_id is not None else None
        ppos = self._ppos
        while pos is not None and pos >= 0:
            out.append(pos)
            if stop is not None and stop(pos):
                break
            pos = ppos[pos]
        out.reverse()
        return out
