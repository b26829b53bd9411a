"""An append whose commit outcome is unknown (issue 15, item 6; docs/reliability.md): the
storage looks whether it landed before reporting, and an append retried with the same entry
id is written once, whatever happened to the first attempt."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sessiontree_pg as pg
import sessiontree_testkit as kit
from eventsourcing.persistence import OperationalError

from sessiontree import SessionError, open_repo, verify

COUNT = 150


@pytest.fixture(params=["sqlite", "postgres"])
def repo_url(request: Any, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:{tmp_path / 's.db'}"
        return
    with pg.temp_schema("ambiguous") as schema:
        yield pg.url(schema)


def commits_then_fails(recorder: Any, monkeypatch: Any, *, check_fails: bool = False) -> None:
    """The next insert commits, then raises as a connection lost before the acknowledgement;
    with ``check_fails`` the reads that follow fail too (the server is still away)."""
    real_insert, real_select = recorder.insert_events, recorder.select_events
    state = {"armed": True, "away": False}

    def insert(stored: Any, **kwargs: Any) -> Any:
        result = real_insert(stored, **kwargs)
        if state["armed"]:
            state["armed"] = False
            state["away"] = check_fails
            raise OperationalError("server closed the connection unexpectedly")
        return result

    def select(*args: Any, **kwargs: Any) -> Any:
        if state["away"]:
            raise OperationalError("server closed the connection unexpectedly")
        return real_select(*args, **kwargs)

    monkeypatch.setattr(recorder, "insert_events", insert)
    monkeypatch.setattr(recorder, "select_events", select)


def stored_ids(url: str, session_id: str) -> list[str]:
    other = open_repo(url)
    try:
        again = other.open(session_id)
        assert verify(again).ok
        return [e.id for e in again.get_entries()]
    finally:
        other.close()


def test_a_commit_whose_acknowledgement_was_lost_is_a_success(repo_url: str, monkeypatch: Any) -> None:
    """The rows are there: the append returns normally, once (before the fix: ``storage``)."""
    repo = open_repo(repo_url)
    session = repo.create(cwd="/p")
    commits_then_fails(repo.recorder, monkeypatch)
    entry_id = session.append_message(kit.user("landed"))
    assert stored_ids(repo_url, session.id) == [entry_id]
    session.append_message(kit.user("and on"))
    assert len(stored_ids(repo_url, session.id)) == 2


def test_an_unknown_outcome_says_so_and_a_retry_with_the_id_writes_once(repo_url: str, monkeypatch: Any) -> None:
    """Neither the commit nor the check answered: the error names the entry id to retry with;
    retrying with it, on the same session or a reopened one, writes the message once."""
    repo = open_repo(repo_url)
    session = repo.create(cwd="/p")
    commits_then_fails(repo.recorder, monkeypatch, check_fails=True)
    message = kit.user("maybe landed")
    with pytest.raises(SessionError) as caught:
        session.append_message(message, entry_id="feedbee1")
    assert caught.value.code == "storage" and "entry_id='feedbee1'" in caught.value.message
    monkeypatch.undo()
    assert session.append_message(message, entry_id="feedbee1") == "feedbee1"
    assert session.append_message(message, entry_id="feedbee1") == "feedbee1"
    reopened = open_repo(repo_url).open(session.id)
    assert reopened.append_message(message, entry_id="feedbee1") == "feedbee1"
    assert stored_ids(repo_url, session.id) == ["feedbee1"]
    assert session.get_entries() == reopened.get_entries()


def test_an_entry_id_of_another_append_is_already_exists(repo_url: str) -> None:
    """The same id with other content is not a retry: ``already_exists``, nothing written."""
    session = open_repo(repo_url).create(cwd="/p")
    session.append_message(kit.user("one"), entry_id="aaaa0001")
    with pytest.raises(SessionError) as caught:
        session.append_message(kit.user("two"), entry_id="aaaa0001")
    assert caught.value.code == "already_exists"
    with pytest.raises(SessionError):
        session.append_custom_entry("x", {}, entry_id="aaaa0001")
    assert stored_ids(repo_url, session.id) == ["aaaa0001"]


def test_a_retry_is_the_same_append_when_it_writes_the_same_line(tmp_path: Path) -> None:
    """A message holding a tuple reads back with a list (JSON has one array type): retrying
    it with its id still counts as the same append, on a session that holds the entry as its
    line and decodes it again."""
    from sessiontree import JsonlSessionStorage, Session, ToolResultMessage

    session = Session(JsonlSessionStorage.create(tmp_path / "s.jsonl"))
    result = ToolResultMessage(tool_call_id="t1", tool_name="read", details={"lines": (1, 2)})
    assert session.append_message(result, entry_id="bbbb0001") == "bbbb0001"
    assert session.get_entry("bbbb0001").message.details == {"lines": [1, 2]}
    assert session.append_message(result, entry_id="bbbb0001") == "bbbb0001"
    assert [e.id for e in session.get_entries()] == ["bbbb0001"]


@pytest.mark.postgres
@pytest.mark.slow
def test_backends_killed_during_appends_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    """Backends terminated again and again while a writer appends and retries with its entry
    ids: every message ends up stored exactly once (no loss, no duplicate), in order."""
    import psycopg

    with pg.temp_schema("killed") as schema:
        url = pg.url(schema) + "&pool_size=2&max_overflow=0"
        repo = open_repo(url)
        session = repo.create(cwd="/p")
        stop = threading.Event()
        kills = [0]

        def killer() -> None:
            with psycopg.connect(host=pg.HOST, port=pg.PORT, user=pg.USER, dbname=pg.DBNAME, autocommit=True) as conn:
                while not stop.is_set():
                    rows = conn.execute(  # the writer's connections (tests run one at a time)
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                        "AND datname = %s AND backend_type = 'client backend'",
                        (pg.DBNAME,),
                    ).fetchall()
                    kills[0] += sum(1 for (done,) in rows if done)
                    time.sleep(0.05 + 0.2 * (kills[0] % 5))  # mostly idle connections, now and then mid-append

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        try:
            for n in range(COUNT):
                entry_id = f"{n:08x}"
                for _ in range(50):
                    try:
                        session.append_message(kit.user(f"message {n}"), entry_id=entry_id)
                        break
                    except SessionError as exc:
                        if exc.code == "conflict":  # a stale view after a lost acknowledgement
                            session = repo.open(session.id)
                            continue
                        assert exc.code == "storage", exc
                else:
                    pytest.fail(f"message {n} could not be appended in 50 tries")
        finally:
            stop.set()
            thread.join()
        ids = stored_ids(pg.url(schema), session.id)
        assert ids == [f"{n:08x}" for n in range(COUNT)]
        assert kills[0] > 0
        repo.close()
