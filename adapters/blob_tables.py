"""Out-of-line content in the database that holds the sessions (``blob_stores.py`` has the port and the others)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from sessiontree.adapters.blob_gc import needle
from sessiontree.adapters.blob_stores import DEFAULT, BlobStore, MemoryBlobs
from sessiontree.domain.errors import SessionError


class TableBlobs(BlobStore):
    """Blobs in a table of the database that holds the sessions (eventsourcing's SQLite or PostgreSQL datastore),
    written in their own transaction before the events that refer to them."""

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

    def get(self, digest: str, size: int | None = None) -> bytes | None:
        rows = self._guard("read", lambda: self._run("SELECT data FROM {t} WHERE digest = ?", (digest,)))
        return bytes(rows[0][0] if not isinstance(rows[0], dict) else rows[0]["data"]) if rows else None

    def delete(self, digest: str) -> None:
        self._guard("delete", lambda: self._run("DELETE FROM {t} WHERE digest = ?", (digest,), commit=True))

    def collect(self, digests: Any, referenced: Any) -> list[str]:
        """Delete the blobs among ``digests`` that no stored event names, asking the database itself: in SQLite one
        statement; in PostgreSQL the blob's row locked first, then the events read by a later statement, so a writer
        putting the blob again after storing its line (``recorder.py``) either waits or is seen."""
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


def blobs_of(recorder: Any) -> BlobStore:
    """The blob store that goes with an eventsourcing recorder: a table in its database, or a dict beside a POPO
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
