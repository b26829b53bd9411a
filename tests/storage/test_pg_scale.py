"""PostgreSQL at scale: appends to different sessions never wait for each other, one session keeps its single
winner per version, the listing row is written with each append, and a repository an earlier version wrote opens
with its listing built from its events."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import sessiontree_pg as pg
import sessiontree_testkit as kit

from sessiontree import SessionError, open_repo
from sessiontree.storage.recorder import stored_event

pytestmark = pytest.mark.postgres


@pytest.fixture
def schema() -> Iterator[str]:
    with pg.temp_schema("scale") as name:
        yield name


def raw(schema: str) -> Any:
    import psycopg

    conn = psycopg.connect(host=pg.HOST, port=pg.PORT, user=pg.USER, dbname=pg.DBNAME)
    conn.execute(f'SET search_path TO "{schema}"')
    conn.commit()
    return conn


def test_an_open_transaction_on_one_session_does_not_hold_up_another(schema: str) -> None:
    """A writer of session A stuck mid-transaction (its row and listing row taken, not committed) holds up only A:
    an append to B completes at once. With a table lock, B would wait for A's commit."""
    repo = open_repo(pg.url(schema))
    a, b = repo.create(cwd="/a"), repo.create(cwd="/b")
    stuck = raw(schema)
    line = orjson.dumps({"type": "custom", "id": "x1", "parent_id": None, "timestamp": kit.T0_ISO, "custom_type": "t"})
    stuck.execute("INSERT INTO sessiontree_events (originator_id, originator_version, topic, state) "
                  "VALUES (%s, 2, 't', %s)", (a.id, line))
    stuck.execute("UPDATE sessiontree_listing SET version = 2 WHERE session_id = %s", (a.id,))
    try:
        started = time.monotonic()
        b.append_message(kit.user("not waiting"))
        assert time.monotonic() - started < 2.0
        assert [i.message_count for i in repo.list(cwd="/b")] == [1]
    finally:
        stuck.rollback()
        stuck.close()
    a.append_message(kit.user("after the rollback"))  # A's version 2 is free again
    assert repo.open(a.id).get_entries()[-1].message.content == kit.user("after the rollback").content
    repo.close()


@pytest.mark.parametrize("optimistic", [False, True])
def test_one_session_written_by_many_at_once(schema: str, optimistic: bool) -> None:
    """Eight Session objects on one log append at once (issue 31). Plainly, every append lands: each that finds its
    version taken catches up and tries again, so eight entries, each under its writer's own leaf, and the log verifies.
    With ``if_version`` (the version all eight read), one wins and the other seven get a clean conflict."""
    from sessiontree import verify

    repo = open_repo(pg.url(schema) + "&pool_size=8")
    sid = repo.create(cwd="/p").id
    writers = [repo.open(sid) for _ in range(8)]
    read = writers[0].version
    start = threading.Barrier(len(writers))
    outcome: list[str] = []

    def append(session: Any, n: int) -> None:
        start.wait()
        try:
            session.append_message(kit.user(f"writer {n}"), if_version=read if optimistic else None)
            outcome.append("ok")
        except SessionError as exc:
            outcome.append(exc.code)

    threads = [threading.Thread(target=append, args=(s, n)) for n, s in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    landed = 1 if optimistic else 8
    assert sorted(outcome) == ["conflict"] * (8 - landed) + ["ok"] * landed
    [info] = repo.list()
    reopened = repo.open(sid)
    assert (info.message_count, len(reopened.get_entries())) == (landed, landed)
    assert all(entry.parent_id is None for entry in reopened.get_entries())  # each under its writer's leaf (the root)
    assert verify(reopened).ok
    repo.close()


def test_the_listing_row_follows_every_append_and_delete(schema: str) -> None:
    """No projection to run: list() is current after each append, rename and delete, from any repository object."""
    writer = open_repo(pg.url(schema))
    reader = open_repo(pg.url(schema))
    session = writer.create(cwd="/p", name="first")
    session.append_message(kit.user("question"))
    session.append_message(kit.assistant("answer"))
    session.append_session_info("")  # clears the name
    [info] = reader.list()
    assert (info.name, info.message_count, info.first_message) == (None, 2, "question")
    assert info.modified == session.get_entries()[-1].timestamp
    writer.delete(session.id)
    assert reader.list() == []
    with pytest.raises(SessionError) as err:
        reader.index_runner()
    assert err.value.code == "storage"
    writer.close()
    reader.close()


def test_a_repository_an_earlier_version_wrote_opens_with_its_listing_built(schema: str) -> None:
    """Sessions written through eventsourcing's application recorder (as before), a deletion marker among them, and
    no listing table: the first open folds every session into the listing, once."""
    first = open_repo(pg.url(schema))
    made = [first.create(cwd=f"/w{n}", name=f"s{n}") for n in range(3)]
    made[0].append_message(kit.user("hello"))
    lines = {s.id: s.storage.read_lines() for s in made}
    first.close()
    with raw(schema) as conn:
        conn.execute("DROP TABLE sessiontree_listing, sessiontree_layout")
        conn.execute("DELETE FROM sessiontree_events")
    old = open_repo(pg.url(schema)).store  # type: ignore[attr-defined]
    old.app.recorder.insert_events([stored_event(sid, v, line) for sid, ls in lines.items() for v, line in enumerate(ls, 1)])
    old.app.recorder.insert_events([stored_event("~deletions", 1, orjson.dumps({"type": "deleted", "id": "gone"}))])
    with raw(schema) as conn:
        conn.execute("DROP TABLE sessiontree_listing, sessiontree_layout")
    old.close()
    again = open_repo(pg.url(schema))
    infos = {i.id: (i.name, i.message_count) for i in again.list()}
    assert infos == {made[0].id: ("s0", 1), made[1].id: ("s1", 0), made[2].id: ("s2", 0)}
    again.open(made[1].id).append_message(kit.user("now"))
    assert {i.id: i.message_count for i in again.list(cwd="/w1")} == {made[1].id: 1}
    again.close()


@pytest.mark.parametrize(("url", "says"), [
    (f"postgresql://{pg.USER}@{pg.HOST}:{pg.PORT}/no_such_database_st?connect_timeout=2", 'database "no_such_database_st" does not exist'),
    (f"postgresql://no_such_role_st:pw@{pg.HOST}:{pg.PORT}/{pg.DBNAME}?connect_timeout=2", 'role "no_such_role_st"'),
    (f"postgresql://{pg.USER}@{pg.HOST}:1/{pg.DBNAME}?connect_timeout=2", "Connection refused"),
])
def test_a_wrong_database_role_or_server_is_one_clear_storage_error_at_once(url: str, says: str) -> None:
    """The server's own words, within the connect timeout, the password never shown."""
    pg.require_postgres()
    started = time.monotonic()
    with pytest.raises(SessionError) as err:
        open_repo(url)
    assert time.monotonic() - started < 2.5
    assert err.value.code == "storage" and says in str(err.value) and "\n" not in str(err.value)
    assert ":pw@" not in str(err.value)


def _open_and_create(url: str, results: Any) -> None:
    try:
        repo = open_repo(url)
        repo.create(cwd="/p")
        repo.close()
        results.put("ok")
    except BaseException as exc:  # reported to the parent
        results.put(repr(exc))


def test_processes_opening_a_new_schema_at_once_all_succeed(schema: str) -> None:
    """The schema, eventsourcing's tables and the listing are created once, whoever gets there first: CREATE ... IF NOT
    EXISTS races are retried (before, all but one of them could fail with a duplicate key in pg_namespace)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    procs = [ctx.Process(target=_open_and_create, args=(pg.url(schema) + "&pool_size=1", results)) for _ in range(6)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    assert outcomes == ["ok"] * 6
    repo = open_repo(pg.url(schema))
    assert len(repo.list()) == 6
    repo.close()


def test_an_insert_of_several_sessions_is_all_or_nothing(schema: str) -> None:
    """The recorder takes events of several sessions in one call (one transaction): all are listed, or, when one
    version is taken, none of them is written."""
    from eventsourcing.persistence import IntegrityError

    repo = open_repo(pg.url(schema))
    a, b = repo.create(cwd="/a"), repo.create(cwd="/b")
    lines = {s.id: s.storage.read_lines() for s in (a, b)}
    extra = [orjson.dumps({"type": "custom", "id": f"c{n}", "parent_id": None, "timestamp": kit.T0_ISO,
                           "custom_type": "t"}) for n in range(2)]
    recorder = repo.store.recorder  # type: ignore[attr-defined]
    recorder.insert_events([stored_event(a.id, 2, extra[0]), stored_event(b.id, 2, extra[1])])
    created = {s.id: s.header.timestamp for s in (a, b)}
    assert {i.id: i.modified for i in repo.list()} == created  # entries older than the header: the header's time
    with pytest.raises(IntegrityError):
        recorder.insert_events([stored_event(a.id, 3, extra[0]), stored_event(b.id, 2, extra[1])])
    assert [len(repo.open(s).get_entries()) for s in lines] == [1, 1]
    assert {i.id: i.modified for i in repo.list()} == created  # entries older than the header: the header's time
    repo.close()


def test_a_listing_table_of_the_previous_layout_is_refilled_with_forks_marked(schema: str) -> None:
    """A listing table from before ``forked_at`` (and before ``modified`` kept up with the header's time) gets the
    column and is refilled once on open: a fork made after its source's last entry lists first, with its fork point."""
    first = open_repo(pg.url(schema))
    source = first.create(cwd="/w")
    at = source.append_message(kit.user("hello"))
    fork = first.fork(source.id, at, "at")
    first.close()
    with raw(schema) as conn:  # as the previous version left it: no column, the old rows, marked built
        conn.execute("ALTER TABLE sessiontree_listing DROP COLUMN forked_at")
        conn.execute("UPDATE sessiontree_listing SET modified = %s, sort_key = %s WHERE session_id = %s",
                     (kit.T0_ISO, kit.T0_ISO, fork.id))
        conn.execute("UPDATE sessiontree_layout SET key = 'listing-v1'")
    again = open_repo(pg.url(schema))
    rows = again.list()
    assert [(r.id, r.forked_at) for r in rows] == [(fork.id, at), (source.id, None)]
    assert rows[0].modified == fork.header.timestamp
    again.close()
