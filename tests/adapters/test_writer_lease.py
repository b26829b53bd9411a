"""The writer lease of a JSONL file: one writer at a time, readers never wait.

A storage takes the file's exclusive lock at its first append and keeps it until it closes;
the OS drops it when the process dies.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import sessiontree_testkit as kit

from sessiontree import JsonlSessionStorage, Session, SessionError

HOLDER = textwrap.dedent(
    """
    import sys, time
    from sessiontree import JsonlSessionStorage, Session, UserMessage
    session = Session(JsonlSessionStorage.open(sys.argv[1]))
    session.append_message(UserMessage(content="from the holder"))
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
    session.close()
    print("released", flush=True)
    time.sleep(60)
    """
)


def _new_file(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    JsonlSessionStorage.create(path).close()
    return path


def _holder(path: Path, hold: float) -> subprocess.Popen[str]:
    """Another process that appends to ``path``, holds the lease ``hold`` seconds, then closes."""
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(hold)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def _texts(path: Path) -> list[str]:
    return [kit.said([e.message])[0] for e in Session(JsonlSessionStorage.open(path)).get_entries()]


def test_creating_a_file_does_not_hold_the_lease(tmp_path: Path) -> None:
    """The creator's header is written, then the file is free: any one writer may start."""
    path = tmp_path / "s.jsonl"
    created = JsonlSessionStorage.create(path)
    Session(JsonlSessionStorage.open(path)).append_message(kit.user("other"))
    created.close()
    assert _texts(path) == ["user:other"]


def test_a_second_writer_is_refused_at_once_naming_the_holder(tmp_path: Path) -> None:
    path = _new_file(tmp_path)
    first = Session(JsonlSessionStorage.open(path))
    first.append_message(kit.user("one"))
    second = Session(JsonlSessionStorage.open(path))
    started = time.monotonic()
    with pytest.raises(SessionError) as caught:
        second.append_message(kit.user("two"))
    assert time.monotonic() - started < 1.0
    assert caught.value.code == "conflict" and f"process {os.getpid()} holds its writer lease" in caught.value.message
    assert second.version == 2 and _texts(path) == ["user:one"]
    first.append_message(kit.user("three"))  # the holder goes on
    first.close()
    second.refresh()
    second.append_message(kit.user("four"))  # and once it closed, the second writer may write
    assert _texts(path) == ["user:one", "user:three", "user:four"]


def test_another_process_holding_the_lease_is_named(tmp_path: Path) -> None:
    path = _new_file(tmp_path)
    child = _holder(path, hold=30)
    try:
        session = Session(JsonlSessionStorage.open(path))
        with pytest.raises(SessionError) as caught:
            session.append_message(kit.user("mine"))
        assert caught.value.code == "conflict" and f"process {child.pid} holds" in caught.value.message
    finally:
        child.kill()
        child.wait()


def test_a_writer_may_wait_for_the_lease(tmp_path: Path) -> None:
    """With ``wait=`` an append waits for the holder to close, then appends."""
    path = _new_file(tmp_path)
    child = _holder(path, hold=0.5)
    try:
        session = Session(JsonlSessionStorage.open(path, wait=20))
        started = time.monotonic()
        session.append_message(kit.user("mine"))
        assert time.monotonic() - started >= 0.2
        assert child.stdout is not None and child.stdout.readline().strip() == "released"
    finally:
        child.kill()
        child.wait()
    assert _texts(path) == ["user:from the holder", "user:mine"]


def test_a_short_wait_gives_up(tmp_path: Path) -> None:
    path = _new_file(tmp_path)
    holder = Session(JsonlSessionStorage.open(path))
    holder.append_message(kit.user("one"))
    waiting = Session(JsonlSessionStorage.open(path, wait=0.2))
    started = time.monotonic()
    with pytest.raises(SessionError) as caught:
        waiting.append_message(kit.user("two"))
    assert caught.value.code == "conflict" and 0.2 <= time.monotonic() - started < 5


def test_readers_never_wait_for_the_writer(tmp_path: Path) -> None:
    path = _new_file(tmp_path)
    writer = Session(JsonlSessionStorage.open(path))
    writer.append_message(kit.user("one"))
    done = threading.Event()

    def read() -> None:
        reader = Session(JsonlSessionStorage.open(path))
        assert kit.said(reader.build_context().messages) == ["user:one"]
        done.set()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join(10)
    assert done.is_set()
    writer.append_message(kit.user("two"))


def test_the_lease_goes_when_its_process_dies(tmp_path: Path) -> None:
    path = _new_file(tmp_path)
    child = _holder(path, hold=30)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    session = Session(JsonlSessionStorage.open(path))
    session.append_message(kit.user("after the crash"))
    assert _texts(path) == ["user:from the holder", "user:after the crash"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_does_not_write_under_its_parents_lease(tmp_path: Path) -> None:
    path = _new_file(tmp_path)
    session = Session(JsonlSessionStorage.open(path))
    session.append_message(kit.user("parent"))
    pid = os.fork()
    if pid == 0:  # the child: its copy of the storage shares the parent's lock, and must not use it
        try:
            session.append_message(kit.user("child"))
            code = 1
        except SessionError as exc:
            code = 0 if exc.code == "conflict" and "before it forked" in exc.message else 2
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    session.append_message(kit.user("parent again"))
    assert _texts(path) == ["user:parent", "user:parent again"]


def test_a_writer_that_ignores_the_lock_is_noticed(tmp_path: Path) -> None:
    """A line another program appended without the lock is not written over or interleaved:
    the holder's view is stale, its append is ``conflict``, and it writes nothing."""
    path = _new_file(tmp_path)
    session = Session(JsonlSessionStorage.open(path))
    session.append_message(kit.user("one"))
    with open(path, "ab") as out:
        out.write(b'{"type":"custom","id":"f0000001","parent_id":null,"timestamp":"2026-01-01T00:00:00Z","customType":"x"}\n')
    before = path.read_bytes()
    with pytest.raises(SessionError) as caught:
        session.append_message(kit.user("two"))
    assert caught.value.code == "conflict" and path.read_bytes() == before


@pytest.mark.parametrize("wait", [-1, "5", True, float("nan")])
def test_wait_must_be_seconds(tmp_path: Path, wait: object) -> None:
    path = _new_file(tmp_path)
    with pytest.raises(ValueError, match="wait must be"):
        JsonlSessionStorage.open(path, wait=wait)  # type: ignore[arg-type]
