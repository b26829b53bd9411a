"""Sessions in a database, through eventsourcing's stock persistence modules (docs/scale-out.md).

``DatabaseStore`` keeps an eventsourcing ``Application`` (``SessionLog``) whose ``PERSISTENCE_MODULE`` is
``eventsourcing.popo``, ``.sqlite`` or ``.postgres``. Each session is one aggregate sequence whose stored events
hold exactly a file's JSON lines, written through :class:`RecorderSessionStorage`; listing runs on a projection of
the notification log (``database_index.py``). Settings given to the constructors win over the environment's.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from eventsourcing.application import Application
from eventsourcing.domain import EventSourcingError
from eventsourcing.persistence import ApplicationRecorder, IntegrityError, PersistenceError, StoredEvent, Tracking
from eventsourcing.popo import POPOFactory

from sessiontree.content.blob_tables import TableBlobs
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted
from sessiontree.domain.ids import now_iso
from sessiontree.storage import database_index as db_index
from sessiontree.storage.files import make_private_dirs
from sessiontree.storage.memory_recorder import MemoryRecorder
from sessiontree.storage.recorder import RecorderSessionStorage
from sessiontree.storage.storage import SessionStorage
from sessiontree.storage.store import SessionInfo, SessionStore, check_session_id
from sessiontree.wire.jsontext import DECODE_ERRORS, dumps, loads

APP_NAME = "sessiontree"
_OPEN_TRIES = 5
_RACES = ("concurrently updated", "duplicate key value violates unique constraint", "already exists")
BATCH = 1000


class SessionLog(Application[str]):
    """The eventsourcing application that holds every session of a database repository."""

    name = APP_NAME

    def construct_mapper(self) -> db_index.DatabaseMapper:
        return db_index.DatabaseMapper()

    def construct_recorder(self) -> ApplicationRecorder:
        """In memory, our recorder (``memory_recorder.py``) instead of POPO's: it deletes, replaces and lists streams
        through public methods."""
        if isinstance(self.factory, POPOFactory):
            return MemoryRecorder()
        return super().construct_recorder()


def _explicit(settings: Mapping[str, str]) -> dict[str, str]:
    """Settings that beat the process environment (eventsourcing reads ``NAME_KEY`` first)."""
    env = {k: str(v) for k, v in settings.items()}
    return env | {f"{APP_NAME.upper()}_{k}": v for k, v in env.items()}


def _has_setting(key: str) -> bool:
    return any(name in os.environ for name in (key, f"{APP_NAME.upper()}_{key}"))


class DatabaseStore(SessionStore):
    """Sessions in eventsourcing's POPO, SQLite or PostgreSQL module (see the module doc)."""

    def __init__(self, settings: Mapping[str, str], *, url: str) -> None:
        self.url = url
        self.env = _explicit({"ORIGINATOR_ID_TYPE": "text", **settings})
        self.app = _open_app(self.env, url)
        self.recorder: Any = self.app.recorder
        self.module = type(self.app.factory).__module__
        self._lock = threading.RLock()
        self._open_listing()
        if self.module == "eventsourcing.sqlite":
            self._guard_versions()

    def _guard_versions(self) -> None:
        """SQLite refuses a line whose previous version is not stored, in the insert itself (a trigger): an object
        that read a session before it was deleted (pruned) cannot append to it, be told it succeeded, and lose the line
        (docs/reliability.md). Streams are numbered from 1 without gaps, so this never refuses a good insert."""
        table = self.recorder.events_table_name
        statement = (f"CREATE TRIGGER IF NOT EXISTS {table}_follows BEFORE INSERT ON {table} "
                     "WHEN NEW.originator_version > 1 AND NOT EXISTS (SELECT 1 FROM " + table + " WHERE originator_id = "
                     "NEW.originator_id AND originator_version = NEW.originator_version - 1) "
                     "BEGIN SELECT RAISE(ABORT, 'the previous version of this stream is not stored'); END")
        try:
            with self.recorder.datastore.transaction(commit=False) as cursor:  # made once: a read-only file still opens
                cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?", (f"{table}_follows",))
                if cursor.fetchone() is not None:
                    return
            with self.recorder.datastore.transaction(commit=True) as cursor:
                cursor.execute(statement)
        except PersistenceError as exc:
            raise SessionError("storage", f"cannot open the session database {self.url}: {exc}") from exc

    def _open_listing(self) -> None:
        """The listing: a projection of the notification log (``database_index.py``)."""
        view = db_index.view_class(self.module)
        if view is None:
            raise SessionError("storage", f"{self.url}: persistence module {self.module} is not supported")
        made = view() if isinstance(self.recorder, MemoryRecorder) else self.app.factory.tracking_recorder(view)
        self.view = cast(db_index.IndexView, made)

    @classmethod
    def popo(cls) -> DatabaseStore:
        """Sessions in eventsourcing's in-memory module (one process, gone on exit)."""
        return cls({"PERSISTENCE_MODULE": "eventsourcing.popo"}, url="popo:")

    @classmethod
    def sqlite(cls, path: str | os.PathLike[str]) -> DatabaseStore:
        """Sessions in one SQLite file (created if missing; WAL mode)."""
        path = os.fspath(path)
        _private_file(path)
        return cls({"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": path}, url=f"sqlite:///{path}")

    @classmethod
    def postgres(
        cls, dbname: str, *, host: str = "127.0.0.1", port: int = 5432, user: str = "postgres",
        password: str | None = None, schema: str | None = None, settings: Mapping[str, str] | None = None,
    ) -> DatabaseStore:
        """Sessions in PostgreSQL (psycopg 3; install ``sessiontree[postgres]``); ``schema`` is created if missing,
        ``settings`` passes any other eventsourcing setting (``POSTGRES_POOL_SIZE``, ``POSTGRES_LOCK_TIMEOUT``, ...)."""
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise SessionError("storage", "PostgreSQL needs psycopg: pip install 'sessiontree[postgres]'") from None
        env = {**_postgres_env(dbname, host, port, user, password, schema), **(settings or {})}
        url = f"postgresql://{user}@{host}:{port}/{dbname}" + (f"?schema={schema}" if schema else "")
        check_server(env, url, schema)
        from sessiontree.storage.pg_sessions import PostgresStore

        return PostgresStore(env, url=url)

    def _storage(self, session_id: str) -> RecorderSessionStorage:
        storage = RecorderSessionStorage(self.recorder, session_id, location=f"{self.url}#{session_id}")
        storage.owner = self  # open_repo(url).open(id) must not lose its connections to the GC
        return storage

    def store_header(self, header: SessionStarted) -> SessionStorage:
        storage = self._storage(check_session_id(header.originator_id))  # ids from files too
        try:
            storage.save([header])
        except SessionError as exc:
            if exc.code == "conflict":
                raise SessionError("already_exists", f"session {header.originator_id} already exists in {self.url}") from None
            raise
        return storage

    def store_lines(self, session_id: str, lines: Sequence[bytes], blobs: Sequence[tuple[str, bytes]] = ()) -> SessionStorage:
        """As the port's; ``blobs`` (digest, bytes): the content the lines name, stored in their transaction."""
        storage = self._storage(check_session_id(session_id))
        storage.write_lines(lines, blobs)
        return storage

    @property
    def joins_blobs(self) -> bool:
        """Does ``store_lines`` store ``blobs`` in the transaction of the lines (SQLite, PostgreSQL)?"""
        blobs = self.blobs
        return isinstance(blobs, TableBlobs) and blobs.joins(self.recorder)

    def _exists(self, session_id: str) -> bool:
        try:
            return bool(self.recorder.select_events(session_id, limit=1))
        except PersistenceError as exc:
            raise SessionError("storage", f"could not read session {session_id} in {self.url}: {exc}") from exc

    def attach(self, session_id: str) -> SessionStorage:
        if not self._exists(session_id):
            raise SessionError("not_found", f"session {session_id} not found in {self.url}")
        return self._storage(session_id)

    def remove(self, session_id: str) -> None:
        with self._lock:
            if not self._exists(session_id):
                return
            # The marker first: it takes the highest notification id, so SQLite never
            # hands a deleted row's id to a later insert the index has already passed.
            self._mark_deleted(session_id)
            self._delete_events(session_id)

    def _mark_deleted(self, session_id: str) -> None:
        state = dumps({"type": "deleted", "id": session_id, "timestamp": now_iso()})
        for _ in range(20):
            last = self.recorder.select_events(db_index.DELETIONS_STREAM, desc=True, limit=1)
            version = last[0].originator_version + 1 if last else 1
            try:
                self.recorder.insert_events([StoredEvent(db_index.DELETIONS_STREAM, version, db_index.DELETED_TOPIC, state)])
                return
            except IntegrityError:
                continue  # another process deleted a session at the same moment
        raise SessionError("conflict", f"could not record the deletion of session {session_id} in {self.url}")

    def _delete_events(self, session_id: str) -> None:
        recorder: Any = self.recorder
        if self.module == "eventsourcing.popo":
            recorder.delete_stream(session_id)
            return
        with recorder.datastore.transaction(commit=True) as c:  # SQLite (PostgresStore has its own remove)
            c.execute(f"DELETE FROM {recorder.events_table_name} WHERE originator_id = ?", (session_id,))

    def stream_ids(self) -> list[str]:
        """Every stream of session lines in the store (not the ``~`` streams of markers), listed or not."""
        recorder: Any = self.recorder
        if self.module == "eventsourcing.popo":
            ids = recorder.stream_ids()
        else:
            statement: Any = f"SELECT DISTINCT originator_id FROM {recorder.events_table_name}"
            if self.module == "eventsourcing.postgres":
                from psycopg.sql import SQL, Identifier

                statement = SQL("SELECT DISTINCT originator_id FROM {}.{}").format(
                    Identifier(recorder.datastore.schema), Identifier(recorder.events_table_name))
            try:
                with recorder.datastore.transaction(commit=False) as cursor:
                    cursor.execute(statement)
                    ids = [str(row["originator_id"]) for row in cursor.fetchall()]
            except PersistenceError as exc:
                raise SessionError("storage", f"could not read the sessions of {self.url}: {exc}") from exc
        return sorted(sid for sid in ids if not sid.startswith("~"))

    def storage_of(self, session_id: str) -> SessionStorage:
        return self._storage(session_id)

    def refold(self, session_id: str) -> None:
        """A line of the session was rewritten (erasure) in a store whose listing lives in memory (POPO): its listing
        row is folded again. (SQLite and PostgreSQL fold it in the rewrite's transaction: row_replace.py.)"""
        refold = getattr(self.view, "refold", None)
        if refold is not None:
            refold(session_id, [bytes(e.state) for e in self.recorder.select_events(session_id)])

    def infos(self, cwd: str | None) -> Iterable[SessionInfo]:
        self.refresh_index()
        return [SessionInfo.from_summary(s, f"{self.url}#{s.id}") for s in self.view.summaries(cwd)]

    def refresh_index(self) -> int:
        """Fold the notifications the listing view has not seen yet; how many were new."""
        name = self.app.name
        done = 0
        try:
            while True:
                last = self.view.max_tracking_id(name) or 0
                notes = self.recorder.select_notifications(start=last + 1, limit=BATCH)
                if not notes:
                    return done
                items = [(n.id, str(n.originator_id), n.originator_version, _parse(n.state)) for n in notes]
                if db_index.process_once(self.view, items, Tracking(name, notes[-1].id)):
                    done += len(notes)
        except PersistenceError as exc:
            raise SessionError("storage", f"could not update the session index of {self.url}: {exc}") from exc

    def index_runner(self) -> Any:
        """An eventsourcing ``ProjectionRunner`` keeping the listing view current as events are recorded (PostgreSQL
        only: LISTEN/NOTIFY), used as a context manager; ``list()`` catches up by itself either way."""
        if self.module != "eventsourcing.postgres":
            raise SessionError("storage", f"{self.url}: {self.module} cannot push notifications to another application; "
                               "list() keeps the index current by pulling instead")
        from eventsourcing.projection import ProjectionRunner

        return ProjectionRunner(application_class=SessionLog, projection_class=db_index.SessionIndexProjection,
                                view_class=db_index.postgres_view_class(), env=self.env)

    def close(self) -> None:
        self.app.close()


def _open_app(env: Mapping[str, str], url: str) -> SessionLog:
    """The application on ``env``; opening errors become ``SessionError('storage')``."""
    failures = 0
    while True:
        try:
            return SessionLog(env=env)
        except (PersistenceError, OSError, EventSourcingError) as exc:
            detail = " ".join(str(exc).split())
            kind = type(exc).__name__
            failures += 1
            # eventsourcing re-creates its PostgreSQL function on every start, and its CREATE ... IF
            # NOT EXISTS statements race too: processes starting together collide, so try again.
            if not any(race in detail for race in _RACES) or failures == _OPEN_TRIES:
                # not chained: the traceback would keep the half-built application (and its connection pool) alive
                # for as long as the error is; dropped here, it is freed as any object is (never a gc call of ours)
                raise SessionError("storage", f"cannot open the session database {url}: {kind}: {detail}") from None
            time.sleep(0.05 * failures * (1 + random.random()))


def _postgres_env(dbname: str, host: str, port: int, user: str, password: str | None, schema: str | None) -> dict[str, str]:
    """The eventsourcing settings of a PostgreSQL database, before the caller's own."""
    env = {"PERSISTENCE_MODULE": "eventsourcing.postgres", "POSTGRES_DBNAME": dbname, "POSTGRES_HOST": host,
           "POSTGRES_PORT": str(port), "POSTGRES_USER": user}
    if password is not None:
        env["POSTGRES_PASSWORD"] = password
    elif not _has_setting("POSTGRES_PASSWORD") and not _has_setting("POSTGRES_GET_PASSWORD_TOPIC"):
        env["POSTGRES_PASSWORD"] = ""  # trust auth, or libpq's own PGPASSFILE
    if schema:
        env["POSTGRES_SCHEMA"] = schema
    if not _has_setting("POSTGRES_CONNECT_TIMEOUT"):  # eventsourcing's 30 s × 10 attempts: a silent server's 5-minute wait
        env["POSTGRES_CONNECT_TIMEOUT"] = "5"
    return env


def _private_file(path: str) -> None:
    """Create a missing SQLite file 0600 in 0700 folders: SQLite gives its -wal and -shm
    files the database's mode, so the sessions stay private (docs/reliability.md)."""
    if path in ("", ":memory:") or path.startswith("file:") or os.path.exists(path):
        return
    try:
        make_private_dirs(Path(path).resolve().parent)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise SessionError("storage", f"cannot create the session database {path}: {exc.strerror or exc}") from exc


def _parse(state: bytes) -> Any:
    try:
        return loads(state)
    except DECODE_ERRORS:
        return None


def check_server(env: Mapping[str, str], url: str, schema: str | None) -> None:
    """Connect once before eventsourcing's pool does: a wrong database, user or password is reported at once, in the
    server's words, where the pool would wait out its timeout and say only that it got no connection. Creates
    ``schema`` if it does not exist (eventsourcing expects it to)."""
    import psycopg
    from psycopg.sql import SQL, Identifier

    password = env.get("POSTGRES_PASSWORD") or os.environ.get("POSTGRES_PASSWORD") or None
    try:
        with psycopg.connect(
            dbname=env["POSTGRES_DBNAME"], host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"], user=env["POSTGRES_USER"],
            password=password, autocommit=True, connect_timeout=int(env.get("POSTGRES_CONNECT_TIMEOUT", "5")),
        ) as conn:
            if schema:
                try:
                    conn.execute(SQL("CREATE SCHEMA IF NOT EXISTS {0}").format(Identifier(schema)))
                except psycopg.errors.UniqueViolation:
                    pass  # another process created it at the same moment (IF NOT EXISTS does not cover a race)
    except psycopg.Error as exc:
        raise SessionError("storage", f"cannot reach {url}: {' '.join(str(exc).split())}") from exc
