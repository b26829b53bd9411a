"""Real processes on one JSONL file: SIGKILL in the middle of appends, and several writers at once."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
import sessiontree_testkit as kit
from sessiontree_faults import drain, fork, reopen

from sessiontree import JsonlSessionStorage

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def file_lines(path: Path) -> list[dict[str, object]]:
    """Every complete line parsed (each must be whole JSON); a torn tail is left out."""
    data = path.read_bytes()
    return [orjson.loads(line) for line in data[: data.rfind(b"\n")].split(b"\n")]


def append_forever(path: Path, seed: int) -> Callable[[int], None]:
    """Append until killed; one entry in twenty is 100 kB, so some kills land inside a write
    and leave a torn last line (about one round in four, when this was written)."""

    def work(ack: int) -> None:
        rng = random.Random(seed)
        session = reopen(path)
        while True:
            size = 100_000 if rng.random() < 0.05 else rng.randrange(10, 2000)
            entry_id = session.append_message(kit.user("k" * size))
            os.write(ack, entry_id.encode() + b"\n")

    return work


@pytest.mark.slow
def test_sigkill_during_appends_loses_no_acknowledged_entry(tmp_path: Path) -> None:
    """Killed 20 times at random moments, the file always opens and holds every acknowledged entry."""
    path = tmp_path / "s.jsonl"
    JsonlSessionStorage.create(path).close()
    rng = random.Random(20261129)
    acknowledged: list[str] = []
    for round_no in range(20):
        pid, read_fd = fork(append_forever(path, round_no))
        time.sleep(rng.uniform(0.02, 0.2))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        acks = drain(read_fd)
        assert not any(a.startswith("ERROR") for a in acks), acks[-1:]
        acknowledged.extend(acks)
        session = reopen(path)
        present = {e.id for e in session.get_entries()}
        missing = [a for a in acknowledged if a not in present]
        assert not missing, f"round {round_no}: {len(missing)} acknowledged entries lost"
        assert len(file_lines(path)) == session.version
        session.close()
    assert len(acknowledged) > 20


def write_n(path: Path, writer: int, count: int) -> Callable[[int], None]:
    """Append ``count`` entries through one object, never refused (a ``conflict`` fails the writer)."""

    def work(ack: int) -> None:
        session = reopen(path)
        for done in range(count):
            entry_id = session.append_message(kit.user(f"writer {writer} entry {done} " + "w" * (writer * 300)))
            os.write(ack, entry_id.encode() + b"\n")

    return work


def read_until(path: Path, stop_at: float) -> Callable[[int], None]:
    def work(ack: int) -> None:
        reads = 0
        while time.monotonic() < stop_at:
            for line in file_lines(path):  # whole lines only: never half a line
                assert line["type"] in ("session", "message")
            reopen(path).close()
            reads += 1
        os.write(ack, f"reads {reads}\n".encode())

    return work


@pytest.mark.slow
def test_several_writers_serialise_their_appends(tmp_path: Path) -> None:
    """Four writers hammering one file: no interleaved line, no duplicate id, every acknowledged append present."""
    path = tmp_path / "s.jsonl"
    JsonlSessionStorage.create(path).close()
    writers = [fork(write_n(path, n, 40)) for n in range(4)]
    reader = fork(read_until(path, time.monotonic() + 2.0))
    acks: list[str] = []
    per_writer: list[list[str]] = []
    for pid, read_fd in writers:
        lines = drain(read_fd)
        assert os.waitpid(pid, 0)[1] == 0, lines[-1:]
        acks.extend(lines)
        per_writer.append(lines)
    reader_lines = drain(reader[1])
    assert os.waitpid(reader[0], 0)[1] == 0, reader_lines[-1:]
    assert reader_lines[0].startswith("reads ")

    objects = file_lines(path)
    assert path.read_bytes().endswith(b"\n")
    entries = objects[1:]
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids)) == 160 == len(acks)
    assert set(acks) == set(ids)
    # Every writer appended under its own leaf: its entries are one branch, each under its previous one.
    parents = {e["id"]: e["parent_id"] for e in entries}
    for mine in per_writer:
        assert [parents[i] for i in mine[1:]] == mine[:-1]
        assert parents[mine[0]] is None or ids.index(parents[mine[0]]) < ids.index(mine[0])
    session = reopen(path)
    assert kit.said([e.message for e in session.get_entries()])[:1][0].startswith("user:writer ")
