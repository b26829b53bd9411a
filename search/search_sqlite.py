"""The search index in SQLite, with FTS5: a file of its own (JSONL folders), tables in the session database (SQLite
repositories), or in memory (memory and POPO repositories).

Tables: ``search_sources`` (how far each source was read), ``search_entries`` (one row per entry: the tree and the
text) and ``search_fts`` (an FTS5 table of the words ``search_text.words`` made, rowid = the entry's row). FTS5 is
asked for the words of the query quoted, so its tokenizer agrees with ours; bm25 ranks.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

from sessiontree.domain.errors import SessionError
from sessiontree.search.search_state import FORMAT, Change, Filters, Hit, SourceState, branch_flags, rank
from sessiontree.search.search_text import Query
from sessiontree.storage.files import make_private_dirs

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
    def term(word: str, prefix: bool) -> str:
        return f'"{word}"' + ("*" if prefix else "")

    expression = "(" + " AND ".join(term(*t) for t in query.required) + ")"
    for excluded in query.excluded:
        expression = f"({expression} NOT {term(*excluded)})"
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
        return rank(branch_flags(rows, links), filters.limit)

    def close(self) -> None:
        self._conn.close()
