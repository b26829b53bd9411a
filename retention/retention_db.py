"""Deleting a whole session from a database store in one transaction: its events, its listing row, and a deletion
marker in the ``~deletions`` stream (so every other process's listing view drops it too, ``database_index.py``).

The marker is inserted first, by the events insert we own (``blob_tables.insert_events``: eventsourcing's own insert
commits by itself). In PostgreSQL it takes the events table's lock, which also keeps any append to the session out
until the transaction ends; in SQLite, the write lock. The session's line count is checked inside the transaction, so
a session that grew since it was surveyed is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eventsourcing.persistence import IntegrityError, PersistenceError, StoredEvent

from sessiontree.content.blob_tables import insert_events
from sessiontree.domain.errors import SessionError
from sessiontree.domain.ids import now_iso
from sessiontree.storage import database_index as db_index
from sessiontree.storage.database import DatabaseStore
from sessiontree.wire.jsontext import dumps

_TRIES = 20


def delete_rows(store: DatabaseStore, session_id: str, lines: int, changed: Callable[[], SessionError]) -> None:
    """Delete the session if it still has ``lines`` lines (else raise ``changed()``), in one transaction."""
    if store.module == "eventsourcing.popo":
        _delete_popo(store, session_id, lines, changed)
        return
    if hasattr(store.recorder, "delete_session"):  # PostgreSQL's lock-free recorder keeps its own listing table
        try:
            if not store.recorder.delete_session(session_id, lines):
                raise changed()
        except PersistenceError as exc:
            raise SessionError("storage", f"could not delete session {session_id} in {store.url}: {exc}") from exc
        return
    state = dumps({"type": "deleted", "id": session_id, "timestamp": now_iso()})
    for _ in range(_TRIES):
        last = store.recorder.select_events(db_index.DELETIONS_STREAM, desc=True, limit=1)
        version = last[0].originator_version + 1 if last else 1
        marker = StoredEvent(db_index.DELETIONS_STREAM, version, db_index.DELETED_TOPIC, state)
        try:
            if store.module == "eventsourcing.sqlite":
                _delete_sqlite(store, session_id, marker, lines, changed)
            else:
                _delete_postgres(store, session_id, marker, lines, changed)
            return
        except IntegrityError:
            continue  # another process recorded a deletion with that version: take the next one
        except PersistenceError as exc:
            raise SessionError("storage", f"could not delete session {session_id} in {store.url}: {exc}") from exc
    raise SessionError("conflict", f"could not record the deletion of session {session_id} in {store.url}")


def _delete_popo(store: DatabaseStore, session_id: str, lines: int, changed: Callable[[], SessionError]) -> None:
    recorder: Any = store.recorder
    with recorder.lock:  # the in-memory recorder's own lock: nothing is appended meanwhile
        if len(recorder.select_events(session_id)) != lines:
            raise changed()
        recorder.delete_stream(session_id)
        view: Any = store.view
        view.forget(session_id)
    store.recorder.insert_events([StoredEvent(db_index.DELETIONS_STREAM, _next_marker(store), db_index.DELETED_TOPIC,
                                              dumps({"type": "deleted", "id": session_id, "timestamp": now_iso()}))])


def _next_marker(store: DatabaseStore) -> int:
    last = store.recorder.select_events(db_index.DELETIONS_STREAM, desc=True, limit=1)
    return last[0].originator_version + 1 if last else 1


def _delete_sqlite(store: DatabaseStore, session_id: str, marker: StoredEvent, lines: int,
                   changed: Callable[[], SessionError]) -> None:
    recorder: Any = store.recorder
    table = recorder.events_table_name
    with recorder.datastore.transaction(commit=True) as c:
        insert_events(recorder, c, [marker])  # first: it takes the write lock and the highest notification id
        c.execute(f"SELECT COUNT(*) FROM {table} WHERE originator_id = ?", (session_id,))
        if c.fetchone()[0] != lines:
            raise changed()  # rolls the marker back
        c.execute(f"DELETE FROM {table} WHERE originator_id = ?", (session_id,))
        c.execute(f"DELETE FROM {store.view.table} WHERE session_id = ?", (session_id,))  # type: ignore[attr-defined]  # the SQLite view


def _delete_postgres(store: DatabaseStore, session_id: str, marker: StoredEvent, lines: int,
                     changed: Callable[[], SessionError]) -> None:
    from psycopg.sql import SQL, Identifier

    recorder: Any = store.recorder
    view: Any = store.view
    events = (Identifier(recorder.datastore.schema), Identifier(recorder.events_table_name))
    with recorder.datastore.transaction(commit=True) as curs:
        insert_events(recorder, curs, [marker])  # locks the events table: no append to the session meanwhile
        curs.execute(SQL("SELECT COUNT(*) AS n FROM {0}.{1} WHERE originator_id = %s").format(*events), (session_id,))
        if curs.fetchone()["n"] != lines:
            raise changed()  # rolls the marker back
        curs.execute(SQL("DELETE FROM {0}.{1} WHERE originator_id = %s").format(*events), (session_id,))
        curs.execute(SQL("DELETE FROM {0}.{1} WHERE session_id = %s").format(*view._names), (session_id,))
