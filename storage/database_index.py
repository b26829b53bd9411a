"""The session listing of a database repository, on eventsourcing's projection machinery.

:class:`SessionIndexProjection` folds the notification log into a ``TrackingRecorder`` view with one more table of
listing summaries, written in the tracking record's transaction (so it never disagrees with its position, and can
be rebuilt from notification 1). eventsourcing's public ``insert_tracking`` commits a transaction of its own, so the
tracking row is written by SQL we own (``_TableView.track``; docs/architecture.md, "SQL we own"). A deleted session
is a marker event in the ``~deletions`` stream, seen in log order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cache, singledispatchmethod
from typing import Any, Protocol

import attrs
from eventsourcing.persistence import IntegrityError, StoredEvent, Tracking
from eventsourcing.projection import Projection
from eventsourcing.sqlite import SQLiteTrackingRecorder

from sessiontree.storage.index import Summary, fold_lines
from sessiontree.storage.memory_recorder import MemoryTrackingRecorder
from sessiontree.storage.recorder import SessionMapper
from sessiontree.wire.codec import native_codec
from sessiontree.wire.jsontext import decode, dumps, loads

DELETIONS_STREAM = "~deletions"
DELETED_TOPIC = "sessiontree:deleted"

# One notification as the view folds it: (notification id, session id, version, line).
Item = tuple[int, str, int, Any]


@attrs.frozen
class DeletionMarker:
    """What the mapper makes of a ``~deletions`` event: which session was deleted."""

    originator_id: str
    originator_version: int
    session_id: str


class DatabaseMapper(SessionMapper):
    """The session mapper, plus the deletion markers of the ``~deletions`` stream."""

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        if stored_event.topic == DELETED_TOPIC:
            data = loads(stored_event.state)
            return DeletionMarker(str(stored_event.originator_id), stored_event.originator_version, data["id"])
        return super().to_domain_event(stored_event)


def _deleted(marker: Any) -> str | None:
    target = marker.get("id") if isinstance(marker, dict) else None
    return target if isinstance(target, str) else None


def touched(items: Sequence[Item]) -> list[str]:
    """The sessions a batch changes, in order of first appearance."""
    ids = dict.fromkeys(_deleted(data) if sid == DELETIONS_STREAM else sid for _nid, sid, _v, data in items)
    return [sid for sid in ids if sid is not None]


def fold_items(rows: dict[str, Summary | None], items: Sequence[Item]) -> dict[str, Summary | None]:
    """Apply notifications to the summaries they touch (None: the session is gone)."""
    for _nid, sid, version, data in items:
        if sid == DELETIONS_STREAM:
            target = _deleted(data)
            if target is not None:
                rows[target] = None
            continue
        summary = rows.get(sid)
        if version == 1:
            if summary is None:  # a header seen twice (an overlapping batch) changes nothing
                rows[sid] = Summary.from_header(data)
        elif summary is not None and version > summary.version:
            summary.apply(data)
    return rows


class IndexView(Protocol):
    """What the store and the projection use of a listing view (the three classes below)."""

    def max_tracking_id(self, application_name: str) -> int | None: ...
    def process(self, items: Sequence[Item], tracking: Tracking) -> None: ...
    def summaries(self, cwd: str | None) -> list[Summary]: ...


class MemorySessionIndexView(MemoryTrackingRecorder):
    """The listing view in memory (for the POPO module, whose recorder is ours: ``memory_recorder.py``)."""

    def __init__(self) -> None:
        super().__init__()
        self._rows: dict[str, Summary] = {}

    def process(self, items: Sequence[Item], tracking: Tracking) -> None:
        with self.lock:
            self.check_tracking(tracking)
            rows: dict[str, Summary | None] = {sid: self._rows.get(sid) for sid in touched(items)}
            for sid, summary in fold_items(rows, items).items():
                if summary is None:
                    self._rows.pop(sid, None)
                else:
                    self._rows[sid] = summary
            self.insert_tracking(tracking)

    def refold(self, session_id: str, lines: Sequence[bytes]) -> None:
        """Fold a session's row again from its lines (one of them was rewritten), if the view holds one."""
        with self.lock:
            if session_id in self._rows:
                summary = fold_lines(lines)
                if summary is not None:
                    self._rows[session_id] = summary

    def forget(self, session_id: str) -> None:
        """Drop a session's row (it was deleted)."""
        with self.lock:
            self._rows.pop(session_id, None)

    def summaries(self, cwd: str | None) -> list[Summary]:
        with self.lock:
            return [Summary.from_dict(s.to_dict()) for s in self._rows.values() if cwd is None or s.cwd == cwd]


# The statements of the SQL views, written for SQLite (the PostgreSQL view adapts them).
_DELETE = "DELETE FROM {table} WHERE session_id = ?"
_UPSERT = ("INSERT INTO {table} VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE "
           "SET cwd = excluded.cwd, modified = excluded.modified, summary = excluded.summary")
_LIST_ALL = "SELECT summary FROM {table} ORDER BY modified DESC"
_LIST_CWD = "SELECT summary FROM {table} WHERE cwd = ? ORDER BY modified DESC"


class _TableView:
    """What the SQLite and PostgreSQL views share. A subclass writes the statements above in its database's form
    (``_sql``), names its tracking table (``_tracking``) and selects the rows (``session_id``, ``summary``) of some
    sessions (``_stored``)."""

    datastore: Any
    _sql: Callable[[str], Any]
    _tracking: Callable[[str], Any]
    _stored: Callable[[Any, list[str]], Iterable[Any]]

    def track(self, cursor: Any, tracking: Tracking) -> None:
        """Record ``tracking`` in the caller's transaction, in eventsourcing's tracking table as its own
        ``insert_tracking`` does: one row per application moved forward only (IntegrityError if another writer got
        there first), or one row per notification when the datastore keeps the old layout."""
        params = (tracking.application_name, tracking.notification_id)
        if not self.datastore.single_row_tracking:
            cursor.execute(self._tracking("INSERT INTO {tracking} (application_name, notification_id) VALUES (?, ?)"),
                           params)
            return
        cursor.execute(self._tracking(
            "INSERT INTO {tracking} AS t (application_name, notification_id) VALUES (?, ?) ON CONFLICT (application_name) "
            "DO UPDATE SET notification_id = excluded.notification_id WHERE t.notification_id < excluded.notification_id "
            "RETURNING notification_id"), params)
        if cursor.fetchone() is None:
            raise IntegrityError(f"Failed to record tracking for {tracking.application_name} {tracking.notification_id}")

    def process(self, items: Sequence[Item], tracking: Tracking) -> None:
        with self.datastore.transaction(commit=True) as cursor:
            self.track(cursor, tracking)  # first: it serialises concurrent writers
            ids = touched(items)
            rows: dict[str, Summary | None] = dict.fromkeys(ids)
            for row in self._stored(cursor, ids):
                rows[row["session_id"]] = Summary.from_dict(decode(row["summary"]))
            folded = fold_items(rows, items)
            gone = [(sid,) for sid, summary in folded.items() if summary is None]
            kept = [(sid, s.cwd, s.modified, dumps(s.to_dict())) for sid, s in folded.items() if s is not None]
            if gone:
                cursor.executemany(self._sql(_DELETE), gone)
            if kept:
                cursor.executemany(self._sql(_UPSERT), kept)

    def summaries(self, cwd: str | None) -> list[Summary]:
        with self.datastore.transaction(commit=False) as cursor:
            if cwd is None:
                cursor.execute(self._sql(_LIST_ALL))
            else:
                cursor.execute(self._sql(_LIST_CWD), (cwd,))
            return [Summary.from_dict(decode(row["summary"])) for row in cursor.fetchall()]


class SQLiteSessionIndexView(_TableView, SQLiteTrackingRecorder):
    """The listing view as an SQLite table ``session_index`` beside ``tracking``."""

    table = "session_index"

    def construct_create_table_statements(self) -> list[str]:
        return [
            *super().construct_create_table_statements(),
            f"CREATE TABLE IF NOT EXISTS {self.table} (session_id TEXT PRIMARY KEY, "
            "cwd TEXT NOT NULL, modified TEXT NOT NULL, summary BLOB NOT NULL)",
            f"CREATE INDEX IF NOT EXISTS {self.table}_modified ON {self.table} (modified)",
        ]

    def _sql(self, template: str) -> str:
        return template.format(table=self.table)

    def _tracking(self, template: str) -> str:
        return template.format(tracking="tracking")  # eventsourcing's SQLite tracking table has this one name

    def _stored(self, cursor: Any, ids: list[str]) -> Iterable[Any]:
        for start in range(0, len(ids), 500):  # within SQLite's limit on bound parameters
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            cursor.execute(f"SELECT session_id, summary FROM {self.table} WHERE session_id IN ({marks})", chunk)
            yield from cursor.fetchall()


@cache
def postgres_view_class() -> Any:
    """The PostgreSQL view class, defined on first use (psycopg is an optional extra)."""
    from eventsourcing.postgres import PostgresTrackingRecorder
    from psycopg.sql import SQL, Identifier

    class PostgresSessionIndexView(_TableView, PostgresTrackingRecorder):
        """The listing view as a PostgreSQL table ``<name>_sessions`` beside ``<name>_tracking``."""

        def __init__(self, datastore: Any, *, tracking_table_name: str = "notification_tracking", **kwargs: Any):
            super().__init__(datastore, tracking_table_name=tracking_table_name, **kwargs)
            self.sessions_table_name = tracking_table_name.removesuffix("_tracking") + "_sessions"
            index = self.sessions_table_name + "_modified"
            self.check_identifier_length(index)
            self._names = (Identifier(self.datastore.schema), Identifier(self.sessions_table_name))
            self.sql_create_statements += [
                self._sql("CREATE TABLE IF NOT EXISTS {table} (session_id text PRIMARY KEY, "
                          "cwd text NOT NULL, modified text NOT NULL, summary bytea NOT NULL)"),
                SQL("CREATE INDEX IF NOT EXISTS {0} ON {1}.{2} (modified)").format(Identifier(index), *self._names),
            ]
            self._select = self._sql("SELECT session_id, summary FROM {table} WHERE session_id = ANY(?)")

        def _sql(self, template: str) -> Any:
            """``template`` with psycopg's placeholders and the table's quoted name in its schema."""
            return SQL(template.replace("?", "%s").replace("{table}", "{0}.{1}")).format(*self._names)

        def _tracking(self, template: str) -> Any:
            return SQL(template.replace("?", "%s").replace("{tracking}", "{0}.{1}")).format(
                Identifier(self.datastore.schema), Identifier(self.tracking_table_name))

        def _stored(self, cursor: Any, ids: list[str]) -> Iterable[Any]:
            cursor.execute(self._select, (ids,))
            yield from cursor.fetchall()

    PostgresSessionIndexView.__module__ = __name__
    return PostgresSessionIndexView


def view_class(module: str) -> Any:
    """The listing view class for an eventsourcing persistence module (None: not supported)."""
    if module == "eventsourcing.postgres":
        return postgres_view_class()
    return {"eventsourcing.popo": MemorySessionIndexView, "eventsourcing.sqlite": SQLiteSessionIndexView}.get(module)


class SessionIndexProjection(Projection[Any]):
    """The session listing as an eventsourcing projection (used by ``ProjectionRunner``)."""

    name = "sessiontree"  # same table prefix as the application's own view

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        if isinstance(domain_event, DeletionMarker):
            data: Any = {"type": "deleted", "id": domain_event.session_id}
        else:
            data = native_codec().event_dict(domain_event)
        item = (tracking.notification_id, str(domain_event.originator_id), domain_event.originator_version, data)
        process_once(self.view, [item], tracking)


def process_once(view: IndexView, items: Sequence[Item], tracking: Tracking) -> bool:
    """Process a batch unless another writer already has; True if this call wrote it."""
    last = view.max_tracking_id(tracking.application_name)
    if last is not None:
        if last >= tracking.notification_id:
            return False
        items = [item for item in items if item[0] > last]
    try:
        view.process(items, tracking)
    except IntegrityError:
        return False
    return True
