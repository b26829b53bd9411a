"""Several processes appending at once, to one session and to different sessions of one
repository, on JSONL and on PostgreSQL: no acknowledged append is lost, no id appears twice,
every stale writer is told ``conflict`` (and retries), and the log verifies afterwards."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import sessiontree_faults as faults
import sessiontree_testkit as kit

from sessiontree import SessionError, open_repo, verify

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
WRITERS = 4
APPENDS = 25


def writer(url: str, session_id: str | None, number: int) -> Callable[[int], None]:
    """Append ``APPENDS`` entries (to ``session_id``, or to a new session of its own), retrying
    after each conflict from a freshly opened session; acknowledge each append, then report."""

    def work(ack: int) -> None:
        repo = open_repo(url)
        session = repo.open(session_id) if session_id else repo.create(cwd=f"/writer/{number}")
        os.write(ack, f"session {session.id}\n".encode())
        conflicts = done = 0
        while done < APPENDS:
            try:
                entry_id = session.append_message(kit.user(f"writer {number} entry {done} " + "w" * (number * 300)))
            except SessionError as exc:
                if exc.code != "conflict":
                    raise
                conflicts += 1
                session.close()
                session = repo.open(session.id)
                continue
            os.write(ack, f"ack {entry_id}\n".encode())
            done += 1
        os.write(ack, f"conflicts {conflicts}\n".encode())
        repo.close()

    return work


def run_writers(url: str, shared: str | None) -> tuple[dict[str, list[str]], int]:
    """Start the writers together; their acknowledged ids per session, and the conflicts seen."""
    children = [faults.fork(writer(url, shared, n)) for n in range(WRITERS)]
    acked: dict[str, list[str]] = {}
    conflicts = 0
    for pid, read_fd in children:
        lines = faults.drain(read_fd)
        faults.wait_ok(pid, lines)
        sid = lines[0].split()[1]
        acked.setdefault(sid, []).extend(line.split()[1] for line in lines if line.startswith("ack "))
        conflicts += int(lines[-1].split()[1])
    return acked, conflicts


def check(url: str, acked: dict[str, list[str]]) -> int:
    """Every acknowledged id is in its session exactly once, and nothing else is; the log verifies
    and is one unbroken chain of parents (each writer appended at the leaf it had read)."""
    repo = open_repo(url)
    total = 0
    for sid, ids in acked.items():
        session = repo.open(sid)
        entries = [e for e in session.get_entries() if e.type == "message"]
        present = [e.id for e in entries]
        assert len(present) == len(set(present)), "duplicate ids"
        assert sorted(present) == sorted(ids), "lost or unacknowledged appends"
        assert [e.parent_id for e in entries] == [None, *present[:-1]]
        report = verify(session)
        assert report.ok and report.chained, report.problems
        total += len(present)
    repo.close()
    return total


def scenario(name: str, url: str, shared: bool) -> None:
    if shared:
        repo = open_repo(url)
        session_id: str | None = repo.create(cwd="/shared").id
        repo.close()
    else:
        session_id = None
    acked, conflicts = run_writers(url, session_id)
    assert len(acked) == (1 if shared else WRITERS)
    total = check(url, acked)
    assert total == WRITERS * APPENDS
    faults.record(
        "concurrency", case=name, processes=WRITERS, appends_each=APPENDS, acknowledged=total,
        conflicts_reported=conflicts, lost=0, duplicates=0,
    )


def test_writers_on_one_jsonl_session(tmp_path: Path) -> None:
    """Four processes on one JSONL file: serialised by the file lock, stale ones told conflict."""
    scenario("jsonl, one session", str(tmp_path / "repo"), shared=True)


def test_writers_on_different_jsonl_sessions(tmp_path: Path) -> None:
    """Four processes, each with its own session in one JSONL directory: no interference."""
    scenario("jsonl, a session each", str(tmp_path / "repo"), shared=False)


@pytest.mark.postgres
def test_writers_on_one_postgres_session() -> None:
    """Four processes on one PostgreSQL session: the version constraint serialises them."""
    import sessiontree_pg as pg

    with pg.temp_schema("conc") as schema:
        scenario("postgresql, one session", pg.url(schema), shared=True)


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
