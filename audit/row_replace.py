"""Rewriting one stored event's line in a database (erasure, docs/audit.md): one transaction changes the row, the
session's listing row (folded again from its rows, so the listing never quotes what was erased) and the store's
erasure count (a marker in the ``~erasures`` stream, which a reader that keeps sessions open compares: a rewrite does
not move a session's version).

What is left of the old line afterwards: SQLite overwrites the freed bytes (``secure_delete``) and the WAL is
checkpointed and truncated, so neither file keeps them; PostgreSQL keeps the old row version (and its WAL records)
until ``VACUUM FULL`` rewrites the table, which :func:`vacuum` runs (``sessiontree redact --vacuum``).
"""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import StoredEvent

from sessiontree.content.blob_tables import insert_events
from sessiontree.domain.errors import SessionError
from sessiontree.storage.index import fold_lines
from sessiontree.storage.memory_recorder import MemoryRecorder
from sessiontree.wire.jsontext import DECODE_ERRORS, dumps, loads

ERASURES_STREAM = "~erasures"  # "~": not a session (listing and search skip such streams)
ERASED_TOPIC = "sessiontree:erased"


def _marker(session_id: str, version: int, number: int) -> StoredEvent:
    state = dumps({"type": "erased", "id": session_id, "version": version})
    return StoredEvent(ERASURES_STREAM, number, ERASED_TOPIC, state)


def _kinds(recorder: Any) -> set[str]:
    return {cls.__module__ for cls in type(recorder).__mro__}  # ours may subclass eventsourcing's recorders


def replace_recorded(recorder: Any, session_id: str, version: int, line: bytes, listing: Any = None) -> None:
    """Replace the state of one stored event (the line of ``version``) in an eventsourcing recorder's table, with its
    listing row and the erasure count (see the module doc). ``listing(session_id)``: what a store that keeps its
    listing in memory (POPO, memory) runs once the line is replaced. ``LookupError`` when there is no such row."""
    if hasattr(recorder, "replace_line"):  # PostgreSQL's lock-free recorder: its own listing table (pg_sessions.py)
        recorder.replace_line(session_id, version, line)
        return
    kinds = _kinds(recorder)
    if isinstance(recorder, MemoryRecorder):  # memory, popo: (memory_recorder.py)
        with recorder.lock:
            recorder.replace_event(session_id, version, line)
            recorder.insert_events([_marker(session_id, version, erasures(recorder) + 1)])
        if listing is not None:
            listing(session_id)
        return
    if "eventsourcing.sqlite" in kinds:
        _replace_sqlite(recorder, session_id, version, line)
        return
    if "eventsourcing.postgres" in kinds:
        from psycopg.sql import SQL, Identifier

        query = SQL("UPDATE {}.{} SET state = %s WHERE originator_id = %s AND originator_version = %s").format(
            Identifier(recorder.datastore.schema), Identifier(recorder.events_table_name)
        )
        with recorder.datastore.transaction(commit=True) as cursor:
            cursor.execute(query, (line, session_id, version))
            if cursor.rowcount != 1:
                raise LookupError(f"session {session_id} has no version {version}")
        return
    raise SessionError("storage", f"session {session_id}: a {type(recorder).__name__} cannot rewrite a stored line")


def _replace_sqlite(recorder: Any, session_id: str, version: int, line: bytes) -> None:
    from sessiontree.storage.database_index import SQLiteSessionIndexView  # it imports the recorder, which imports this

    events, view = recorder.events_table_name, SQLiteSessionIndexView.table
    with recorder.datastore.transaction(commit=True) as cursor:
        cursor.execute("PRAGMA secure_delete = ON")  # the old line's bytes are overwritten, not only freed
        cursor.execute(f"UPDATE {events} SET state = ? WHERE originator_id = ? AND originator_version = ?",
                       (line, session_id, version))
        cursor.execute("SELECT changes()")
        if cursor.fetchone()[0] != 1:
            raise LookupError(f"session {session_id} has no version {version}")
        cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (view,))
        if cursor.fetchone() is not None:
            cursor.execute(f"SELECT 1 FROM {view} WHERE session_id = ?", (session_id,))
            if cursor.fetchone() is not None:  # a row the listing folded: folded again (else it folds the new line)
                cursor.execute(f"SELECT state FROM {events} WHERE originator_id = ? ORDER BY originator_version",
                               (session_id,))
                summary = fold_lines(bytes(row[0]) for row in cursor.fetchall())
                if summary is not None:
                    cursor.execute(f"UPDATE {view} SET summary = ? WHERE session_id = ?",
                                   (dumps(summary.to_dict()), session_id))
        cursor.execute(f"SELECT MAX(originator_version) FROM {events} WHERE originator_id = ?", (ERASURES_STREAM,))
        last = cursor.fetchone()[0] or 0
        insert_events(recorder, cursor, [_marker(session_id, version, last + 1)])  # the write lock is held: no race
    checkpoint(recorder)


def checkpoint(recorder: Any) -> bool:
    """Copy an SQLite database's WAL into it and truncate the WAL to nothing (old page images hold old lines); False
    when a reader in another connection kept it from finishing (the next erasure or ``vacuum`` tries again)."""
    with recorder.datastore.get_connection(commit=True) as conn:
        cursor = conn.cursor()
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        row = cursor.fetchone()
    return row is None or not row[0]


def erasures(recorder: Any) -> int:
    """How many lines were rewritten in the recorder's store: it moves with every erasure, so a reader that keeps a
    session open compares it (with the session's version) to tell when to read the session again."""
    last = recorder.select_events(ERASURES_STREAM, desc=True, limit=1)
    return int(last[0].originator_version) if last else 0


def erased_since(recorder: Any, number: int, session_id: str) -> tuple[int, bool]:
    """The store's erasure count now, and whether an erasure after marker ``number`` rewrote a line of ``session_id``
    (a reader that read the session when the count was ``number`` holds what the log no longer does)."""
    markers = recorder.select_events(ERASURES_STREAM, gt=number)
    if not markers:
        return number, False
    mine = False
    for marker in markers:
        try:
            mine = mine or loads(bytes(marker.state)).get("id") == session_id
        except (*DECODE_ERRORS, AttributeError):
            mine = True  # a marker that cannot be read: taken for this session's (reading again is always safe)
    return int(markers[-1].originator_version), mine


def vacuum(recorder: Any, tables: list[str]) -> None:
    """Rewrite the store's files so no old row version is left on the disk: SQLite ``VACUUM`` (the whole file, then the
    WAL truncated); PostgreSQL ``VACUUM FULL`` of ``tables`` (the events, listing, blob and search tables; each is
    locked for the time it takes)."""
    kinds = _kinds(recorder)
    if "eventsourcing.sqlite" in kinds:
        with recorder.datastore.get_connection(commit=True) as conn:
            conn.cursor().execute("VACUUM")
        checkpoint(recorder)
    elif "eventsourcing.postgres" in kinds:
        from psycopg.sql import SQL, Identifier

        schema = recorder.datastore.schema or "public"
        with recorder.datastore.get_connection() as conn:
            for table in tables:
                with conn.cursor() as cursor:
                    cursor.execute("SELECT to_regclass(%s)", (f'"{schema}"."{table}"',))
                    row = cursor.fetchone()
                    if (row["to_regclass"] if isinstance(row, dict) else row[0]) is None:
                        continue
                    cursor.execute(SQL("VACUUM FULL {}.{}").format(Identifier(schema), Identifier(table)))
