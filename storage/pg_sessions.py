"""Sessions on PostgreSQL that scale with sessions: no table lock, the listing written with each append.

eventsourcing's application recorder locks the whole events table for every insert (so notification ids commit in
order), which queues every writer of every session behind one lock. Sessions need no global order: their versions
are the order that matters. :class:`SessionRecorder` is eventsourcing's *aggregate* recorder on the same table (the
primary key still lets one writer win each version) and, in the same transaction, upserts the session's row of a
listing table (``<app>_listing``). Two sessions touch different rows, so their appends never wait for each other;
the listing is never behind its sessions; and a follower (a search index) sees what changed by each row's
``version``. docs/scale-out.md says why this feed and not another.

:class:`PostgresStore` is the PostgreSQL store on it: the eventsourcing application still opens as before (its tables,
and a repository an earlier version wrote, stay as they are); session events go through :class:`SessionRecorder` on the
same events table, and the listing is read from its table, not from a projection of the notification log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import groupby
from typing import Any

from eventsourcing.persistence import IntegrityError, InterfaceError, OperationalError, PersistenceError, StoredEvent
from eventsourcing.postgres import PostgresAggregateRecorder, PostgresDatastore
from eventsourcing.utils import retry
from psycopg.sql import SQL, Composed, Identifier

from sessiontree.domain.errors import SessionError
from sessiontree.storage.database import DatabaseStore
from sessiontree.storage.database_index import DELETIONS_STREAM  # markers of the SQLite projection: not a session
from sessiontree.storage.index import Summary, fold_line, fold_lines, sortable
from sessiontree.storage.listing import ListQuery, SessionList, page
from sessiontree.storage.store import SessionInfo
from sessiontree.wire.jsontext import dumps

LISTING_BUILT = "listing-v2"  # v2: forked_at, and modified never before created (refilled once)
_UNSET = "\x00unset"  # a name no session_info can set: the name did not change
_COLUMNS = ("session_id", "version", "cwd", "created", "modified", "sort_key", "created_key", "name", "message_count",
            "first_message", "parent_session", "forked_at")


def _text(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """Listing values as PostgreSQL's text columns can hold them: a NUL character (which a message may carry, and the
    log keeps) is shown as U+FFFD in the listing."""
    return tuple(v.replace("\x00", "\ufffd") if isinstance(v, str) and "\x00" in v else v for v in values)


def _row(summary: Summary) -> tuple[Any, ...]:
    return (summary.id, summary.version, summary.cwd, summary.created, summary.modified, sortable(summary.modified),
            sortable(summary.created), summary.name, summary.message_count, summary.first_message, summary.parent_session,
            summary.forked_at)


def _info(row: dict[str, Any], url: str) -> SessionInfo:
    return SessionInfo(id=row["session_id"], path=f"{url}#{row['session_id']}", cwd=row["cwd"], created=row["created"],
                       modified=row["modified"], name=row["name"], message_count=row["message_count"],
                       first_message=row["first_message"], parent_session=row["parent_session"],
                       forked_at=row["forked_at"])


def _columns(events: Sequence[StoredEvent], one: bool) -> tuple[Any, ...]:
    """The insert's parameters: the one event's values, or each column as an array."""
    if one:
        e = events[0]
        return (str(e.originator_id), e.originator_version, e.topic, e.state)
    return ([str(e.originator_id) for e in events], [e.originator_version for e in events], [e.topic for e in events],
            [e.state for e in events])


class SessionRecorder(PostgresAggregateRecorder):
    """eventsourcing's aggregate recorder, plus the listing row of each session it writes (see the module doc)."""

    takes_before = True  # insert_events(..., before=step): the blob store's rows go in the events' transaction

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str) -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        prefix = events_table_name.removesuffix("_events")
        self.listing_table_name = prefix + "_listing"
        self.meta_table_name = prefix + "_layout"
        for name in (self.listing_table_name + "_cwd_newest", self.meta_table_name):
            self.check_identifier_length(name)
        self._upsert = self._sql(
            "INSERT INTO {listing} (" + ", ".join(_COLUMNS) + ") VALUES (" + ", ".join(["%s"] * len(_COLUMNS)) + ") "
            "ON CONFLICT (session_id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:]))
        self._advance = self._sql(
            # as Summary.apply folds it: never before the header's time (a fork's copied entries keep older times)
            "UPDATE {listing} SET version = %s, "
            "modified = CASE WHEN %s::text IS NULL THEN modified WHEN %s::text < created_key THEN created ELSE %s END, "
            "sort_key = CASE WHEN %s::text IS NULL THEN sort_key ELSE GREATEST(%s::text, created_key) END, "
            "message_count = message_count + %s, name = CASE WHEN %s THEN %s ELSE name END, "
            "first_message = COALESCE(first_message, %s) WHERE session_id = %s AND version < %s")
        # Columns as arrays rather than eventsourcing's array of a composite type: cheaper to send and to parse; one
        # event (most appends) as plain values, its line in binary. Rendered to bytes once: psycopg caches those.
        columns = "INSERT INTO {events} (originator_id, originator_version, topic, state) "
        self._insert = {
            False: self._sql(columns + "SELECT * FROM unnest(%s::text[], %s::bigint[], %s::text[], %b::bytea[])"),
            True: self._sql(columns + "VALUES (%s, %s, %s, %b)"),
        }
        statements = {"new": self._upsert, "more": self._advance}
        self._alone = {kind: s.as_bytes() for kind, s in statements.items()}
        self._together = {("new", one): (SQL("WITH inserted AS ({0}) ").format(self._insert[one]) + self._upsert).as_bytes()
                          for one in (False, True)}
        # Lines after the header go in only while the session's listing row is there, locked for the statement (a
        # deletion locks it first too): an append to a session deleted meanwhile inserts nothing, and says so.
        following = {
            False: self._sql("INSERT INTO {events} (originator_id, originator_version, topic, state) SELECT * FROM "
                             "unnest(%s::text[], %s::bigint[], %s::text[], %b::bytea[]) WHERE EXISTS (SELECT 1 FROM held)"),
            True: self._sql("INSERT INTO {events} (originator_id, originator_version, topic, state) "
                            "SELECT %s, %s::bigint, %s::text, %b::bytea WHERE EXISTS (SELECT 1 FROM held)"),
        }
        lock = self._sql("SELECT 1 FROM {listing} WHERE session_id = %s FOR UPDATE")
        for one in (False, True):
            self._together["more", one] = (
                SQL("WITH held AS ({0}), inserted AS ({1} RETURNING 1), advanced AS ({2}) "
                    "SELECT count(*) AS n FROM inserted").format(lock, following[one], self._advance)).as_bytes()
        self._lock_listing = self._sql("SELECT session_id FROM {listing} WHERE session_id = ANY(%s) FOR UPDATE")
        self._select_events = self._sql("SELECT originator_version, topic, state FROM {events} WHERE originator_id = %s")

    def _sql(self, template: str) -> Composed:
        """``template`` with the schema-qualified names of the three tables filled in."""
        schema = Identifier(self.datastore.schema)
        names = {"events": self.events_table_name, "listing": self.listing_table_name, "meta": self.meta_table_name}
        return SQL(template).format(**{k: SQL("{0}.{1}").format(schema, Identifier(v)) for k, v in names.items()})

    # -- writing ---------------------------------------------------------------------------------------------------

    def _listing_changes(self, stored_events: Sequence[StoredEvent]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """The listing change of each session in an insert: a whole row for a new log, else what the lines add."""
        for sid, group in groupby(stored_events, key=lambda e: e.originator_id):
            events = list(group)
            first = events[0].originator_version
            if first == 1:
                summary = fold_lines(bytes(e.state) for e in events)
                if summary is not None and summary.id == str(sid):
                    yield "new", _text(_row(summary))
                continue
            delta: Summary | None = Summary(id=str(sid), name=_UNSET, version=first - 1)
            for event in events:
                delta = fold_line(delta, bytes(event.state))
            assert delta is not None  # folding entries into a summary always gives one
            modified = delta.modified or None
            key = sortable(modified) if modified else None
            yield "more", _text((
                delta.version, key, key, modified, key, key, delta.message_count,
                delta.name != _UNSET, None if delta.name == _UNSET else delta.name, delta.first_message,
                str(sid), delta.version,
            ))

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(self, stored_events: Sequence[StoredEvent], *, before: Callable[[Any], None] | None = None,
                      **kwargs: Any) -> Sequence[int] | None:
        """The events and their listing rows, atomically. One session's (most appends) is one statement: the insert
        as a data-modifying ``WITH`` before the listing change, so one round trip, no explicit transaction.
        ``before(cursor)`` runs first in the same transaction (the blobs the lines name: ``blob_tables.py``)."""
        if not stored_events:
            return None
        listing = list(self._listing_changes(stored_events))
        if before is None and len(listing) == 1 and all(e.originator_id == stored_events[0].originator_id for e in stored_events):
            kind, params = listing[0]
            with self.datastore.get_connection() as conn, conn.cursor() as curs:
                one = len(stored_events) == 1
                sid = str(stored_events[0].originator_id)
                held = (sid,) if kind == "more" else ()
                curs.execute(self._together[kind, one], (*held, *_columns(stored_events, one), *params), prepare=True)
                if kind == "more" and (row := curs.fetchone()) is not None and row["n"] == 0:
                    raise IntegrityError(f"session {sid} is not stored (deleted since it was read)")
            return None
        exc: Exception | None = None
        with self.datastore.get_connection() as conn:
            with conn.pipeline() as pipeline, conn.transaction(), conn.cursor() as curs:
                try:
                    firsts: dict[str, int] = {}
                    for event in stored_events:
                        firsts.setdefault(str(event.originator_id), event.originator_version)
                    following = [sid for sid, first in firsts.items() if first > 1]
                    if following:  # locked as a deletion locks them; a session deleted meanwhile is not appended to
                        curs.execute(self._lock_listing, (following,))
                        gone = set(following) - {row["session_id"] for row in curs.fetchall()}
                        if gone:
                            raise IntegrityError(f"session {sorted(gone)[0]} is not stored (deleted since it was read)")
                    if before is not None:
                        before(curs)
                    curs.execute(self._insert[False], _columns(stored_events, False), prepare=True)
                    for kind, params in listing:
                        curs.execute(self._alone[kind], params, prepare=True)
                    pipeline.sync()  # a taken version raises here, not at the commit
                except Exception as e:  # re-raised below, once the pipeline is closed (as eventsourcing does)
                    exc = e
            if exc:
                raise exc
        return None

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def select_events(self, originator_id: Any, *, gt: int | None = None, lte: int | None = None, desc: bool = False,
                      limit: int | None = None) -> Sequence[StoredEvent]:
        """As eventsourcing's, with the rows in binary: a bytea arrives as its bytes, not as hex to decode."""
        statement = self._select_events
        params: list[Any] = [originator_id]
        for column, value in ((" AND originator_version > %s", gt), (" AND originator_version <= %s", lte)):
            if value is not None:
                statement += SQL(column)
                params.append(value)
        statement += SQL(" ORDER BY originator_version DESC" if desc else " ORDER BY originator_version")
        if limit is not None:
            statement += SQL(" LIMIT %s")
            params.append(limit)
        with self.datastore.get_connection() as conn, conn.cursor(binary=True) as curs:
            curs.execute(statement, params, prepare=True)
            return [StoredEvent(originator_id, row["originator_version"], row["topic"], row["state"])
                    for row in curs.fetchall()]

    def delete_session(self, session_id: str, lines: int | None = None) -> bool:
        """Delete a session's events and listing row in one transaction; with ``lines``, only if it still has that many
        (its listing row is locked first, and every append updates that row, so none lands meanwhile)."""
        with self.datastore.transaction(commit=True) as curs:
            # first, always: an append holds this row's lock for its insert, so none lands beside the deletion
            curs.execute(self._sql("SELECT 1 FROM {listing} WHERE session_id = %s FOR UPDATE"), (session_id,))
            if lines is not None:
                curs.execute(self._sql("SELECT COUNT(*) AS n FROM {events} WHERE originator_id = %s"), (session_id,))
                row = curs.fetchone()
                if row is None or row["n"] != lines:
                    return False
            curs.execute(self._sql("DELETE FROM {events} WHERE originator_id = %s"), (session_id,))
            curs.execute(self._sql("DELETE FROM {listing} WHERE session_id = %s"), (session_id,))
        return True

    def replace_line(self, session_id: str, version: int, line: bytes) -> None:
        """Rewrite the line of ``version`` (erasure), its session's listing row folded again from its rows and one more
        marker in the ``~erasures`` stream (row_replace.py), in one transaction. The listing row is locked first, as
        every append and deletion does, so none of them interleaves; ``LookupError`` when there is no such line."""
        from sessiontree.audit.row_replace import ERASED_TOPIC, ERASURES_STREAM

        with self.datastore.transaction(commit=True) as curs:
            curs.execute(self._sql("SELECT 1 FROM {listing} WHERE session_id = %s FOR UPDATE"), (session_id,))
            listed = curs.fetchone() is not None
            curs.execute(self._sql("UPDATE {events} SET state = %s WHERE originator_id = %s AND originator_version = %s"),
                         (line, session_id, version))
            if curs.rowcount != 1:
                raise LookupError(f"session {session_id} has no version {version}")
            if listed:
                curs.execute(self._sql("SELECT state FROM {events} WHERE originator_id = %s ORDER BY originator_version"),
                             (session_id,))
                summary = fold_lines(bytes(row["state"]) for row in curs.fetchall())
                if summary is not None and summary.id == session_id:
                    curs.execute(self._upsert, _text(_row(summary)))
            # one erasure at a time takes the next marker number (the count a reader compares)
            curs.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{self.datastore.schema}.{self.events_table_name}~",))
            curs.execute(self._sql(
                "INSERT INTO {events} (originator_id, originator_version, topic, state) SELECT %s, "
                "COALESCE(MAX(originator_version), 0) + 1, %s, %s FROM {events} WHERE originator_id = %s"),
                (ERASURES_STREAM, ERASED_TOPIC, dumps({"type": "erased", "id": session_id, "version": version}),
                 ERASURES_STREAM))

    # -- the listing table -----------------------------------------------------------------------------------------

    def open_listing(self) -> None:
        """Create the listing table if missing and, the first time, fill it from the sessions already stored (a
        repository an earlier version wrote). Serialised across processes by an advisory lock."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{self.datastore.schema}.{self.listing_table_name}",))
            curs.execute(self._sql(
                "CREATE TABLE IF NOT EXISTS {listing} (session_id text PRIMARY KEY, version bigint NOT NULL, "
                "cwd text NOT NULL, created text NOT NULL, modified text NOT NULL, sort_key text NOT NULL, "
                "created_key text NOT NULL, name text, message_count bigint NOT NULL, first_message text, "
                "parent_session text, forked_at text)"))
            curs.execute(self._sql("ALTER TABLE {listing} ADD COLUMN IF NOT EXISTS forked_at text"))  # a v1 table
            names = (Identifier(self.datastore.schema), Identifier(self.listing_table_name))
            for suffix, columns in (("_newest", ""), ("_cwd_newest", "cwd, ")):
                curs.execute(SQL("CREATE INDEX IF NOT EXISTS {0} ON {1}.{2} (" + columns +
                                 "sort_key DESC, created_key DESC, session_id DESC)").format(
                    Identifier(self.listing_table_name + suffix), *names))
            curs.execute(self._sql("CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value text NOT NULL)"))
            curs.execute(self._sql("SELECT 1 FROM {meta} WHERE key = %s"), (LISTING_BUILT,))
            if curs.fetchone() is None:
                self._fill_listing(curs)
                curs.execute(self._sql("INSERT INTO {meta} VALUES (%s, 'yes')"), (LISTING_BUILT,))

    def _fill_listing(self, curs: Any) -> None:
        """One listing row per stored session, folded from its events (read through a server-side cursor)."""
        curs.execute(self._sql("DELETE FROM {listing}"))
        rows = []
        with curs.connection.cursor(name="sessiontree_fill_listing") as events:
            events.itersize = 5000
            events.execute(self._sql("SELECT originator_id, state FROM {events} WHERE originator_id <> %s "
                                     "ORDER BY originator_id, originator_version"), (DELETIONS_STREAM,))
            for sid, group in groupby(events, key=lambda r: r["originator_id"]):
                summary = fold_lines(bytes(r["state"]) for r in group)
                if summary is not None and summary.id == sid:
                    rows.append(_text(_row(summary)))
        if rows:
            curs.executemany(self._upsert, rows)

    def page(self, query: ListQuery, url: str) -> SessionList:
        """The page ``query`` asks for, by the listing table's index."""
        where: list[SQL] = []
        params: list[Any] = []
        if query.cwds is not None:
            where.append(SQL("cwd = ANY(%s)"))
            params.append(list(query.cwds))
        if query.name is not None:
            where.append(SQL("strpos(lower(name), lower(%s)) > 0"))
            params.append(query.name)
        if query.since is not None:
            where.append(SQL("sort_key >= %s"))
            params.append(query.since)
        if query.after is not None:
            where.append(SQL("(sort_key, created_key, session_id) < (%s, %s, %s)"))
            params.extend(query.after)
        statement = self._sql("SELECT * FROM {listing}")
        if where:
            statement += SQL(" WHERE ") + SQL(" AND ").join(where)
        statement += SQL(" ORDER BY sort_key DESC, created_key DESC, session_id DESC")
        if query.limit is not None:
            statement += SQL(" LIMIT %s")
            params.append(query.limit + 1)
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(statement, params, prepare=True)
            rows = curs.fetchall()
        keys = {r["session_id"]: (r["sort_key"], r["created_key"], r["session_id"]) for r in rows}
        return page([_info(r, url) for r in rows], query.limit, key=lambda i: keys[i.id])


class PostgresStore(DatabaseStore):
    """Sessions in PostgreSQL (see the module documentation)."""

    recorder: SessionRecorder

    def _open_listing(self) -> None:
        app_recorder: Any = self.app.recorder
        self.recorder = SessionRecorder(app_recorder.datastore, events_table_name=app_recorder.events_table_name)
        try:
            self.recorder.open_listing()
        except PersistenceError as exc:
            raise SessionError("storage", f"cannot open the session listing of {self.url}: {_why(exc)}") from exc

    def remove(self, session_id: str) -> None:
        try:
            self.recorder.delete_session(session_id)
        except PersistenceError as exc:
            raise SessionError("storage", f"could not delete session {session_id} in {self.url}: {_why(exc)}") from exc

    def infos(self, cwd: str | None) -> Iterable[SessionInfo]:
        return self.page(ListQuery(cwds=(cwd,) if cwd is not None else None))

    def page(self, query: Any) -> SessionList:
        try:
            return self.recorder.page(query, self.url)
        except PersistenceError as exc:
            raise SessionError("storage", f"could not list the sessions of {self.url}: {_why(exc)}") from exc

    def refresh_index(self) -> int:
        """Nothing to fold: each append writes its session's listing row (docs/scale-out.md)."""
        return 0

    def index_runner(self) -> Any:
        raise SessionError("storage", f"{self.url}: the PostgreSQL listing is written with each append, so there is "
                           "no projection to run (docs/scale-out.md)")


def _why(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
