"""What every search index shares: the state it keeps per source, the changes it takes in, the hits it gives back.

A *source* is one session's log: a file (keyed by its name in the folder) or a session in a database (keyed by its id).
An index remembers, per source, how far it has read (``version``, and for a file its size, time, inode and offset),
so catching up reads only what was appended. The feeders (``search_jsonl.py``, ``search_recorder.py``) say what
changed; the indexes (``search_sqlite.py``, ``search_postgres.py``) store it and answer queries.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from sessiontree.search.search_text import Query, Row

FORMAT = "3"  # the index's layout; an index of another format is rebuilt (3: each row says where its line starts)


@attrs.frozen
class SourceState:
    """How far the index has read one source, and what it knows of its session."""

    session_id: str
    cwd: str = ""
    name: str | None = None
    leaf: str | None = None
    version: int = 1
    size: int = 0
    mtime_ns: int = 0
    ino: int = 0
    offset: int = 0
    last_id: str | None = None  # the id of the entry at ``version`` (a database session replaced is noticed by it)

    def after(self, rows: Sequence[Row], file: tuple[int, int, int, int] | None = None) -> SourceState:
        """The state once ``rows`` (the entries that follow) are read; ``file``: the file's size, time, inode and the
        offset read to."""
        name, leaf, version, last = self.name, self.leaf, self.version, self.last_id
        for row in rows:
            if row.kind == "session_info":
                name = row.text.strip() if row.text else None
            leaf, version, last = row.leaf, row.seq, row.entry_id
        state = attrs.evolve(self, name=name or None, leaf=leaf, version=version, last_id=last)
        if file is not None:
            state = attrs.evolve(state, size=file[0], mtime_ns=file[1], ino=file[2], offset=file[3])
        return state


@attrs.frozen
class Change:
    """What a feeder found for one source: ``state`` None drops it; ``reset`` first forgets what was read of it."""

    source: str
    state: SourceState | None
    rows: Sequence[Row] = ()
    reset: bool = False


@attrs.frozen
class Filters:
    """A search: the parsed query and what narrows it (None: no narrowing)."""

    query: Query
    limit: int = 20
    cwds: tuple[str, ...] | None = None
    kind: str | None = None
    since: str | None = None  # sortable timestamps (``search_text.sortable_time``), inclusive
    until: str | None = None
    session: str | None = None


@attrs.frozen
class Hit:
    """One entry that matched, as an index finds it."""

    session_id: str
    entry_id: str
    kind: str
    timestamp: str
    text: str
    score: float
    session_name: str | None
    cwd: str
    on_active_branch: bool
    source: str
    seq: int = 0  # the entry's line (version), and where the line starts in a file (-1: a database row)
    at: int = -1


class SearchIndex(Protocol):
    """What a feeder and the application use of an index. ``generation`` counts the writes to it: a reader that sees
    a number it did not write itself knows another process changed the index, and reads its states again."""

    def known(self, sources: Collection[str] | None = None) -> dict[str, SourceState]: ...
    def generation(self) -> int: ...
    def apply(self, changes: Iterable[Change]) -> None: ...
    def query(self, filters: Filters) -> list[Hit]: ...
    def close(self) -> None: ...


def checked(query: Callable[[Filters], list[Hit]], filters: Filters, holds: Callable[[Hit], bool]) -> list[Hit]:
    """The hits of ``filters`` whose entries the log holds as the index says (``holds``): the index is a cache, never
    a source, so a hit the log does not back (a row planted in the index, or left behind) is dropped, and the index
    asked for more in its place. Each hit costs one read of its line."""
    limit, seen = filters.limit, dict[tuple[str, str, int], bool]()
    while True:
        hits = query(attrs.evolve(filters, limit=limit))
        good = []
        for hit in hits:
            key = (hit.source, hit.entry_id, hit.seq)
            if key not in seen:
                seen[key] = holds(hit)
            if seen[key]:
                good.append(hit)
        if len(good) >= filters.limit or len(hits) < limit:
            return good[: filters.limit]
        limit *= 2


def on_branch(links: Mapping[str, str | None], leaf: str | None) -> set[str]:
    """The ids on the path from the root to ``leaf`` (``links``: each entry's parent)."""
    path: set[str] = set()
    node = leaf
    while node is not None and node not in path and node in links:
        path.add(node)
        node = links[node]
    return path


def branch_flags(rows: Sequence[Any], links: Iterable[tuple[str, str, str | None]]) -> list[Hit]:
    """Hits from query rows (source, session id, entry id, kind, time, text, score, name, cwd, leaf, seq, at), each flagged
    on or off its session's active branch; ``links``: (source, entry id, parent id) of every entry of their sources."""
    parents: dict[str, dict[str, str | None]] = {}
    for source, entry_id, parent_id in links:
        parents.setdefault(source, {})[entry_id] = parent_id
    leaves = {row[0]: row[9] for row in rows}
    branches = {source: on_branch(parents.get(source, {}), leaf) for source, leaf in leaves.items()}
    return [Hit(sid, entry_id, kind, ts, text, float(score), name, cwd, entry_id in branches[source], source, seq, at)
            for source, sid, entry_id, kind, ts, text, score, name, cwd, _leaf, seq, at in rows]


def rank(hits: list[Any], limit: int) -> list[Any]:
    """Best score first; ties: newest first, then by session and entry (every backend orders ties the same way)."""
    hits.sort(key=lambda h: (h.session_id, h.entry_id))  # stable sorts, the last one first in importance
    hits.sort(key=lambda h: h.timestamp, reverse=True)
    hits.sort(key=lambda h: h.score, reverse=True)
    return hits[:limit]
