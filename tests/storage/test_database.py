"""The database repository: stock eventsourcing modules, the JSONL line as state, the listing projection."""

from __future__ import annotations

import sqlite3
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import sessiontree_pg as pg
import sessiontree_testkit as kit

from sessiontree import SessionError
from sessiontree.domain.ids import fixed_clock
from sessiontree.repository import (
    DatabaseSessionRepo,
    JsonlSessionRepo,
    open_repo,
)

MODULES = ["popo", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
PROJECTED = ["popo", "sqlite"]  # listed through the notification log's projection (PostgreSQL: test_pg_scale.py)


@pytest.fixture
def schema() -> Iterator[str]:
    with pg.temp_schema("db") as name:
        yield name


@pytest.fixture(params=MODULES)
def make_db(request: Any, tmp_path: Path) -> Iterator[Any]:
    """Opens database repositories on one store of the test's module, closing them after."""
    opened: list[DatabaseSessionRepo] = []
    cm = pg.temp_schema("db") if request.param == "postgres" else None
    schema = cm.__enter__() if cm is not None else ""

    def make(**kwargs: Any) -> DatabaseSessionRepo:
        kwargs.setdefault("clock", fixed_clock(kit.T0))
        if request.param == "popo":
            if opened:
                return opened[0]
            repo = DatabaseSessionRepo.popo(**kwargs)
        elif request.param == "sqlite":
            repo = DatabaseSessionRepo.sqlite(tmp_path / "s.db", **kwargs)
        else:
            repo = open_repo(pg.url(schema), **kwargs)  # type: ignore[assignment]
        opened.append(repo)
        return repo

    try:
        yield make
    finally:
        for repo in opened:
            repo.close()
        if cm is not None:
            cm.__exit__(None, None, None)


def write_sample(repo: Any, **create: Any) -> Any:
    session = repo.create(cwd=create.pop("cwd", "/p"), **create)
    u = session.append_message(kit.user("question"))
    session.append_message(kit.assistant("answer"))
    session.append_label_change(u, "q")
    return session


def stored_states_sqlite(path: Path, session_id: str) -> list[bytes]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT state FROM stored_events WHERE originator_id = ? ORDER BY originator_version", (session_id,)
        ).fetchall()
    return [bytes(r[0]) for r in rows]


def stored_states_postgres(schema: str, session_id: str) -> list[bytes]:
    import psycopg
    from psycopg.sql import SQL, Identifier

    with psycopg.connect(host=pg.HOST, port=pg.PORT, user=pg.USER, dbname=pg.DBNAME) as conn:
        rows = conn.execute(
            SQL("SELECT state FROM {0}.sessiontree_events WHERE originator_id = %s ORDER BY originator_version").format(
                Identifier(schema)
            ),
            (session_id,),
        ).fetchall()
    return [bytes(r[0]) for r in rows]


def test_sqlite_rows_hold_the_jsonl_lines(tmp_path: Path) -> None:
    """Each stored event's state in SQLite is exactly the session file's line."""
    files = JsonlSessionRepo(tmp_path / "files", clock=fixed_clock(kit.T0))
    session = write_sample(files, name="n")
    db = DatabaseSessionRepo.sqlite(tmp_path / "s.db")
    db.copy_from(files, session.id)
    db.close()
    file_lines = (tmp_path / "files" / f"{session.id}.jsonl").read_bytes().splitlines()
    assert stored_states_sqlite(tmp_path / "s.db", session.id) == file_lines


@pytest.mark.postgres
def test_postgres_rows_hold_the_jsonl_lines(tmp_path: Path, schema: str) -> None:
    """Each stored event's state in PostgreSQL is exactly the session file's line, id as text."""
    files = JsonlSessionRepo(tmp_path / "files", clock=fixed_clock(kit.T0))
    session = write_sample(files, name="n", session_id="not-a-uuid")
    db = open_repo(pg.url(schema))
    db.copy_from(files, session.id)
    db.close()
    file_lines = (tmp_path / "files" / "not-a-uuid.jsonl").read_bytes().splitlines()
    assert stored_states_postgres(schema, session.id) == file_lines


@pytest.mark.parametrize("make_db", PROJECTED, indirect=True)
def test_list_runs_on_the_projection_tracking_the_notification_log(make_db: Any) -> None:
    """After list(), the view's tracking position is the last notification and rows match."""
    repo = make_db()
    a = write_sample(repo, cwd="/a")
    b = write_sample(repo, cwd="/b")
    infos = repo.list()
    assert {i.id for i in infos} == {a.id, b.id}
    assert repo.view.max_tracking_id(repo.app.name) == repo.recorder.max_notification_id()
    assert repo.refresh_index() == 0  # nothing new to fold
    a.append_message(kit.user("more"))
    assert repo.refresh_index() == 1
    assert {i.id: i.message_count for i in repo.list()} == {a.id: 3, b.id: 2}


@pytest.mark.parametrize("make_db", PROJECTED, indirect=True)
def test_the_view_is_incremental_across_repo_objects(make_db: Any) -> None:
    """A second repository object continues from the tracked position, not from the start."""
    first = make_db()
    session = write_sample(first)
    first.list()
    second = make_db()
    session.append_message(kit.user("again"))
    folded = second.refresh_index()
    assert folded == 1
    [info] = second.list()
    assert info.message_count == 3


def test_deleting_the_newest_session_never_hides_later_ones(make_db: Any) -> None:
    """Delete the most recent session after it was indexed; a new session is still listed."""
    repo = make_db()
    keep = write_sample(repo)
    gone = write_sample(repo)
    repo.list()
    repo.delete(gone.id)
    fresh = repo.create(cwd="/p")
    assert {i.id for i in repo.list()} == {keep.id, fresh.id}


def test_concurrent_catch_ups_count_every_event_once(make_db: Any) -> None:
    """Several repository objects refreshing at once leave one consistent listing."""
    writer = make_db()
    sessions = [write_sample(writer) for _ in range(5)]
    readers = [make_db() for _ in range(3)]
    errors: list[BaseException] = []

    def refresh(repo: Any) -> None:
        try:
            repo.refresh_index()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=refresh, args=(r,)) for r in readers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(i.message_count for i in writer.list()) == [2] * len(sessions)


def test_rebuilding_the_view_from_scratch_gives_the_same_listing(tmp_path: Path) -> None:
    """Drop the view and its tracking row: list() rebuilds it from the notification log."""
    repo = DatabaseSessionRepo.sqlite(tmp_path / "s.db", clock=fixed_clock(kit.T0))
    for cwd in ("/a", "/b", "/c"):
        write_sample(repo, cwd=cwd, name=cwd)
    repo.delete(repo.list()[0].id)
    before = repo.list()
    repo.close()
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute("DELETE FROM session_index")
        conn.execute("DELETE FROM tracking WHERE application_name = 'sessiontree'")
    again = DatabaseSessionRepo.sqlite(tmp_path / "s.db")
    assert again.list() == before
    again.close()


def test_sqlite_cannot_run_a_projection_runner(tmp_path: Path) -> None:
    """SQLite has no subscriptions in eventsourcing 9.5; index_runner says so clearly."""
    repo = DatabaseSessionRepo.sqlite(tmp_path / "s.db")
    with pytest.raises(SessionError) as info:
        repo.index_runner()
    assert info.value.code == "storage"
    repo.close()


def test_an_unreachable_postgres_is_a_storage_error() -> None:
    """A server that is not there gives one clear storage error, no traceback soup."""
    with pytest.raises(SessionError) as info:
        open_repo("postgresql://postgres@127.0.0.1:1/test?connect_timeout=1")
    assert info.value.code == "storage"
    assert "\n" not in str(info.value)
    assert "127.0.0.1:1" in str(info.value)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def projected(request: Any, tmp_path: Path) -> Iterator[DatabaseSessionRepo]:
    """A repository listed through the notification log's projection: SQLite's, or one on eventsourcing's own
    PostgreSQL application recorder (a ``DatabaseStore`` on its settings, which ``DatabaseStore.postgres`` is not)."""
    from sessiontree.storage.database import DatabaseStore, _postgres_env, check_server

    if request.param == "sqlite":
        repo = DatabaseSessionRepo.sqlite(tmp_path / "s.db", clock=fixed_clock(kit.T0))
        yield repo
        repo.close()
        return
    with pg.temp_schema("stock") as schema:
        env = _postgres_env(pg.DBNAME, pg.HOST, pg.PORT, pg.USER, None, schema)
        check_server(env, pg.url(schema), schema)
        repo = DatabaseSessionRepo(DatabaseStore(env, url=pg.url(schema)), clock=fixed_clock(kit.T0))
        yield repo
        repo.close()


def test_listing_rows_commit_with_their_tracking_row_or_not_at_all(projected: Any) -> None:
    """The view writes its tracking row (SQL we own, docs/architecture.md) in the transaction of the listing rows: a
    batch at a position another writer already recorded is refused whole and changes nothing; a later one goes in."""
    from eventsourcing.persistence import IntegrityError, Tracking

    from sessiontree.storage.database_index import DELETIONS_STREAM

    session = write_sample(projected)
    before = projected.list()
    name, last = projected.app.name, projected.view.max_tracking_id(projected.app.name)
    deleted = [(last, DELETIONS_STREAM, 1, {"type": "deleted", "id": session.id})]
    with pytest.raises(IntegrityError):
        projected.view.process(deleted, Tracking(name, last))
    assert projected.list() == before
    assert projected.view.max_tracking_id(name) == last
    projected.view.process(deleted, Tracking(name, last + 1))
    assert projected.view.summaries(None) == [] and projected.view.max_tracking_id(name) == last + 1


def test_a_deletion_records_its_marker_in_its_own_transaction(projected: Any) -> None:
    """A prune's deletion inserts the ``~deletions`` marker by SQL we own, in the transaction that checks the line
    count and deletes: a session that changed keeps its rows and gets no marker; else every process's listing drops
    it."""
    from sessiontree.retention.prune import delete_rows
    from sessiontree.storage.database_index import DELETIONS_STREAM

    kept, gone = write_sample(projected), write_sample(projected)
    lines = len(projected.recorder.select_events(gone.id))
    with pytest.raises(SessionError, match="changed"):
        delete_rows(projected.store, gone.id, lines - 1, lambda: SessionError("conflict", "changed"))
    assert len(projected.recorder.select_events(gone.id)) == lines
    assert projected.recorder.select_events(DELETIONS_STREAM) == []
    delete_rows(projected.store, gone.id, lines, lambda: SessionError("conflict", "changed"))
    assert projected.recorder.select_events(gone.id) == []
    [marker] = projected.recorder.select_events(DELETIONS_STREAM)
    assert orjson.loads(marker.state)["id"] == gone.id
    assert [i.id for i in projected.list()] == [kept.id]
