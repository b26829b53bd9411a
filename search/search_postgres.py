"""The search index in PostgreSQL: a ``tsvector`` column with a GIN index, beside the sessions in the same schema.

The ``tsvector`` is written from the words ``search_text.words`` made (each lexeme quoted) and the query is a
``tsquery`` written from the parsed query's words (``'word' & 'pre':* & !'not'``), so no text-search configuration
re-cuts either side: PostgreSQL matches exactly the entries the SQLite index and the brute-force scan match.
``websearch_to_tsquery`` would run the query through a configuration's parser and dictionaries (stemming, stop words,
its own idea of a word) and find other entries than the other backends. ``ts_rank`` ranks.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

from sessiontree.search.search_state import FORMAT, Change, Filters, Hit, SourceState, branch_flags, rank
from sessiontree.search.search_text import Query

_STATE_COLUMNS = "session_id, cwd, name, leaf, version, size, mtime_ns, ino, \"offset\", last_id"
_TABLES = (
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
    f"INSERT INTO {{s}}.{{p}}_sources (source, {_STATE_COLUMNS}) VALUES ({', '.join(['%s'] * 11)}) ON CONFLICT (source) "
    "DO UPDATE SET session_id = excluded.session_id, cwd = excluded.cwd, name = excluded.name, leaf = excluded.leaf, "
    "version = excluded.version, size = excluded.size, mtime_ns = excluded.mtime_ns, ino = excluded.ino, "
    "\"offset\" = excluded.\"offset\", last_id = excluded.last_id"
)
_DROP = tuple(f"DROP TABLE IF EXISTS {{s}}.{{p}}_{name}" for name in ("generation", "entries", "sources", "meta"))


def tsquery(query: Query) -> str:
    """The ``tsquery`` text of a query (its words are letters and digits only: single quotes are enough)."""
    def term(word: str, prefix: bool) -> str:
        return f"'{word}'" + (":*" if prefix else "")

    parts = [term(*t) for t in query.required] + ["!" + term(*t) for t in query.excluded]
    return " & ".join(parts)


class PostgresSearchIndex:
    """The index as three tables ``<prefix>_meta``, ``_sources`` and ``_entries`` in the sessions' schema."""

    def __init__(self, env: Mapping[str, str], *, prefix: str = "sessiontree_search") -> None:
        import psycopg

        self._conn = psycopg.connect(
            dbname=env["POSTGRES_DBNAME"], host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"], user=env["POSTGRES_USER"],
            password=env.get("POSTGRES_PASSWORD") or None, connect_timeout=int(env.get("POSTGRES_CONNECT_TIMEOUT", "5")),
            autocommit=True,
        )
        self._names = {"s": _quote(env.get("POSTGRES_SCHEMA") or "public"), "p": prefix}
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
            for statement in (*_DROP, *_TABLES):
                self._conn.execute(self._sql(statement))
            self._conn.execute(self._sql("INSERT INTO {s}.{p}_meta VALUES ('format', %s)"), (FORMAT,))

    def known(self, sources: Collection[str] | None = None) -> dict[str, SourceState]:
        """How far each source was read (``sources``: only those)."""
        select = self._sql(f"SELECT source, {_STATE_COLUMNS} FROM {{s}}.{{p}}_sources")
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
                c.executemany(self._sql(_UPSERT_SOURCE), [_source_params(change.source, change.state) for change in kept
                                                          if change.state is not None])

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
        return rank(branch_flags(rows, links), filters.limit)

    def close(self) -> None:
        self._conn.close()


def _source_params(source: str, s: SourceState) -> tuple[Any, ...]:
    return (source, s.session_id, _text(s.cwd), _text(s.name), s.leaf, s.version, s.size, s.mtime_ns, s.ino, s.offset,
            s.last_id)


def _tsvector(words: str) -> str | None:
    """The ``tsvector`` text of an entry's words, each quoted as it is (they are letters and digits only), so no
    text-search configuration re-cuts them."""
    return " ".join(f"'{w}'" for w in sorted(set(words.split()))) if words else None


def _text(value: str | None) -> Any:
    """Text as PostgreSQL can hold it: no NUL character (it is shown, never searched: words have none)."""
    return value.replace("\x00", "\ufffd") if value else value


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'
