"""The search of each kind of store: which index it keeps, where, and how it learns what changed.

| store | index | catching up |
|---|---|---|
| JSONL folder | an SQLite FTS5 file beside the sessions (ours) or in the cache directory (pi's) | file sizes and offsets |
| SQLite database | FTS5 tables in the same database | per-session versions |
| PostgreSQL | a ``tsvector`` column with a GIN index, in the same schema | per-session versions |
| memory, POPO | an SQLite FTS5 database in memory | per-session versions |

The index of sessiontree's own folder is ``.sessiontree-search.sqlite`` in it; a folder of someone else's (pi's) has
its index in the user's cache directory (``<cache>/sessiontree/search/<hash>.sqlite``, naming the folder it indexes),
so searching never writes into pi's folders. Catching up costs one ``stat`` per file: a file that only grew is read
from the offset the index stopped at, a new, shrunk or replaced one from its first line, a vanished one is dropped. A
torn last line (a writer mid-append) waits for the next search.

A recorder's index remembers each session's version; :func:`session_versions` asks the store for every session's
current one, and only sessions whose version moved are read, from the version after the one indexed. It does not read
the notification log: how the store finds its sessions' versions is this one function's business, so a store that
keeps a per-session summary row answers from it instead. A session whose last indexed entry is no longer there
(deleted, then made again) is read again from its header; a session gone is dropped.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs

from sessiontree.content.blob_stores import folder_for
from sessiontree.content.blob_tables import blobs_of
from sessiontree.domain.errors import SessionError
from sessiontree.search.search_index import (
    Change,
    Filters,
    Hit,
    PostgresSearchIndex,
    SearchIndex,
    SourceState,
    SqliteSearchIndex,
    checked,
)
from sessiontree.search.search_text import Row, backs, entry_row, erased_id, same_place, with_text, without_erased
from sessiontree.storage import folders
from sessiontree.storage.files import open_regular, read_lines
from sessiontree.storage.memory_recorder import MemoryRecorder
from sessiontree.wire import jsontext
from sessiontree.wire.jsontext import DECODE_ERRORS
from sessiontree.wire.schema import header_of, line_of

if TYPE_CHECKING:  # the stores are imported when one is searched: the command line's search of a folder needs none
    from sessiontree.storage.store import SessionStore

INDEX_FILE = ".sessiontree-search.sqlite"


def index_path(root: str) -> tuple[str | None, str | None]:
    """Where the search index of ``root`` is kept, and the folder it must name (None: it is in the folder itself)."""
    if folders.is_ours(root):
        return os.path.join(root, INDEX_FILE), None
    path = folders.cache_file("search", root, ".sqlite", 32)
    return (path, os.path.realpath(root)) if path is not None else (None, None)


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ino


def read_change(name: str, path: str, st: os.stat_result, state: SourceState | None) -> Change:
    """What a new or changed file adds: the lines after ``state``'s offset when the file only grew, else all of it."""
    stamp = _stamp(st)
    try:
        fd = open_regular(path, follow=False)
    except OSError:
        return Change(name, None)
    try:
        if (state is not None and state.ino == st.st_ino and 0 < state.offset <= st.st_size
                and os.pread(fd, 1, state.offset - 1) == b"\n"):
            return _read(fd, name, state, state.offset, stamp, reset=False, blobs=folder_for(path))
        return _read(fd, name, None, 0, stamp, reset=state is not None, blobs=folder_for(path))
    finally:
        os.close(fd)


def _read(
    fd: int, name: str, state: SourceState | None, offset: int, stamp: tuple[int, int, int], *, reset: bool, blobs: Any,
) -> Change:
    rows: list[Row] = []
    erased: set[str] = set()
    seq = state.version if state is not None else 0
    reached, whole = offset, state is None
    for line, end in read_lines(fd, offset, jsontext.MAX_LINE_BYTES):
        reached, seq = end, seq + 1
        data = _parse(line)
        if state is None:
            header = header_of(data)
            if header is None or header.type != "session" or not isinstance(header.id, str):
                return _not_session(name, stamp)
            state = SourceState(header.id, cwd=_cwd(header.cwd))
            continue
        row = entry_row(seq, with_text(data, line, blobs), end - len(line) - 1 if line is not None else -1)
        if row is not None:
            rows.append(row)
        if (target := erased_id(data)) is not None:
            erased.add(target)
    if state is None:  # not even a whole header yet
        return _not_session(name, stamp)
    if erased and not whole:  # an erasure: the session is read again, the erased entries without their text
        return _read(fd, name, None, 0, stamp, reset=True, blobs=blobs)
    return Change(name, state.after(rows, (*stamp, reached)), without_erased(rows, erased), reset)


def _not_session(name: str, stamp: tuple[int, int, int]) -> Change:
    """A file with no session header: remembered (so it is not read again until it changes), never searched."""
    return Change(name, SourceState("", size=stamp[0], mtime_ns=stamp[1], ino=stamp[2]), reset=True)


def _cwd(value: object) -> str:
    return same_place(value) if isinstance(value, str) else ""


def _parse(line: bytes | None) -> object:
    if line is None:
        return None
    try:
        return jsontext.loads(line)  # never a line of too many values
    except DECODE_ERRORS:
        return None  # a line that cannot be read is not searched (verify and open report it)


class JsonlSearch:
    """Search over one folder of JSONL sessions, its index caught up before each query."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.fspath(root)
        self._index: SqliteSearchIndex | None = None
        self._where: str | None = None
        self._stamps: dict[str, tuple[int, int, int]] = {}
        self._generation = -1
        self._lock = threading.Lock()

    def index(self) -> SqliteSearchIndex:
        path, real = index_path(self.root)
        if self._index is None or path != self._where:  # the folder may have become ours since: the index moves in
            if self._index is not None:
                self._index.close()
            if path is not None and real is not None and not folders.private_parent(path):
                path = None
            self._index = SqliteSearchIndex(path or ":memory:", root=real)
            self._where, self._stamps, self._generation = path, self._index.stamps(), self._index.generation()
        return self._index

    def refresh(self) -> SqliteSearchIndex:
        """Bring the index up to date with the folder: a ``stat`` of every file says which changed (docs/search.md)."""
        index = self.index()
        if index.generation() != self._generation:  # another process wrote the index: what it holds, read again
            self._stamps, self._generation = index.stamps(), index.generation()
        names, changed, _folders = scan(self.root, self._stamps)
        gone = set() if len(names) == len(self._stamps) and not changed else self._stamps.keys() - set(names)
        if not changed and not gone:
            return index
        with index.writing():
            states = index.known([n for n, _p, _st in changed] + list(gone))  # another process may have caught up
            changes = [read_change(n, p, st, states.get(n)) for n, p, st in changed
                       if n not in states or _stamp(st) != _file_stamp(states[n])]
            changes += [Change(n, None) for n in gone if n in states]
            index.apply(changes)
            self._generation = index.generation()
        found: dict[str, SourceState | None] = {**dict.fromkeys(gone), **states}  # states: what another caught up with
        found.update((c.source, c.state) for c in changes)
        self._remember(found)
        return index

    def _remember(self, states: Mapping[str, SourceState | None]) -> None:
        """What the index holds of these files now (None: nothing), as their size, time and inode when they were read
        (what ``scan`` compares)."""
        for name, state in states.items():
            if state is None:
                self._stamps.pop(name, None)
            else:
                self._stamps[name] = _file_stamp(state)

    def search(self, filters: Filters) -> list[Hit]:
        if not os.path.isdir(self.root):
            return []  # no folder, no sessions: and no index made for it
        with self._lock:
            return checked(self.refresh().query, filters, self._holds)

    def _holds(self, hit: Hit) -> bool:
        """Does the file the hit names (one the folder has) hold its entry, at the line the index says?"""
        if hit.source not in self._stamps or hit.at < 0:
            return False
        path = os.path.join(self.root, hit.source)
        try:
            fd = open_regular(path, follow=False)
        except OSError:
            return False
        try:
            if hit.at and os.pread(fd, 1, hit.at - 1) != b"\n":
                return False
            line = next(iter(read_lines(fd, hit.at, jsontext.MAX_LINE_BYTES)), (None, 0))[0]
        except OSError:
            return False
        finally:
            os.close(fd)
        return line is not None and backs(hit, _parse(line), line, folder_for(path))

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None


def scan(
    root: str, stamps: dict[str, tuple[int, int, int]],
) -> tuple[list[str], list[tuple[str, str, os.stat_result]], set[str]]:
    """The session files of ``root`` (as ``storage/jsonl_repo.py`` lists them: ``*.jsonl`` directly in it and in its
    sub-folders, nothing hidden, no links), those whose size, time or inode differ from ``stamps``, and the folders
    looked in ("" and "sub/"). One ``stat`` per file, in one loop."""
    names: list[str] = []
    changed: list[tuple[str, str, os.stat_result]] = []
    folders_in = [("", root)]
    seen: set[str] = set()
    while folders_in:
        prefix, folder = folders_in.pop()
        seen.add(prefix)
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                name = entry.name
                if name[0] == ".":
                    continue
                if not name.endswith(".jsonl"):
                    if not prefix and entry.is_dir(follow_symlinks=False):
                        folders_in.append((name + "/", entry.path))
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    if not prefix and stat.S_ISDIR(st.st_mode):
                        folders_in.append((name + "/", entry.path))
                    continue
                key = prefix + name
                names.append(key)
                if stamps.get(key) != (st.st_size, st.st_mtime_ns, st.st_ino):
                    changed.append((key, entry.path, st))
    return names, changed, seen


def _file_stamp(state: SourceState) -> tuple[int, int, int]:
    return state.size, state.mtime_ns, state.ino


HIDDEN = "~"  # streams that are not sessions (``~deletions``) start with this


def session_versions(recorder: Any, module: str) -> dict[str, int]:
    """Every session's current version in ``recorder`` (ours in memory, or eventsourcing's SQLite or PostgreSQL one)."""
    if isinstance(recorder, MemoryRecorder):  # memory, popo: (memory_recorder.py)
        return {sid: v for sid, v in recorder.stream_versions().items() if not sid.startswith(HIDDEN)}
    listing = getattr(recorder, "listing_table_name", None)  # PostgreSQL's lock-free recorder keeps a row per session
    table = listing or recorder.events_table_name
    select = ("SELECT session_id AS sid, version AS v FROM {0}" if listing else
              "SELECT originator_id AS sid, MAX(originator_version) AS v FROM {0} GROUP BY originator_id")
    if module == "eventsourcing.sqlite":
        sql: Any = select.format(table)
    else:
        from psycopg.sql import SQL, Identifier

        sql = SQL(select.format("{0}.{1}")).format(Identifier(recorder.datastore.schema), Identifier(table))
    with recorder.datastore.transaction(commit=False) as cursor:
        cursor.execute(sql)
        rows = cursor.fetchall()
    return {str(row["sid"]): int(row["v"]) for row in rows if not str(row["sid"]).startswith(HIDDEN)}


def _line(stored: Any) -> Any:
    return _parse(bytes(stored.state))


def read_session(recorder: Any, sid: str, state: SourceState | None) -> Change:
    """What a session whose version moved adds: the events after ``state``'s version, or all of them."""
    reset = state is not None
    if state is not None:
        last = recorder.select_events(sid, gt=state.version - 1, lte=state.version)
        if last and (entry := line_of(_line(last[0]))) is not None and entry.id == state.last_id:
            reset = False
        else:
            state = None
    whole = state is None
    events = recorder.select_events(sid, gt=state.version if state is not None else None)
    rows: list[Row] = []
    erased: set[str] = set()
    for stored in events:
        data = _line(stored)
        if state is None:
            header = header_of(data)
            if stored.originator_version != 1 or header is None or header.type != "session":
                return Change(sid, None, reset=True)
            cwd = header.cwd
            state = SourceState(sid, cwd=same_place(cwd) if isinstance(cwd, str) else "")
            continue
        row = entry_row(stored.originator_version, with_text(data, bytes(stored.state), blobs_of(recorder)))
        if row is not None:
            rows.append(row)
        if (target := erased_id(data)) is not None:
            erased.add(target)
    if state is None:
        return Change(sid, None, reset=True)
    if erased and not whole:  # an erasure: the session is read again, the erased entries without their text
        return attrs.evolve(read_session(recorder, sid, None), reset=True)
    return Change(sid, state.after(rows), without_erased(rows, erased), reset)


class RecorderSearch:
    """Search over the sessions of one recorder, its index caught up before each query. ``versions`` gives every
    session's current version (``session_versions`` or the store's own); ``unchanged``, where the store has one, is a
    cheap token that stays the same while nothing was written (SQLite's ``data_version``), so asking every session's
    version is skipped then."""

    def __init__(self, index: Any, recorder: Any, versions: Any, unchanged: Any = None) -> None:
        self.index: SearchIndex = index
        self._unchanged, self._token = unchanged, None
        self._writing = index.writing
        self.recorder = recorder
        self.versions = versions
        self._states = index.known()
        self._generation = index.generation()
        self._lock = threading.Lock()

    def refresh(self) -> None:
        if self.index.generation() != self._generation:  # another process wrote the index: read its states again
            self._states, self._generation = self.index.known(), self.index.generation()
        token = self._unchanged() if self._unchanged is not None else None
        if token is not None and token == self._token:
            return
        versions = self.versions()
        self._token = token
        current = all(self._states.get(sid, _NONE).version == v for sid, v in versions.items())
        if current and self._states.keys() <= versions.keys():
            return
        with self._writing():
            moved = [sid for sid, v in versions.items() if self._states.get(sid, _NONE).version != v]
            states = self.index.known(moved + list(self._states.keys() - versions.keys()))  # as stored now
            changes = [read_session(self.recorder, sid, states.get(sid)) for sid in moved
                       if sid not in states or states[sid].version != versions[sid]]
            changes += [Change(sid, None) for sid in states.keys() - versions.keys()]
            self.index.apply(changes)
            self._generation = self.index.generation()
        for sid in states.keys() - versions.keys():
            self._states.pop(sid, None)
        self._states.update((c.source, c.state) for c in changes if c.state is not None)
        for change in changes:
            if change.state is None:
                self._states.pop(change.source, None)

    def search(self, filters: Filters) -> list[Hit]:
        with self._lock:
            self.refresh()
            return checked(self.index.query, filters, self._holds)

    def _holds(self, hit: Hit) -> bool:
        """Does the session hold the hit's entry at the version the index says?"""
        found = self.recorder.select_events(hit.session_id, gt=hit.seq - 1, lte=hit.seq)
        return bool(found) and backs(hit, _line(found[0]), bytes(found[0].state), blobs_of(self.recorder))

    def close(self) -> None:
        self.index.close()


_NONE = SourceState("", version=-1)


class StoreSearch:
    """What a repository searches with: ``search(filters)`` catches the index up, then asks it."""

    def __init__(self, store: SessionStore) -> None:
        self._impl = _open(store)

    def search(self, filters: Filters) -> list[Hit]:
        hits: list[Hit] = self._impl.search(filters)
        return hits

    def catch_up(self) -> None:
        """Bring the index up to date with the store now (an erasure does, so the erased text leaves it at once)."""
        self._impl.refresh()

    def close(self) -> None:
        self._impl.close()


def _open(store: SessionStore) -> Any:
    from sessiontree.storage.database import DatabaseStore
    from sessiontree.storage.jsonl_repo import JsonlStore
    from sessiontree.storage.store import MemoryStore

    if isinstance(store, JsonlStore):
        return JsonlSearch(store.root)
    if isinstance(store, MemoryStore):
        return RecorderSearch(SqliteSearchIndex(":memory:"), store.recorder, partial(session_versions, store.recorder,
                                                                                  "eventsourcing.popo"))
    if isinstance(store, DatabaseStore):
        versions = partial(session_versions, store.recorder, store.module)
        if store.module == "eventsourcing.sqlite":
            path = store.env.get("SQLITE_DBNAME", "")
            own = path in ("", ":memory:") or path.startswith("file:")
            if own:
                return RecorderSearch(SqliteSearchIndex(":memory:"), store.recorder, versions)
            index = SqliteSearchIndex(path, own=False)  # beside the sessions: any commit to them moves its data_version
            return RecorderSearch(index, store.recorder, versions, index.data_version)
        if store.module == "eventsourcing.postgres":
            return RecorderSearch(PostgresSearchIndex(store.env), store.recorder, versions)
        return RecorderSearch(SqliteSearchIndex(":memory:"), store.recorder, versions)
    raise SessionError("storage", f"searching a {type(store).__name__} is not supported")
