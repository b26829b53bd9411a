"""Several processes appending at once, to one session and to different sessions of one
repository, on JSONL, SQLite and PostgreSQL: nobody is refused (an append that finds others'
entries takes them in and goes after them), no acknowledged append is lost, no id appears twice,
each writer's entries form its own branch, and the log is one unbroken hash chain that verifies."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import sessiontree_faults as faults
import sessiontree_testkit as kit

from sessiontree import open_repo, verify

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
WRITERS = 4
APPENDS = 25


def writer(url: str, session_id: str | None, number: int, appends: int) -> Callable[[int], None]:
    """Append ``appends`` entries (to ``session_id``, or to a new session of its own) through one object, never
    refused (any error, ``conflict`` included, fails the writer); acknowledge each append."""

    def work(ack: int) -> None:
        repo = open_repo(url)
        session = repo.open(session_id) if session_id else repo.create(cwd=f"/writer/{number}")
        os.write(ack, f"session {session.id}\n".encode())
        for done in range(appends):
            entry_id = session.append_message(kit.user(f"writer {number} entry {done} " + "w" * (number * 300)))
            os.write(ack, f"ack {entry_id}\n".encode())
        repo.close()

    return work


def run_writers(url: str, shared: str | None, appends: int) -> dict[str, list[list[str]]]:
    """Start the writers together; the ids each acknowledged, per session."""
    children = [faults.fork(writer(url, shared, n, appends)) for n in range(WRITERS)]
    acked: dict[str, list[list[str]]] = {}
    for pid, read_fd in children:
        lines = faults.drain(read_fd)
        faults.wait_ok(pid, lines)
        sid = lines[0].split()[1]
        acked.setdefault(sid, []).append([line.split()[1] for line in lines if line.startswith("ack ")])
    return acked


def check(url: str, acked: dict[str, list[list[str]]]) -> int:
    """Every acknowledged id is in its session exactly once, and nothing else is; each writer's entries are one branch
    (each under its previous one: it appended under its own leaf); the log verifies as one unbroken hash chain."""
    repo = open_repo(url)
    total = 0
    for sid, writers in acked.items():
        session = repo.open(sid)
        entries = [e for e in session.get_entries() if e.type == "message"]
        present = [e.id for e in entries]
        assert len(present) == len(set(present)), "duplicate ids"
        assert sorted(present) == sorted(i for ids in writers for i in ids), "lost or unacknowledged appends"
        parents = {e.id: e.parent_id for e in entries}
        for ids in writers:
            assert [parents[i] for i in ids[1:]] == ids[:-1]
        report = verify(session)
        assert report.ok and report.chained, report.problems
        total += len(present)
    repo.close()
    return total


def scenario(name: str, url: str, shared: bool, appends: int = APPENDS) -> None:
    if shared:
        repo = open_repo(url)
        session_id: str | None = repo.create(cwd="/shared").id
        repo.close()
    else:
        session_id = None
    acked = run_writers(url, session_id, appends)
    assert len(acked) == (1 if shared else WRITERS)
    total = check(url, acked)
    assert total == WRITERS * appends
    faults.record(
        "concurrency", case=name, processes=WRITERS, appends_each=appends, acknowledged=total,
        conflicts_reported=0, lost=0, duplicates=0,
    )


def test_writers_on_one_jsonl_session(tmp_path: Path) -> None:
    """Four processes on one JSONL file: serialised by the file's lock, each append after the others' lines."""
    scenario("jsonl, one session", str(tmp_path / "repo"), shared=True)


def test_four_processes_append_500_each_to_one_jsonl_session_and_none_is_refused(tmp_path: Path) -> None:
    """Issue 31: 4 processes x 500 appends to one file, nobody sees conflict: 2,000 entries, one chain, verified."""
    scenario("jsonl, one session, 4 x 500", str(tmp_path / "repo"), shared=True, appends=500)


def test_four_processes_append_to_one_sqlite_session_and_none_is_refused(tmp_path: Path) -> None:
    """The same on SQLite: a taken version is caught up with and retried."""
    scenario("sqlite, one session, 4 x 100", f"sqlite:{tmp_path / 'sessions.db'}", shared=True, appends=100)


def test_writers_on_different_jsonl_sessions(tmp_path: Path) -> None:
    """Four processes, each with its own session in one JSONL directory: no interference."""
    scenario("jsonl, a session each", str(tmp_path / "repo"), shared=False)


@pytest.mark.postgres
def test_writers_on_one_postgres_session() -> None:
    """Four processes on one PostgreSQL session: the version constraint orders them, a taken version is retried."""
    import sessiontree_pg as pg

    with pg.temp_schema("conc") as schema:
        scenario("postgresql, one session, 4 x 100", pg.url(schema), shared=True, appends=100)


@pytest.mark.postgres
def test_writers_on_different_postgres_sessions() -> None:
    """Four processes, each with its own PostgreSQL session in one schema."""
    import sessiontree_pg as pg

    with pg.temp_schema("conc") as schema:
        open_repo(pg.url(schema)).close()  # the tables exist before the writers race to use them
        scenario("postgresql, a session each", pg.url(schema), shared=False)




@pytest.mark.postgres
def test_processes_opening_one_postgres_repository_together() -> None:
    """Eight processes opening one PostgreSQL repository at once all succeed (eventsourcing
    re-creates its insert function on every start; colliding starts are retried)."""
    import sessiontree_pg as pg

    failures = 0
    for _ in range(3):
        with pg.temp_schema("open") as schema:
            open_repo(pg.url(schema)).close()

            def work(ack: int) -> None:
                open_repo(pg.url(schema)).close()
                os.write(ack, b"opened\n")

            children = [faults.fork(work) for _ in range(8)]
            for pid, read_fd in children:
                lines = faults.drain(read_fd)
                faults.wait_ok(pid, lines)
                failures += lines != ["opened"]
    assert failures == 0
    faults.record("concurrency", case="postgresql, 8 processes opening one repository (x3)", processes=8,
                  appends_each=0, acknowledged=24, conflicts_reported=0, lost=0, duplicates=0)
