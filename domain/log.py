"""The ordered log of a session's entries, with an id index and per-type positions.

Entries may be held *lazily*: a storage adapter that can read an entry's type, id and
parent without decoding the rest hands over a :class:`LazyEntry`, or many at once as a
:class:`LazyBlock`, and the log decodes each (once) the first time anything beyond those
three fields is needed. What a caller sees never depends on this: every public accessor
returns decoded entries.

Besides the entries themselves the log keeps three flat lists, one slot per position: the
type, the id and the *parent position* (-1 for a root or a parent not earlier in the log).
Walks from a leaf towards the root (the path, the context's settings, branch tests) follow
those integers instead of looking every parent id up, and a block of 100k lazy entries is
indexed with a few bulk operations instead of one object per line (docs/performance.md).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import ge
from typing import Any, Protocol, overload, runtime_checkable

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry
from sessiontree.domain.gcpause import building_many


@runtime_checkable
class LazyEntry(Protocol):
    """An entry whose type, id and parent are known and whose body is decoded on demand."""

    type: str
    id: str
    parent_id: str | None

    def load(self) -> Entry: ...


class LazyBlock(Sequence[Any]):
    """Many entries at once: their types, ids and parent ids now, their bodies on demand.

    ``items[i]`` is the decoded entry ``i`` or None; ``load(i)`` decodes entry ``i`` (and
    raises the storage's error for a body that does not decode); ``load_many(indices)``
    decodes several, in order, and defaults to calling ``load`` for each. As a sequence, the
    block yields decoded entries where it has them and :class:`LazyHead` objects (with
    ``load()``) elsewhere, so code that takes a plain list of entries and lazy entries takes
    a block too.
    """

    __slots__ = ("types", "ids", "parent_ids", "items", "load", "_load_many", "checked", "_ppos", "_count")

    def __init__(
        self,
        types: list[str],
        ids: list[str],
        parent_ids: list[str | None] | None,
        items: list[Entry | None],
        load: Callable[[int], Entry],
        load_many: Callable[[Sequence[int]], list[Entry]] | None = None,
        *,
        checked: tuple[dict[str, int], list[int]] | None = None,
    ) -> None:
        count = len(ids)
        if parent_ids is None and checked is None:
            raise ValueError("a LazyBlock needs parent_ids, or parent positions in checked")
        if not (len(types) == count == len(items) == len(parent_ids if parent_ids is not None else checked[1])):  # type: ignore[index]
            raise ValueError("a LazyBlock's lists must have one slot per entry")
        self.types = types
        self.ids = ids
        self.parent_ids = parent_ids
        self.items = items
        self.load = load
        self._load_many = load_many
        # What a producer that has checked the tree already knows: each id's index in the
        # block (ids unique) and each entry's parent index (-1: a root; parents earlier).
        # An EntryLog takes these (and the lists above) over instead of copying them.
        self.checked = checked
        self._ppos = checked[1] if checked is not None else None
        self._count = count

    def parent_id(self, index: int) -> str | None:
        if self.parent_ids is not None:
            return self.parent_ids[index]
        q = self._ppos[index]  # type: ignore[index]
        return self.ids[q] if q >= 0 else None

    def parent_id_list(self) -> list[str | None]:
        if self.parent_ids is not None:
            return self.parent_ids
        return [self.parent_id(i) for i in range(self._count)]

    def load_many(self, indices: Sequence[int]) -> list[Entry]:
        if self._load_many is not None:
            return self._load_many(indices)
        load = self.load
        return [load(i) for i in indices]

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("LazyBlock index out of range")
        item = self.items[index]
        if item is not None:
            return item
        return LazyHead(self.types[index], self.ids[index], self.parent_id(index), _BlockLoader(self, index))

    def __repr__(self) -> str:
        return f"<LazyBlock of {len(self)} entries>"


class _BlockLoader:
    __slots__ = ("block", "index")

    def __init__(self, block: LazyBlock, index: int) -> None:
        self.block = block
        self.index = index

    def __call__(self) -> Entry:
        block, index = self.block, self.index
        entry = block.items[index]
        if entry is None:
            entry = block.items[index] = block.load(index)
        return entry


class LazyHead:
    """An undecoded entry seen from outside the log: its type, id and parent, and ``load()``."""

    __slots__ = ("type", "id", "parent_id", "_load")

    def __init__(self, type: str, id: str, parent_id: str | None, load: Callable[[], Entry]) -> None:
        self.type = type
        self.id = id
        self.parent_id = parent_id
        self._load = load

    def load(self) -> Entry:
        return self._load()

    def __repr__(self) -> str:
        return f"<lazy {self.type} entry {self.id}>"


class EntryLog:
    """Entries in append order (position 0 is the first entry after the header)."""

    __slots__ = ("_items", "_types", "_ids", "_ppos", "_orphans", "_index", "_by_type", "_blocks", "_starts")

    def __init__(self) -> None:
        # _items[pos]: the decoded Entry, a LazyEntry, or None (undecoded, in a block)
        self._items: list[Any] = []
        self._types: list[str] = []
        self._ids: list[str] = []
        self._ppos: list[int] = []  # parent position; -1: a root or a parent not earlier in the log
        self._orphans: dict[int, str] = {}  # position -> a parent id that is not earlier in the log
        self._index: dict[str, int] = {}
        self._by_type: dict[str, list[int]] = {}
        self._blocks: list[LazyBlock] = []
        self._starts: list[int] = []  # where each block begins

    def __len__(self) -> int:
        return len(self._items)

    def add(self, entry: Any) -> None:
        """Add an entry or a :class:`LazyEntry` at the end (ids are checked by the caller)."""
        pos = len(self._items)
        entry_id = entry.id
        kind = entry.type
        parent = entry.parent_id
        self._items.append(entry)
        self._types.append(kind)
        self._ids.append(entry_id)
        if parent is None:
            self._ppos.append(-1)
        else:
            ppos = self._index.get(parent, -1)
            self._ppos.append(ppos)
            if ppos < 0:
                self._orphans[pos] = parent
        self._index[entry_id] = pos
        positions = self._by_type.get(kind)
        if positions is None:
            self._by_type[kind] = [pos]
        else:
            positions.append(pos)

    def extend_block(self, block: LazyBlock, context: str = "") -> None:
        """Add every entry of ``block`` at the end, in bulk.

        Raises ``SessionError("corrupt")`` for an id that is already in the log or twice in
        the block (``context`` names the session in the message).
        """
        start = len(self._items)
        count = len(block)
        if not count:
            return
        ids = block.ids
        if start == 0 and block.checked is not None:
            self._adopt(block)
            return
        index = self._index
        index.update(zip(ids, range(start, start + count)))
        if len(index) != start + count:
            self._undo_index(ids, start)
            seen = set(self._ids)
            for entry_id in ids:
                if entry_id in seen:
                    raise SessionError("corrupt", f"duplicate entry id {entry_id!r}{context}")
                seen.add(entry_id)
        parents = block.parent_id_list()
        get = index.get
        ppos = [get(p, -1) for p in parents]  # a None parent is never an id: -1
        if ppos.count(-1) != parents.count(None) or any(map(ge, ppos, range(start, start + count))):  # a parent not earlier: an orphan
            for offset, (parent, q) in enumerate(zip(parents, ppos)):
                if parent is not None and (q < 0 or q >= start + offset):
                    ppos[offset] = -1
                    self._orphans[start + offset] = parent
        self._add_block(block, ppos)

    def _adopt(self, block: LazyBlock) -> None:
        """An empty log takes over a checked block's lists and index instead of copying them
        (at 100k entries each copy is ~1 MB, the index ~5 MB). The block keeps its length;
        the log appends to the lists it now owns."""
        assert block.checked is not None
        self._index, self._ppos = block.checked
        block.checked = None
        self._items, self._types, self._ids = block.items, block.types, block.ids
        by_type = self._by_type
        for kind in dict.fromkeys(block.types):  # in order of first appearance, as add() has it
            by_type[kind] = []
        lists = {kind: positions.append for kind, positions in by_type.items()}
        # The index's values are the positions 0..n-1 in order: the same int objects serve
        # here (a separate int per entry and type list would be 32 bytes each).
        for pos, kind in zip(self._index.values(), block.types):
            lists[kind](pos)
        self._blocks.append(block)
        self._starts.append(0)

    def _add_block(self, block: LazyBlock, ppos: list[int]) -> None:
        start = len(self._items)
        count = len(block)
        ids = block.ids
        self._items.extend(block.items)
        self._types.extend(block.types)
        self._ids.extend(ids)
        self._ppos.extend(ppos)
        by_type = self._by_type
        for kind in dict.fromkeys(block.types):
            by_type.setdefault(kind, [])
        if len(by_type) == 1:
            by_type[block.types[0]].extend(range(start, start + count))
        else:
            lists = {kind: positions.append for kind, positions in by_type.items()}
            for pos, kind in enumerate(block.types, start):
                lists[kind](pos)
        self._blocks.append(block)
        self._starts.append(start)

    def _undo_index(self, ids: list[str], start: int) -> None:
        index = self._index
        for entry_id in ids:
            pos = index.get(entry_id)
            if pos is not None and pos >= start:
                del index[entry_id]
        for pos, entry_id in enumerate(self._ids):  # an id in the block that was already here
            index[entry_id] = pos

    def truncate(self, length: int) -> None:
        """Drop every entry from ``length`` on (used to undo an append that failed to save)."""
        while len(self._items) > length:
            self._items.pop()
            pos = len(self._items)
            del self._index[self._ids.pop()]
            self._by_type[self._types.pop()].pop()
            self._ppos.pop()
            self._orphans.pop(pos, None)
        while self._starts and self._starts[-1] >= length:
            self._starts.pop()
            self._blocks.pop()

    def position(self, entry_id: str, limit: int | None = None) -> int | None:
        """Where ``entry_id`` sits, or None (also None when it sits at or past ``limit``)."""
        pos = self._index.get(entry_id)
        if pos is None or (limit is not None and pos >= limit):
            return None
        return pos

    def head(self, pos: int) -> Any:
        """The raw item at ``pos``: an Entry, or an object with type, id, parent_id and load()."""
        item = self._items[pos]
        if item is not None:
            return item
        if pos < 0:
            pos += len(self._items)
        return LazyHead(self._types[pos], self._ids[pos], self.parent_of(pos), lambda: self.get(pos))

    def get(self, pos: int) -> Entry:
        """The decoded entry at ``pos``."""
        item = self._items[pos]
        if isinstance(item, Entry):
            return item
        if item is None:
            if pos < 0:
                pos += len(self._items)
            entry = self._load(pos)
        else:
            entry = item.load()
        self._items[pos] = entry
        return entry

    def _load(self, pos: int) -> Entry:
        which = bisect_right(self._starts, pos) - 1
        block = self._blocks[which]
        index = pos - self._starts[which]
        entry = block.items[index]
        if entry is None:
            entry = block.items[index] = block.load(index)
        return entry

    def parent_of(self, pos: int) -> str | None:
        q = self._ppos[pos]
        if q >= 0:
            return self._ids[q]
        return self._orphans.get(pos if pos >= 0 else pos + len(self._ppos))

    def parent_position(self, pos: int) -> int:
        """The position of the entry's parent, or -1 (a root, or a parent not earlier)."""
        return self._ppos[pos]

    def type_of(self, pos: int) -> str:
        return self._types[pos]

    def id_of(self, pos: int) -> str:
        return self._ids[pos]

    def links(self) -> tuple[Sequence[str], Sequence[int]]:
        """Every position's type and parent position, for fast walks (read them, never change them)."""
        return self._types, self._ppos

    def positions_of(self, entry_type: str, limit: int | None = None) -> list[int]:
        """Positions of every entry of ``entry_type`` before ``limit``, in order."""
        positions = self._by_type.get(entry_type, [])
        if limit is None or not positions or positions[-1] < limit:
            return positions
        return positions[: bisect_left(positions, limit)]

    def types(self) -> list[str]:
        return [kind for kind, positions in self._by_type.items() if positions]

    def get_many(self, positions: Iterable[int]) -> list[Entry]:
        """The decoded entries at ``positions``, in that order.

        Undecoded entries of a block are decoded together (one call into the storage's
        decoder per block). Decoding many lazy entries makes many objects that all survive;
        the cyclic garbage collector is paused meanwhile, since its full passes over a
        growing heap would otherwise dominate (none of these objects forms a cycle).
        """
        items = self._items
        positions = positions if isinstance(positions, list) else list(positions)
        with building_many():
            missing = [pos for pos in positions if items[pos] is None]
            if missing:
                self._load_blocks(missing)
            out = [items[pos] for pos in positions]
            for i, item in enumerate(out):
                if not isinstance(item, Entry):
                    out[i] = items[positions[i]] = item.load()
        return out

    def _load_blocks(self, missing: list[int]) -> None:
        """Decode the undecoded block entries at ``missing`` (ascending or not), block by block."""
        items = self._items
        starts = self._starts
        groups: dict[int, list[int]] = {}
        for pos in missing:
            groups.setdefault(bisect_right(starts, pos) - 1, []).append(pos)
        for which, group in groups.items():
            block = self._blocks[which]
            start = starts[which]
            indices = [pos - start for pos in group]
            block_items = block.items
            todo = [i for i in indices if block_items[i] is None]
            if todo:
                for i, entry in zip(todo, block.load_many(todo)):
                    block_items[i] = entry
            for pos, i in zip(group, indices):
                items[pos] = block_items[i]

    def iter_entries(self, limit: int | None = None) -> Iterator[Entry]:
        end = len(self._items) if limit is None else min(limit, len(self._items))
        get = self.get
        for pos in range(end):
            yield get(pos)

    def iter_heads(self, limit: int | None = None) -> Iterator[Any]:
        """Every item before ``limit``: decoded entries, or objects with type, id and parent_id."""
        end = len(self._items) if limit is None else min(limit, len(self._items))
        items = self._items
        for pos in range(end):
            item = items[pos]
            yield item if item is not None else self.head(pos)

    def path_positions(
        self, leaf_id: str | None, limit: int | None = None, stop: Callable[[int], bool] | None = None
    ) -> list[int]:
        """Positions from the root (or the first position where ``stop`` is true) to ``leaf_id``.

        The walk follows parent links and stops silently at a missing parent, as pi does, so
        a file with orphans still yields a usable path.
        """
        out: list[int] = []
        if leaf_id is None:
            return out
        pos = self._index.get(leaf_id)
        if pos is None or (limit is not None and pos >= limit):
            return out
        ppos = self._ppos
        append = out.append
        if stop is None:
            while pos >= 0:
                append(pos)
                pos = ppos[pos]
        else:
            while pos >= 0:
                append(pos)
                if stop(pos):
                    break
                pos = ppos[pos]
        out.reverse()
        return out
