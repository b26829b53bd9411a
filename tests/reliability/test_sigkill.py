"""SIGKILL in the middle of appends, 20 times per backend: nothing acknowledged is lost, the
log always verifies (hash chain included), and appending goes on afterwards."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sessiontree_faults as faults
import sessiontree_testkit as kit

from sessiontree import JsonlSessionStorage, open_repo, verify

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
KILLS = 20


def keep_appending(open_session: Callable[[], Any], seed: int) -> Callable[[int], None]:
    """Append until killed, acknowledging each append after it returns. About one entry in
    thirty is 400 kB (a kill can land inside its write); one save in nine writes two lines."""

    def work(ack: int) -> None:
        rng = random.Random(seed)
        session = open_session()
        os.write(ack, b"ready\n")
        count = 0
        while True:
            count += 1
            size = 400_000 if rng.random() < 0.03 else rng.randrange(10, 2000)
            if count % 9 == 0 and session.leaf_id is not None:
                entry_id = session.move_to(session.leaf_id, {"summary": "s" * size})  # leaf + summary
            else:
                entry_id = session.append_message(kit.user("k" * size))
            os.write(ack, f"{entry_id}\n".encode())

    return work


def kill_rounds(
    open_session: Callable[[], Any], check: Callable[[list[str]], dict[str, int]], seed: int
) -> dict[str, int]:
    """Start a writer, kill it at a random moment, check the log; ``KILLS`` times."""
    rng = random.Random(seed)
    acknowledged: list[str] = []
    totals = {"torn_tails": 0, "killed_before_first_ack": 0}
    for round_no in range(KILLS):
        pid, read_fd = faults.fork(keep_appending(open_session, seed + round_no))
        assert os.read(read_fd, 6) == b"ready\n"  # the writer has opened the session
        time.sleep(rng.uniform(0.0, 0.04))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        acks = faults.drain(read_fd)
        assert not any(a.startswith("ERROR") for a in acks), acks[-1:]
        totals["killed_before_first_ack"] += not acks
        acknowledged.extend(acks)
        for key, value in check(acknowledged).items():
            totals[key] = totals.get(key, 0) + value
    totals["acknowledged"] = len(acknowledged)
    return totals


def test_sigkill_during_jsonl_appends(tmp_path: Path) -> None:
    """20 kills of a JSONL writer: every acknowledged entry survives, the chain verifies, torn
    tails are only ever the last line and are repaired by the next append."""
    path = tmp_path / "s.jsonl"
    JsonlSessionStorage.create(path).close()

    def check(acknowledged: list[str]) -> dict[str, int]:
        torn = not path.read_bytes().endswith(b"\n")
        report = verify(path)
        assert report.ok and report.chained, report.problems
        assert bool(report.warnings) == torn  # the only warning is the torn last line
        session = faults.reopen(path)
        present = [e.id for e in session.get_entries()]
        assert len(present) == len(set(present))
        missing = set(acknowledged) - set(present)
        assert not missing, f"{len(missing)} acknowledged entries lost"
        session.close()
        return {"torn_tails": int(torn)}

    totals = kill_rounds(lambda: faults.reopen(path), check, seed=1129)
    last = faults.reopen(path)
    written = len(last.get_entries())  # includes appends killed after writing, before acknowledging
    last.append_message(kit.user("after the last kill"))
    final = verify(path)
    assert final.ok and final.warnings == [] and final.lines == last.version
    faults.record("sigkill_jsonl", kills=KILLS, entries=written, lost=0, duplicates=0, **totals)
    assert totals["acknowledged"] > KILLS


def test_sigkill_during_sqlite_appends(tmp_path: Path) -> None:
    """20 kills of a SQLite writer: every acknowledged entry survives and the rows verify."""
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    repo = open_repo(url)
    session_id = repo.create(cwd="/p").id
    repo.close()

    def open_session() -> Any:
        return open_repo(url).open(session_id)

    def check(acknowledged: list[str]) -> dict[str, int]:
        checker = open_repo(url)
        try:
            session = checker.open(session_id)
            report = verify(session)
            assert report.ok and report.chained and report.warnings == [], report.problems
            present = [e.id for e in session.get_entries()]
            assert len(present) == len(set(present))
            missing = set(acknowledged) - set(present)
            assert not missing, f"{len(missing)} acknowledged entries lost"
            return {}
        finally:
            checker.close()

    totals = kill_rounds(open_session, check, seed=2911)
    checker = open_repo(url)
    session = checker.open(session_id)
    written = len(session.get_entries())
    session.append_message(kit.user("after the last kill"))
    final = verify(session)
    assert final.ok
    checker.close()
    faults.record("sigkill_sqlite", kills=KILLS, entries=written, lost=0, duplicates=0, **totals)
    assert totals["acknowledged"] > KILLS
