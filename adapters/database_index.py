"""The session listing of a database repository, run on eventsourcing's projection machinery.

:class:`SessionIndexProjection` is an eventsourcing ``Projection`` over the application's
notification log (every event of every session, in commit order). Its materialised view
is a ``TrackingRecorder`` with one more table, ``<name>_sessions`` (``session_index`` on
SQLite): one row per session holding its listing summary (:mod:`sessiontree.adapters.index`),
written in the same transaction as the tracking record, so the view and its position
never disagree and a view can be dropped and rebuilt from notification 1.

It runs two ways. ``DatabaseSessionRepo.list()`` pulls whatever notifications the view
has not seen yet (all modules, SQLite included, whose recorder cannot subscribe), and on
modules with subscriptions (PostgreSQL) a ``ProjectionRunner`` can keep the view current
from another process (``DatabaseSessionRepo.index_runner``). Both may run at once: the
tracking row serialises them and an already-processed batch is skipped.

A deleted session is a marker event in the ``~deletions`` stream (topic
``sessiontree:deleted``), so the projection sees creations and deletions in log order.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import singledispatchmethod
from typing import Any

import orjson
from eventsourcing.persistence import IntegrityError, Tracking
from eventsourcing.popo import POPOTrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.sqlite import SQLiteTrackingRecorder

from sessiontree.adapters.codec import native_codec
from sessiontree.adapters.index import Summary

DELETIONS_STREAM = "~deletions"
DELETED_TOPIC = "sessiontree:deleted"

# One notification as the view folds it: (notification id, session id, version, line).
Item = tuple[int, str, int, Any]


def fold_items(rows: dict[str, Summary | None], items: Sequence[Item]) -> dict[str, Summary | None]:
    """Apply notifications to the summaries they touch (None: the session is gone)."""
    for _nid, sid, version, data in items:
        if sid == DELETIONS_STREAM:
            target = data.get("id") if isinstance(data, dict) else None
            if isinstance(target, str):
                rows[target] = None
            continue
        summary = rows.get(sid)
        if version == 1:
            if summary is None:  # a header seen twice (an overlapping batch) changes nothing
                rows[sid] = Summary.from_header(data)
        elif summary is not None and version > summary.version:
            summary.apply(data)
    return rows


def _split(rows: dict[str, Summary | None]) -> tuple[list[tuple[str]], list[tuple[str, str, str, bytes]]]:
    """Rows to delete and rows to upsert (id, cwd, modified, summary JSON)."""
    gone = [(sid,) for sid, summary in rows.items() if summary is None]
    kept = [(sid, s.cwd, s.modified, orjson.dumps(s.to_dict())) for sid, s in rows.items() if s is not None]
    return gone, kept


def touched(items: Sequence[Item]) -> list[str]:
    ids: dict[str, None] = {}
    for _nid, sid, _v, data in items:
        if sid == DELETIONS_STREAM:
            if isinstance(data, dict) and isinstance(data.get("id"), str):
                ids[data["id"]] = None
        else:
            ids[sid] = None
    return list(ids)


class POPOSessionIndexView(POPOTrackingRecorder):
    """The listing view in memory (for the POPO module)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._rows: dict[str, Summary] = {}

    def process(self, items: Sequence[Item], tracking: Tracking) -> None:
        with self._database_lock:
            self._assert_tracking_uniqueness(tracking)
            rows: dict[str, Summary | None] = {sid: self._rows.get(sid) for sid in touched(items)}
            for sid, summary in fold_items(rows, items).items():
                if summary is None:
                    self._rows.pop(sid, None)
                else:
                    self._rows[sid] = summary
            self._insert_tracking(tracking)

    def summaries(self, cwd: str | None) -> list[Summary]:
        with self._database_lock:
            return [Summary.from_dict(s.to_dict()) for s in self._rows.values() if cwd is None or s.cwd == cwd]


class SQLiteSessionIndexView(SQLiteTrackingRecorder):
    """The listing view as an SQLite table ``session_index`` beside ``tracking``."""

    table = "session_index"

    def construct_create_table_statements(self) -> list[str]:
        statements = super().construct_create_table_statements()
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {self.table} (session_id TEXT PRIMARY KEY, "
            "cwd TEXT NOT NULL, modified TEXT NOT NULL, summary BLOB NOT NULL)"
        )
        statements.append(f"CREATE INDEX IF NOT EXISTS {self.table}_modified ON {self.table} (modified)")
        return statements

    def process(self, items: Sequence[Item], tracking: Tracking) -> None:
        with self.datastore.transaction(commit=True) as c:
            self._insert_tracking(c, tracking)
            ids = touched(items)
            rows: dict[str, Summary | None] = dict.fromkeys(ids)
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                c.execute(
                    f"SELECT session_id, summary FROM {self.table} WHERE session_id IN ({','.join('?' * len(chunk))})",
                    chunk,
                )
                for row in c.fetchall():
                    rows[row[0]] = Summary.from_dict(orjson.loads(row[1]))
            gone, kept = _split(fold_items(rows, items))
            if gone:
                c.executemany(f"DELETE FROM {self.table} WHERE session_id = ?", gone)
            if kept:
                c.executemany(
                    f"INSERT INTO {self.table} VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE "
                    "SET cwd = excluded.cwd, modified = excluded.modified, summary = excluded.summary",
                    kept,
                )

    def summaries(self, cwd: str | None) -> list[Summary]:
        with self.datastore.transaction(commit=False) as c:
            if cwd is None:
                c.execute(f"SELECT summary FROM {self.table} ORDER BY modified DESC")
            else:
                c.execute(f"SELECT summary FROM {self.table} WHERE cwd = ? ORDER BY modified DESC", (cwd,))
            return [Summary.from_dict(orjson.loads(row[0])) for row in c.fetchall()]


_POSTGRES_VIEW: Any = None


def postgres_view_class() -> Any:
    """The PostgreSQL view class, defined on first use (psycopg is an optional extra)."""
    global _POSTGRES_VIEW
    if _POSTGRES_VIEW is not None:
        return _POSTGRES_VIEW
    from eventsourcing.postgres import PostgresTrackingRecorder
    from psycopg.sql import SQL, Identifier

    class PostgresSessionIndexView(PostgresTrackingRecorder):
        """The listing view as a PostgreSQL table ``<name>_sessions`` beside ``<name>_tracking``."""

        def __init__(self, datastore: Any, *, tracking_table_name: str = "notification_tracking", **kwargs: Any):
            super().__init__(datastore, tracking_table_name=tracking_table_name, **kwargs)
            base = tracking_table_name.removesuffix("_tracking")
            self.sessions_table_name = f"{base}_sessions"
            self.check_identifier_length(self.sessions_table_name + "_modified")
            schema = Identifier(self.datastore.schema)
            table = Identifier(self.sessions_table_name)
            self.sql_create_statements.append(
                SQL(
                    "CREATE TABLE IF NOT EXISTS {0}.{1} (session_id text PRIMARY KEY, "
                    "cwd text NOT NULL, modified text NOT NULL, summary bytea NOT NULL)"
                ).format(schema, table)
            )
            self.sql_create_statements.append(
                SQL("CREATE INDEX IF NOT EXISTS {0} ON {1}.{2} (modified)").format(
                    Identifier(self.sessions_table_name + "_modified"), schema, table
                )
            )
            self._select = SQL("SELECT session_id, summary FROM {0}.{1} WHERE session_id = ANY(%s)").format(schema, table)
            self._delete = SQL("DELETE FROM {0}.{1} WHERE session_id = %s").format(schema, table)
            self._upsert = SQL(
                "INSERT INTO {0}.{1} VALUES (%s, %s, %s, %s) ON CONFLICT (session_id) DO UPDATE "
                "SET cwd = excluded.cwd, modified = excluded.modified, summary = excluded.summary"
            ).format(schema, table)
            self._list_all = SQL("SELECT summary FROM {0}.{1} ORDER BY modified DESC").format(schema, table)
            self._list_cwd = SQL("SELECT summary FROM {0}.{1} WHERE cwd = %s ORDER BY modified DESC").format(
                schema, table
            )

        def process(self, items: Sequence[Item], tracking: Tracking) -> None:
            with self.datastore.transaction(commit=True) as curs:
                self._insert_tracking(curs, tracking)  # first: it serialises concurrent writers
                ids = touched(items)
                rows: dict[str, Summary | None] = dict.fromkeys(ids)
                curs.execute(self._select, (ids,))
                for row in curs.fetchall():
                    rows[row["session_id"]] = Summary.from_dict(orjson.loads(row["summary"]))
                gone, kept = _split(fold_items(rows, items))
                if gone:
                    curs.executemany(self._delete, gone)
                if kept:
                    curs.executemany(self._upsert, kept)

        def summaries(self, cwd: str | None) -> list[Summary]:
            with self.datastore.transaction(commit=False) as curs:
                if cwd is None:
                    curs.execute(self._list_all)
                else:
                    curs.execute(self._list_cwd, (cwd,))
                return [Summary.from_dict(orjson.loads(row["summary"])) for row in curs.fetchall()]

    PostgresSessionIndexView.__module__ = __name__
    _POSTGRES_VIEW = PostgresSessionIndexView
    return PostgresSessionIndexView


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


def process_once(view: Any, items: Sequence[Item], tracking: Tracking) -> bool:
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


class DeletionMarker:
    """What the mapper makes of a ``~deletions`` event: which session was deleted."""

    def __init__(self, originator_id: str, originator_version: int, session_id: str) -> None:
        self.originator_id = originator_id
        self.originator_version = originator_version
        self.session_id = session_id
