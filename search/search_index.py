"""The search index: how far it has read each source, the changes the feeders (``search_stores.py``) bring, the hits
it gives back; kept in SQLite (FTS5 tables) or PostgreSQL (a ``tsvector`` column with a GIN index).

A *source* is one session's log: a file (keyed by its name in the folder) or a session in a database (keyed by its id).
An index remembers, per source, how far it has read (``version``, and for a file its size, time, inode and offset),
so catching up reads only what was appended. Both store the words ``search_text.words`` made and are asked for the
words it made of the query (quoted FTS5 terms; a ``tsquery`` such as ``'word' & 'pre':* & !'not'``), so no tokenizer
or text-search configuration re-cuts either side and every backend matches the same entries (docs/search.md: why not
``websearch_to_tsquery``). bm25 and ``ts_rank`` rank.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

from sessiontree.domain.errors import SessionError
from sessiontree.search.search_text import Query, Row
from sessiontree.storage.files import make_private_dirs

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


def ranked(rows: Sequence[Any], links: Iterable[tuple[str, str, str | None]], limit: int) -> list[Hit]:
    """Hits from query rows (source, session id, entry id, kind, time, text, score, name, cwd, leaf, seq, at), each flagged
    on or off its session's active branch (``links``: (source, entry id, parent id) of every entry of their sources),
    best score first; ties: newest first, then by session and entry (every backend orders ties the same way)."""
    parents: dict[str, dict[str, str | None]] = {}
    for source, entry_id, parent_id in links:
        parents.setdefault(source, {})[entry_id] = parent_id
    leaves = {row[0]: row[9] for row in rows}
    branches = {source: on_branch(parents.get(source, {}), leaf) for source, leaf in leaves.items()}
    hits = [Hit(sid, entry_id, kind, ts, text, float(score), name, cwd, entry_id in branches[source], source, seq, at)
            for source, sid, entry_id, kind, ts, text, score, name, cwd, _leaf, seq, at in rows]
    hits.sort(key=lambda h: (h.session_id, h.entry_id))  # stable sorts, the last one first in importance
    hits.sort(key=lambda h: h.timestamp, reverse=True)
    hits.sort(key=lambda h: h.score, reverse=True)
    return hits[:limit]


_TABLES = (
    "CREATE TABLE IF NOT EXISTS search_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS search_sources (source TEXT PRIMARY KEY, session_id TEXT NOT NULL, cwd TEXT NOT NULL, "
    "name TEXT, leaf TEXT, version INTEGER NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, "
    "ino INTEGER NOT NULL, offset INTEGER NOT NULL, last_id TEXT)",
    "CREATE TABLE IF NOT EXISTS search_entries (rowid INTEGER PRIMARY KEY, source TEXT NOT NULL, seq INTEGER NOT NULL, "
    "entry_id TEXT NOT NULL, parent_id TEXT, kind TEXT NOT NULL, ts TEXT NOT NULL, text TEXT, at INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS search_entries_source ON search_entries (source, seq)",
    "CREATE TABLE IF NOT EXISTS search_generation (n INTEGER NOT NULL)",
    "INSERT INTO search_generation VALUES (0)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS search_fts USING fts5(words, tokenize = 'unicode61 remove_diacritics 0')",
)
_DROP = tuple(f"DROP TABLE IF EXISTS search_{name}" for name in ("generation", "fts", "entries", "sources", "meta"))
# FTS5's secure-delete option (SQLite 3.42+): a deleted row's terms leave the index at once. Older versions merge the
# segments after a deletion instead ('optimize'), which drops them too (docs/audit.md: nothing erased stays on disk).
SECURE_DELETE = sqlite3.sqlite_version_info >= (3, 42, 0)
_STATE_COLUMNS = "session_id, cwd, name, leaf, version, size, mtime_ns, ino, offset, last_id"


def fts_expression(query: Query) -> str:
    """The FTS5 MATCH expression of a query (its words are letters and digits only: quoting them is enough)."""
    expression = "(" + " AND ".join(f'"{w}"' + "*" * p for w, p in query.required) + ")"
    for w, p in query.excluded:
        expression = f'({expression} NOT "{w}"{"*" * p})'
    return expression


def _private_file(path: str) -> None:
    make_private_dirs(Path(path).parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    for suffix in ("", "-wal", "-shm", "-journal"):  # SQLite opens these itself, following links
        try:
            mode = os.lstat(path + suffix).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(mode):
            kind = ("a directory" if stat.S_ISDIR(mode) else "a symbolic link" if stat.S_ISLNK(mode)
                    else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket")
            raise SessionError("storage", f"the search index {path + suffix} is {kind}, not a regular file: remove it "
                               "(the index is a cache, built again from the logs)", path=path + suffix)


class SqliteSearchIndex:
    """The index in an SQLite database. ``own=True``: the file is the index's alone (rebuilt from nothing when it
    is unreadable); else the tables live in someone's database (the repository's) and only they are rebuilt."""

    def __init__(self, path: str, *, own: bool = True, root: str | None = None) -> None:
        self.path, self.own, self.root = path, own, root
        self._purged = self._secure = False
        self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except sqlite3.DatabaseError:
            if not self.own or self.path == ":memory:":
                raise
        for suffix in ("", "-wal", "-shm", "-journal"):  # a damaged index: it is only a cache, start again
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path + suffix)
        return self._connect()

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:" and self.own:
            _private_file(self.path)
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        try:
            if self.own and self.path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA secure_delete = ON")  # deleted rows (an erased entry's text) are overwritten, not freed
            self._ensure(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _ensure(self, conn: sqlite3.Connection) -> None:
        """The tables, made (or made again) unless they are there in this format for this folder."""
        expected = {"format": FORMAT, **({"root": self.root} if self.root is not None else {})}
        try:
            meta = dict(conn.execute("SELECT key, value FROM search_meta").fetchall())
            if meta == expected:
                conn.execute("SELECT count(*) FROM search_fts WHERE rowid = 0").fetchone()  # FTS5 table readable
                self._secure = SECURE_DELETE and conn.execute(
                    "SELECT 1 FROM search_fts_config WHERE k = 'secure-delete' AND v = 1").fetchone() is not None
                return
        except sqlite3.OperationalError:
            pass
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in (*_DROP, *_TABLES):
                conn.execute(statement)
            conn.executemany("INSERT INTO search_meta VALUES (?, ?)", expected.items())
            if SECURE_DELETE:  # FTS5 removes a deleted row's terms from its segments at once (SQLite 3.42+)
                conn.execute("INSERT INTO search_fts (search_fts, rank) VALUES ('secure-delete', 1)")
            conn.execute("COMMIT")
            self._secure = SECURE_DELETE
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def known(self, sources: Collection[str] | None = None) -> dict[str, SourceState]:
        """How far each source was read (``sources``: only those)."""
        select = f"SELECT source, {_STATE_COLUMNS} FROM search_sources"
        if sources is None:
            rows = self._conn.execute(select).fetchall()
        else:
            wanted, rows = list(sources), []
            for start in range(0, len(wanted), 500):  # within SQLite's limit on bound parameters
                chunk = wanted[start : start + 500]
                rows += self._conn.execute(f"{select} WHERE source IN ({','.join('?' * len(chunk))})", chunk).fetchall()
        return {row[0]: SourceState(*row[1:]) for row in rows}

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """One write transaction (taken at once, so two processes catching up take turns)."""
        self._conn.execute("BEGIN IMMEDIATE")
        self._purged = False
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        if self._purged:  # old page images in the WAL still hold the deleted text: copied back and the WAL emptied
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def apply(self, changes: Iterable[Change]) -> None:
        """Store changes (inside ``writing()``, or in a transaction of their own)."""
        if self._conn.in_transaction:
            self._apply(changes)
            return  # (the caller's writing() checkpoints)
        with self.writing():
            self._apply(changes)

    def stamps(self) -> dict[str, tuple[int, int, int]]:
        """Each file source's size, time and inode as it was read (what a folder's scan compares), read cheaply."""
        return {row[0]: row[1:] for row in self._conn.execute("SELECT source, size, mtime_ns, ino FROM search_sources")}

    def data_version(self) -> int:
        """SQLite's count of commits by other connections to this database since this one opened it."""
        return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def generation(self) -> int:
        return int(self._conn.execute("SELECT n FROM search_generation").fetchone()[0])

    def _apply(self, changes: Iterable[Change]) -> None:
        c = self._conn
        c.execute("UPDATE search_generation SET n = n + 1")
        purged = False
        for change in changes:
            if change.state is None or change.reset:
                purged = True
                c.execute("DELETE FROM search_fts WHERE rowid IN "
                          "(SELECT rowid FROM search_entries WHERE source = ? AND text IS NOT NULL)", (change.source,))
                c.execute("DELETE FROM search_entries WHERE source = ?", (change.source,))
            if change.state is None:
                c.execute("DELETE FROM search_sources WHERE source = ?", (change.source,))
                continue
            for row in change.rows:
                cursor = c.execute(
                    "INSERT INTO search_entries (source, seq, entry_id, parent_id, kind, ts, text, at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (change.source, row.seq, row.entry_id, row.parent_id, row.kind, row.timestamp, row.text, row.at),
                )
                if row.text is not None:
                    c.execute("INSERT INTO search_fts (rowid, words) VALUES (?, ?)", (cursor.lastrowid, row.words))
            s = change.state
            c.execute(f"INSERT OR REPLACE INTO search_sources (source, {_STATE_COLUMNS}) VALUES ({', '.join('?' * 11)})",
                      (change.source, s.session_id, s.cwd, s.name, s.leaf, s.version, s.size, s.mtime_ns, s.ino, s.offset,
                       s.last_id))
        if purged:
            self._purged = True
            if not self._secure:  # before 3.42 a deleted row's terms stay in FTS5's segments until they are merged
                c.execute("INSERT INTO search_fts (search_fts) VALUES ('optimize')")

    def query(self, filters: Filters) -> list[Hit]:
        sql = ["SELECT e.source, s.session_id, e.entry_id, e.kind, e.ts, e.text, -bm25(search_fts), s.name, s.cwd, s.leaf, "
               "e.seq, e.at "
               "FROM search_fts JOIN search_entries e ON e.rowid = search_fts.rowid "
               "JOIN search_sources s ON s.source = e.source WHERE search_fts MATCH ?"]
        params: list[Any] = [fts_expression(filters.query)]
        for clause, value in (("e.kind = ?", filters.kind), ("e.ts >= ?", filters.since), ("e.ts <= ?", filters.until),
                              ("s.session_id = ?", filters.session)):
            if value is not None:
                sql.append(f"AND {clause}")
                params.append(value)
        if filters.cwds is not None:
            sql.append(f"AND s.cwd IN ({','.join('?' * len(filters.cwds))})")
            params += filters.cwds
        sql.append("ORDER BY bm25(search_fts) LIMIT ?")
        params.append(filters.limit)
        rows = self._conn.execute(" ".join(sql), params).fetchall()
        sources = list({row[0] for row in rows})
        links = self._conn.execute("SELECT source, entry_id, parent_id FROM search_entries "
                                   f"WHERE source IN ({','.join('?' * len(sources))})", sources).fetchall()
        return ranked(rows, links, filters.limit)

    def close(self) -> None:
        self._conn.close()


_PG_STATE_COLUMNS = _STATE_COLUMNS.replace("offset", '"offset"')  # a reserved word in PostgreSQL
_PG_TABLES = (
    "CREATE TABLE IF NOT EXISTS {s}.{p}_meta (key text PRIMARY KEY, value text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {s}.{p}_sources (source text PRIMARY KEY, session_id text NOT NULL, cwd text NOT NULL, "
    "name text, leaf text, version bigint NOT NULL, size bigint NOT NULL, mtime_ns bigint NOT NULL, ino bigint NOT NULL, "
    "\"offset\" bigint NOT NULL, last_id text)",
    "CREATE TABLE IF NOT EXISTS {s}.{p}_entries (id bigserial PRIMARY KEY, source text NOT NULL, seq bigint NOT NULL, "
    "entry_id text NOT NULL, parent_id text, kind text NOT NULL, ts text NOT NULL, text text, words tsvector)",
    "CREATE INDEX IF NOT EXISTS {p}_entries_source ON {s}.{p}_entries (source, seq)",
    "CREATE INDEX IF NOT EXISTS {p}_entries_words ON {s}.{p}_entries USING gin (words)",
    "CREATE TABLE IF NOT EXISTS {s}.{p}_generation (n bigint NOT NULL)",
    "INSERT INTO {s}.{p}_generation VALUES (0)",
)
_COPY_ENTRIES = "COPY {s}.{p}_entries (source, seq, entry_id, parent_id, kind, ts, text, words) FROM STDIN"
_UPSERT_SOURCE = (
    f"INSERT INTO {{s}}.{{p}}_sources (source, {_PG_STATE_COLUMNS}) VALUES ({', '.join(['%s'] * 11)}) ON CONFLICT (source) "
    "DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _PG_STATE_COLUMNS.split(", "))
)
_PG_DROP = tuple(f"DROP TABLE IF EXISTS {{s}}.{{p}}_{name}" for name in ("generation", "entries", "sources", "meta"))


def tsquery(query: Query) -> str:
    """The ``tsquery`` text of a query (its words are letters and digits only: single quotes are enough)."""
    return " & ".join([f"'{w}'" + ":*" * p for w, p in query.required] + [f"!'{w}'" + ":*" * p for w, p in query.excluded])


class PostgresSearchIndex:
    """The index as three tables ``<prefix>_meta``, ``_sources`` and ``_entries`` in the sessions' schema."""

    def __init__(self, env: Mapping[str, str], *, prefix: str = "sessiontree_search") -> None:
        import psycopg

        self._conn = psycopg.connect(
            dbname=env["POSTGRES_DBNAME"], host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"], user=env["POSTGRES_USER"],
            password=env.get("POSTGRES_PASSWORD") or None, connect_timeout=int(env.get("POSTGRES_CONNECT_TIMEOUT", "5")),
            autocommit=True,
        )
        schema = env.get("POSTGRES_SCHEMA") or "public"
        self._names = {"s": '"' + schema.replace('"', '""') + '"', "p": prefix}  # the schema quoted
        self._lock_key = zlib.crc32(f"{self._names['s']}.{prefix}".encode())
        self._ensure()

    def _sql(self, template: str) -> str:
        return template.format(**self._names)

    def _ensure(self) -> None:
        import psycopg

        with self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            try:
                with self._conn.transaction():
                    meta: dict[str, str] = dict(self._conn.execute(self._sql("SELECT key, value FROM {s}.{p}_meta")).fetchall())
            except psycopg.errors.UndefinedTable:  # a new schema: made below
                meta = {}
            if meta == {"format": FORMAT}:
                return
            for statement in (*_PG_DROP, *_PG_TABLES):
                self._conn.execute(self._sql(statement))
            self._conn.execute(self._sql("INSERT INTO {s}.{p}_meta VALUES ('format', %s)"), (FORMAT,))

    def known(self, sources: Collection[str] | None = None) -> dict[str, SourceState]:
        """How far each source was read (``sources``: only those)."""
        select = self._sql(f"SELECT source, {_PG_STATE_COLUMNS} FROM {{s}}.{{p}}_sources")
        if sources is None:
            rows = self._conn.execute(select).fetchall()
        else:
            rows = self._conn.execute(select + " WHERE source = ANY(%s)", (list(sources),)).fetchall()
        return {row[0]: SourceState(*row[1:]) for row in rows}

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """One transaction, one writer at a time (an advisory lock on the index)."""
        with self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            yield

    def generation(self) -> int:
        row = self._conn.execute(self._sql("SELECT n FROM {s}.{p}_generation")).fetchone()
        return int(row[0]) if row else 0

    def apply(self, changes: Iterable[Change]) -> None:
        """Store changes in one transaction: the forgotten sources deleted at once, every new entry in one COPY, the
        sources' states in one pipeline."""
        changes = list(changes)
        forget = [c.source for c in changes if c.state is None or c.reset]
        dropped = [c.source for c in changes if c.state is None]
        kept = [c for c in changes if c.state is not None]
        with self._conn.transaction(), self._conn.cursor() as c:
            c.execute(self._sql("UPDATE {s}.{p}_generation SET n = n + 1"))
            if forget:
                c.execute(self._sql("DELETE FROM {s}.{p}_entries WHERE source = ANY(%s)"), (forget,))
            if dropped:
                c.execute(self._sql("DELETE FROM {s}.{p}_sources WHERE source = ANY(%s)"), (dropped,))
            if any(change.rows for change in kept):
                with c.copy(self._sql(_COPY_ENTRIES)) as copy:
                    for change in kept:
                        for r in change.rows:
                            copy.write_row((change.source, r.seq, r.entry_id, r.parent_id, r.kind, r.timestamp,
                                            _text(r.text), _tsvector(r.words)))
            if kept:
                c.executemany(self._sql(_UPSERT_SOURCE), [
                    (change.source, s.session_id, _text(s.cwd), _text(s.name), s.leaf, s.version, s.size, s.mtime_ns,
                     s.ino, s.offset, s.last_id) for change in kept if (s := change.state) is not None])

    def query(self, filters: Filters) -> list[Hit]:
        sql = ["SELECT e.source, s.session_id, e.entry_id, e.kind, e.ts, e.text, ts_rank(e.words, q), s.name, s.cwd, s.leaf, "
               "e.seq, -1 "
               "FROM {s}.{p}_entries e JOIN {s}.{p}_sources s ON s.source = e.source, CAST(%s AS tsquery) q "
               "WHERE e.words @@ q"]
        params: list[Any] = [tsquery(filters.query)]
        for clause, value in (("e.kind = %s", filters.kind), ("e.ts >= %s", filters.since), ("e.ts <= %s", filters.until),
                              ("s.session_id = %s", filters.session), ("s.cwd = ANY(%s)", filters.cwds)):
            if value is not None:
                sql.append(f"AND {clause}")
                params.append(list(value) if isinstance(value, tuple) else value)
        sql.append("ORDER BY 7 DESC LIMIT %s")
        params.append(filters.limit)
        rows = self._conn.execute(self._sql(" ".join(sql)), params).fetchall()
        links = self._conn.execute(self._sql("SELECT source, entry_id, parent_id FROM {s}.{p}_entries WHERE source = ANY(%s)"),
                                   (list({row[0] for row in rows}),)).fetchall()
        return ranked(rows, links, filters.limit)

    def close(self) -> None:
        self._conn.close()


def _tsvector(words: str) -> str | None:
    """The ``tsvector`` text of an entry's words, each quoted as it is (they are letters and digits only), so no
    text-search configuration re-cuts them."""
    return " ".join(f"'{w}'" for w in sorted(set(words.split()))) if words else None


def _text(value: str | None) -> Any:
    """Text as PostgreSQL can hold it: no NUL character (it is shown, never searched: words have none)."""
    return value.replace("\x00", "\ufffd") if value else value
