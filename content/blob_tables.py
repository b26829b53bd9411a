"""Out-of-line content in the database that holds the sessions (``blob_stores.py`` has the port and the others).

A writer stores its blobs in the transaction that stores the lines naming them (``insert_with``), and a collector
checks the events and deletes in one step (``collect``), so a collector sees a line with its blobs or neither: no crash
or interleaving leaves a stored line naming a collected blob. eventsourcing's public ``insert_events`` opens a
transaction of its own, so the events of that transaction are inserted by SQL we own (:func:`insert_events`, also
used for the deletion and erasure markers of ``retention/prune.py`` and ``row_replace.py``; docs/architecture.md, "SQL
we own"); our own PostgreSQL recorder takes a ``before`` step instead.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import AggregateRecorder, ApplicationRecorder, StoredEvent

from sessiontree.content.blob_stores import DEFAULT, BlobStore, MemoryBlobs, needle
from sessiontree.domain.errors import SessionError


class TableBlobs(BlobStore):
    """Blobs in a table of the database that holds the sessions (eventsourcing's SQLite or PostgreSQL datastore),
    written in the transaction of the events that refer to them (see the module doc)."""

    def __init__(self, recorder: Any, module: str, *, threshold: Any = DEFAULT) -> None:
        super().__init__(threshold)
        self.datastore = recorder.datastore
        self.postgres = module == "eventsourcing.postgres"
        # beside the events table, named after it: two applications in one schema keep their own content
        self.events = str(getattr(recorder, "events_table_name", "sessiontree_events"))
        self.table = self.events.removesuffix("_events") + "_blobs"
        self.location = f"the {self.table} table"
        self._sql: dict[str, Any] = {}
        self._ready = False

    def _q(self, template: str) -> Any:
        found = self._sql.get(template)
        if found is None:
            if self.postgres:
                from psycopg.sql import SQL, Identifier

                found = SQL(template.replace("?", "%s").replace("{t}", "{0}.{1}")).format(
                    Identifier(self.datastore.schema or "public"), Identifier(self.table))
            else:
                found = template.replace("{t}", self.table)
            self._sql[template] = found
        return found

    def _run(self, template: str, params: tuple[Any, ...] = (), *, commit: bool = False) -> list[Any]:
        if not self._ready:
            self._create()
            self._ready = True
        with self.datastore.transaction(commit=commit) as cursor:
            cursor.execute(self._q(template), params)
            return list(cursor.fetchall()) if not commit else []

    def _create(self) -> None:
        """The table, made on first use; another process making it at the same moment is waited for (PostgreSQL's
        ``IF NOT EXISTS`` can still fail on the race: the statement is tried again)."""
        from eventsourcing.persistence import PersistenceError

        kind = "bytea" if self.postgres else "BLOB"
        statement = self._q(f"CREATE TABLE IF NOT EXISTS {{t}} (digest text PRIMARY KEY, data {kind} NOT NULL)")
        for attempt in range(5):
            try:
                with self.datastore.transaction(commit=True) as cursor:
                    cursor.execute(statement)
                return
            except PersistenceError:
                if attempt == 4:
                    raise
                time.sleep(0.05 * (attempt + 1))

    def put(self, digest: str, data: bytes) -> None:
        conflict = "ON CONFLICT (digest) DO NOTHING" if self.postgres else "ON CONFLICT DO NOTHING"
        self._guard("write", lambda: self._run(f"INSERT INTO {{t}} (digest, data) VALUES (?, ?) {conflict}",
                                               (digest, data), commit=True))

    def joins(self, recorder: Any) -> bool:
        """Can the blobs be written in the transaction of ``recorder``'s events: our PostgreSQL recorder, or an
        eventsourcing SQL recorder on this table's database, whose events table :func:`insert_events` writes? (Else the
        writer puts them before and again after its events: ``recorder.py``.)"""
        if getattr(recorder, "takes_before", False):
            return True
        return isinstance(recorder, AggregateRecorder) and hasattr(recorder, "events_table_name") and \
            getattr(recorder, "datastore", None) is self.datastore

    def insert_with(self, recorder: Any, stored: Any, put: Any) -> None:
        """Insert the events ``stored`` and the blobs ``put`` (digest, bytes) in one transaction; eventsourcing's
        errors pass through, as from ``insert_events``. In PostgreSQL (read committed) a blob already there is locked
        (``DO UPDATE ... WHERE false`` locks without writing), so a collector that locked it first is waited for and,
        once it has deleted it, the row is inserted anew; a collector that comes later waits for this transaction,
        then sees its events. ``DO NOTHING`` would neither wait nor lock: the blob could go before the events commit."""
        if not self._ready:
            self._guard("write", self._create)
            self._ready = True
        rows = sorted(dict(put).items())  # one order for every writer: two writers never wait on each other's locks
        if not self.postgres:  # one writer at a time: whatever a collector deleted before is inserted again here
            with self.datastore.transaction(commit=True) as cursor:
                cursor.executemany(self._q("INSERT INTO {t} (digest, data) VALUES (?, ?) ON CONFLICT DO NOTHING"), rows)
                insert_events(recorder, cursor, stored)
            return
        upsert = self._q("INSERT INTO {t} (digest, data) VALUES (?, ?) ON CONFLICT (digest) DO UPDATE SET digest = "
                         "excluded.digest WHERE false")

        def before(cursor: Any) -> None:
            for row in rows:
                cursor.execute(upsert, row)

        if getattr(recorder, "takes_before", False):  # pg_sessions.SessionRecorder
            recorder.insert_events(stored, before=before)
        else:
            _pg_insert(self.datastore, recorder, stored, before)

    def get(self, digest: str, size: int | None = None) -> bytes | None:
        rows = self._guard("read", lambda: self._run("SELECT data FROM {t} WHERE digest = ?", (digest,)))
        return bytes(rows[0][0] if not isinstance(rows[0], dict) else rows[0]["data"]) if rows else None

    def delete(self, digest: str) -> None:
        self._guard("delete", lambda: self._run("DELETE FROM {t} WHERE digest = ?", (digest,), commit=True))

    def collect(self, digests: Any, referenced: Any) -> list[str]:
        """Delete the blobs among ``digests`` that no stored event names, asking the database itself: in SQLite one
        statement; in PostgreSQL the blob's row locked first, then the events read by a later statement, so a writer
        storing the blob with its line (``insert_with``) either waits or is seen."""
        if not self._ready:
            self._guard("write", self._create)
            self._ready = True
        gone = []
        for digest in dict.fromkeys(digests):
            if self._guard("delete", lambda d=digest: self._collect_one(d)):
                gone.append(digest)
        return gone

    def _collect_one(self, digest: str) -> bool:
        found = needle(digest)
        with self.datastore.transaction(commit=True) as cursor:
            if not self.postgres:
                cursor.execute(f"DELETE FROM {self.table} WHERE digest = ? AND NOT EXISTS "
                               f"(SELECT 1 FROM {self.events} WHERE instr(state, ?) > 0)", (digest, found))
                cursor.execute("SELECT changes()")
                return bool(cursor.fetchone()[0])
            from psycopg.sql import SQL, Identifier

            events = SQL("{}.{}").format(Identifier(self.datastore.schema or "public"), Identifier(self.events))
            cursor.execute(self._q("SELECT 1 FROM {t} WHERE digest = ? FOR UPDATE"), (digest,))
            if not cursor.fetchall():
                return False
            cursor.execute(SQL("SELECT 1 FROM {} WHERE position(%s::bytea in state) > 0 LIMIT 1").format(events), (found,))
            if cursor.fetchall():
                return False
            cursor.execute(self._q("DELETE FROM {t} WHERE digest = ?"), (digest,))
            return True

    def digests(self) -> Iterator[str]:
        rows = self._guard("read", lambda: self._run("SELECT digest FROM {t} ORDER BY digest"))
        yield from (str(r[0] if not isinstance(r, dict) else r["digest"]) for r in rows)

    def _guard(self, what: str, run: Any) -> Any:
        from eventsourcing.persistence import PersistenceError

        try:
            return run()
        except PersistenceError as exc:
            raise SessionError("storage", f"cannot {what} content in {self.location}: {exc}") from exc


def _pg_insert(datastore: Any, recorder: Any, stored: Any, before: Any) -> None:
    """As eventsourcing's PostgreSQL ``insert_events`` (tried again when the connection or a lock fails, as it is), with
    ``before`` run first in its transaction."""
    from eventsourcing.persistence import InterfaceError, OperationalError
    from eventsourcing.utils import retry

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert() -> None:
        with datastore.transaction(commit=True) as cursor:
            before(cursor)
            insert_events(recorder, cursor, stored)

    insert()


_COLUMNS = "(originator_id, originator_version, topic, state)"


def insert_events(recorder: Any, cursor: Any, stored: Sequence[StoredEvent]) -> None:
    """Insert ``stored`` into the events table of ``recorder`` (eventsourcing's SQLite or PostgreSQL recorder) in the
    caller's open transaction ``cursor``: eventsourcing's public ``insert_events`` commits a transaction of its own,
    and blob rows, deletion and erasure markers must commit with other rows. A taken version raises IntegrityError.
    For a PostgreSQL application recorder its own insert's table lock goes first (insert order is commit order, so a
    reader of its notification log never passes a gap filled later), then its NOTIFY."""
    if not stored:
        return
    datastore = recorder.datastore
    if "postgres" not in type(datastore).__module__:  # SQLite: eventsourcing keeps a UUID as its hex
        rows = [(s.originator_id.hex if isinstance(s.originator_id, UUID) else s.originator_id, s.originator_version,
                 s.topic, s.state) for s in stored]
        cursor.executemany(f"INSERT INTO {recorder.events_table_name} {_COLUMNS} VALUES (?, ?, ?, ?)", rows)
        return
    from psycopg.sql import SQL, Identifier

    table = SQL("{}.{}").format(Identifier(datastore.schema), Identifier(recorder.events_table_name))
    logged = isinstance(recorder, ApplicationRecorder)  # a flag: narrowing would hide channel_name from mypy
    if logged:
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", (f"{datastore.lock_timeout}s",))
        cursor.execute(SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(table))
        cursor.execute(SQL("NOTIFY {}").format(Identifier(recorder.channel_name)))
    columns = ([s.originator_id for s in stored], [s.originator_version for s in stored], [s.topic for s in stored],
               [s.state for s in stored])
    cursor.execute(SQL("INSERT INTO {} " + _COLUMNS + " SELECT * FROM unnest(%s::{}[], %s::bigint[], %s::text[], "
                       "%s::bytea[])").format(table, Identifier(datastore.originator_id_type)), columns)


def blobs_of(recorder: Any) -> BlobStore:
    """The blob store that goes with an eventsourcing recorder: a table in its database, or a dict beside an in-memory
    recorder's events; one per recorder, so every storage on it reads what the others wrote."""
    found: BlobStore | None = getattr(recorder, "_sessiontree_blobs", None)
    if found is None:
        datastore = getattr(recorder, "datastore", None)
        kind = type(datastore).__module__ if datastore is not None else ""
        if "postgres" in kind or "sqlite" in kind:
            found = TableBlobs(recorder, "eventsourcing.postgres" if "postgres" in kind else "eventsourcing.sqlite")
        else:
            found = MemoryBlobs()
        recorder._sessiontree_blobs = found
    return found
