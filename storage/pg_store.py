"""The PostgreSQL store: sessions through :class:`~sessiontree.storage.pg_sessions.SessionRecorder`.

The eventsourcing application still opens as before (its tables, and a repository an earlier version wrote, stay as
they are); session events go through the lock-free recorder on the same events table, and the listing is read from
the table that recorder keeps, not from a projection of the notification log.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eventsourcing.persistence import PersistenceError

from sessiontree.domain.errors import SessionError
from sessiontree.storage.database import DatabaseStore
from sessiontree.storage.listing import ListQuery, SessionList
from sessiontree.storage.pg_sessions import SessionRecorder
from sessiontree.storage.store import SessionInfo


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
