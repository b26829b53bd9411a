"""Writers that share a session (docs/repositories.md, *Writers*): any number of objects and processes append to one
session and none is refused because another wrote first; ``if_version=`` is the opt-in conflict.

A JSONL append takes the file's lock for that append only; the OS drops it with its process.
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
from typing import Any

import pytest
import sessiontree_testkit as kit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import JsonlSessionStorage, Session, SessionError, verify

LOCKER = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_APPEND)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as an append in flight holds it
    if sys.argv[3] == "torn":  # killed in the middle of its write: half a line
        os.write(fd, b'{"type":"message","id":"deadbeef","parent_id":null,"timestamp":"2026-')
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    fcntl.flock(fd, fcntl.LOCK_UN)
    print("released", flush=True)
    time.sleep(60)
    """
)


def _new_file(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    JsonlSessionStorage.create(path).close()
    return path


def _locker(path: Path, hold: float, torn: bool = False) -> subprocess.Popen[str]:
    """Another process holding the file's lock for ``hold`` seconds (as a slow append would)."""
    child = subprocess.Popen([sys.executable, "-c", LOCKER, str(path), str(hold), "torn" if torn else "-"],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "locked"
    return child


def _texts(path: Path) -> list[str]:
    return [kit.said([e.message])[0] for e in Session(JsonlSessionStorage.open(path)).get_entries()]


def test_two_objects_on_one_file_alternate_1000_appends(tmp_path: Path) -> None:
    """Two Session objects on one file in one process, used in turn (a REPL, a test, a web handler): every
    acknowledged entry is there once, the file verifies, and each object's leaf is its own last entry."""
    path = _new_file(tmp_path)
    objects = [Session(JsonlSessionStorage.open(path)), Session(JsonlSessionStorage.open(path))]
    acked: list[list[str]] = [[], []]
    for n in range(1000):
        acked[n % 2].append(objects[n % 2].append_message(kit.user(f"{n}")))
    for mine, session in zip(acked, objects):
        assert session.leaf_id == mine[-1]
        assert [e.id for e in session.get_branch()] == mine  # its own branch: each entry under its previous one
    fresh = Session(JsonlSessionStorage.open(path))
    ids = [e.id for e in fresh.get_entries()]
    assert len(ids) == len(set(ids)) == 1000 and set(ids) == set(acked[0]) | set(acked[1])
    assert fresh.leaf_id == acked[1][-1]  # the file's leaf: the last append's
    assert objects[0].version == 1000 and objects[1].version == 1001  # each has read up to its own last append
    report = verify(path)
    assert report.ok and report.chained


def test_a_stale_object_takes_the_others_entries_in_everywhere_but_its_branch(tmp_path: Path) -> None:
    path = _new_file(tmp_path)
    first, second = Session(JsonlSessionStorage.open(path)), Session(JsonlSessionStorage.open(path))
    a = first.append_message(kit.user("a"))
    first.append_label_change(a, "seen")
    first.append_session_info("named by first")
    assert second.version == 1 and second.get_session_name() == "named by first"  # a whole-log read catches up
    assert second.get_label(a) == "seen" and len(second.get_entries()) == 3 and second.version == 4
    assert second.leaf_id is None and second.build_context().messages == []  # its own branch: still empty
    assert second.log_leaf_id == first.leaf_id
    assert second.refresh(follow=True) == 0 and second.leaf_id == first.leaf_id


def test_if_version_is_conflict_exactly_when_another_writer_moved_the_log(tmp_path: Path) -> None:
    path = _new_file(tmp_path)
    first, second = Session(JsonlSessionStorage.open(path)), Session(JsonlSessionStorage.open(path))
    first.append_message(kit.user("one"), if_version=first.version)  # nobody moved it: written
    before = path.read_bytes()
    for append in (
        lambda v: second.append_message(kit.user("x"), if_version=v),
        lambda v: second.append_custom_entry("note", {"n": 1}, if_version=v),
        lambda v: second.append_session_info("name", if_version=v),
        lambda v: second.move_to(None, if_version=v),
        lambda v: second.append_model_change("p", "m", if_version=v),
    ):
        with pytest.raises(SessionError) as caught:
            append(1)
        assert caught.value.code == "conflict" and path.read_bytes() == before
    two = second.append_message(kit.user("two"), if_version=2)  # the version it had not read yet, but the log's
    assert second.version == 3 and second.entry(two).parent_id is None
    with pytest.raises(SessionError):
        first.append_message(kit.user("stale"), if_version=first.version)
    with pytest.raises(TypeError, match="if_version"):
        first.append_message(kit.user("bad"), if_version="2")  # type: ignore[arg-type]


def test_a_retry_with_the_same_entry_id_and_if_version_stays_idempotent(tmp_path: Path) -> None:
    path = _new_file(tmp_path)
    first, second = Session(JsonlSessionStorage.open(path)), Session(JsonlSessionStorage.open(path))
    read = first.version
    assert first.append_message(kit.user("once"), entry_id="retry001", if_version=read) == "retry001"
    assert first.append_message(kit.user("once"), entry_id="retry001", if_version=read) == "retry001"
    assert second.append_message(kit.user("once"), entry_id="retry001", if_version=read) == "retry001"  # lost ack
    assert [e.id for e in Session(JsonlSessionStorage.open(path)).get_entries()] == ["retry001"]


def test_an_append_waits_for_another_append_in_flight(tmp_path: Path) -> None:
    path = _new_file(tmp_path)
    child = _locker(path, hold=0.5)
    try:
        session = Session(JsonlSessionStorage.open(path))
        started = time.monotonic()
        session.append_message(kit.user("mine"))
        assert time.monotonic() - started >= 0.2
        assert child.stdout is not None and child.stdout.readline().strip() == "released"
    finally:
        child.kill()
        child.wait()
    assert _texts(path) == ["user:mine"]


def test_a_lock_held_longer_than_wait_is_conflict_naming_its_process(tmp_path: Path) -> None:
    path = _new_file(tmp_path)
    child = _locker(path, hold=30)
    try:
        session = Session(JsonlSessionStorage.open(path, wait=0.2))
        started = time.monotonic()
        with pytest.raises(SessionError) as caught:
            session.append_message(kit.user("mine"))
        assert caught.value.code == "conflict" and f"process {child.pid} held it" in caught.value.message
        assert 0.2 <= time.monotonic() - started < 5
    finally:
        child.kill()
        child.wait()


def test_readers_never_wait_for_a_writer(tmp_path: Path) -> None:
    path = _new_file(tmp_path)
    Session(JsonlSessionStorage.open(path)).append_message(kit.user("one"))
    child = _locker(path, hold=30)
    try:
        started = time.monotonic()
        reader = Session(JsonlSessionStorage.open(path))
        assert kit.said(reader.build_context().messages) == ["user:one"] and verify(path).ok
        assert time.monotonic() - started < 5
    finally:
        child.kill()
        child.wait()


def test_a_writer_killed_mid_append_leaves_no_stale_lock_and_its_torn_line_is_cut(tmp_path: Path) -> None:
    """SIGKILL in the middle of an append (the lock held, half a line written): the OS drops the lock, so another
    writer appends at once, cutting the torn line first."""
    path = _new_file(tmp_path)
    kept = Session(JsonlSessionStorage.open(path)).append_message(kit.user("before"))
    child = _locker(path, hold=30, torn=True)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    session = Session(JsonlSessionStorage.open(path, wait=0))
    started = time.monotonic()
    with pytest.warns(UserWarning, match="torn"):
        after = session.append_message(kit.user("after the crash"))
    assert time.monotonic() - started < 1
    assert [e.id for e in Session(JsonlSessionStorage.open(path)).get_entries()] == [kept, after]
    assert verify(path).ok and b"deadbeef" not in path.read_bytes()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_appends_through_its_own_lock_and_never_interleaves_with_its_parent(tmp_path: Path) -> None:
    """Issue 32 item 12: a forked worker appends correctly. Its copy of the storage opens the file again, so parent and
    child exclude each other (an flock belongs to the open file shared through fork) and draw different ids."""
    path = _new_file(tmp_path)
    session = Session(JsonlSessionStorage.open(path))
    session.append_message(kit.user("parent"))
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read_fd)
            ids = [session.append_message(kit.user(f"child {n} " + "c" * 3000)) for n in range(200)]
            os.write(write_fd, " ".join(ids).encode())
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_fd)
    mine = [session.append_message(kit.user(f"parent {n} " + "p" * 3000)) for n in range(200)]
    data = b""
    while chunk := os.read(read_fd, 1 << 16):
        data += chunk
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    theirs = data.decode().split()
    fresh = Session(JsonlSessionStorage.open(path))
    ids = [e.id for e in fresh.get_entries()]
    assert len(ids) == len(set(ids)) == 401 and set(mine) | set(theirs) <= set(ids)
    parents = {e.id: e.parent_id for e in fresh.get_entries()}
    assert [parents[i] for i in theirs[1:]] == theirs[:-1] and [parents[i] for i in mine[1:]] == mine[:-1]
    assert verify(path).ok


def test_a_line_appended_without_the_chain_is_refused_not_sealed_over(tmp_path: Path) -> None:
    """Another program's unchained line in a hash-chained file: the next append takes it in but refuses to extend a
    damaged chain (``corrupt``, run verify) and writes nothing."""
    path = _new_file(tmp_path)
    session = Session(JsonlSessionStorage.open(path))
    session.append_message(kit.user("one"))
    with open(path, "ab") as out:
        out.write(b'{"type":"custom","id":"f0000001","parent_id":null,"timestamp":"2026-01-01T00:00:00Z","customType":"x"}\n')
    before = path.read_bytes()
    with pytest.raises(SessionError) as caught:
        session.append_message(kit.user("two"))
    assert caught.value.code == "corrupt" and path.read_bytes() == before


def test_a_file_deleted_or_replaced_under_a_writer_is_never_written_into(tmp_path: Path) -> None:
    path = _new_file(tmp_path)
    session = Session(JsonlSessionStorage.open(path))
    session.append_message(kit.user("one"))
    os.rename(path, tmp_path / "moved.jsonl")
    with pytest.raises(SessionError) as caught:
        session.append_message(kit.user("lost?"))
    assert caught.value.code == "not_found"
    path.write_bytes((tmp_path / "moved.jsonl").read_bytes())  # another file at the path now
    with pytest.raises(SessionError) as caught:
        session.append_message(kit.user("lost?"))
    assert caught.value.code == "conflict" and "open it again" in caught.value.message
    assert b"lost?" not in (tmp_path / "moved.jsonl").read_bytes() + path.read_bytes()


@pytest.mark.parametrize("wait", [-1, "5", True, float("nan")])
def test_wait_must_be_seconds(tmp_path: Path, wait: object) -> None:
    path = _new_file(tmp_path)
    with pytest.raises(ValueError, match="wait must be"):
        JsonlSessionStorage.open(path, wait=wait)  # type: ignore[arg-type]


def test_threads_on_one_object_and_another_object_keep_one_chain(tmp_path: Path) -> None:
    """Four threads share one object while another object appends too: every append lands once, the chain holds."""
    path = _new_file(tmp_path)
    shared, other = Session(JsonlSessionStorage.open(path)), Session(JsonlSessionStorage.open(path))
    acked: list[str] = []

    def work(n: int) -> None:
        for i in range(100):
            acked.append((shared if n else other).append_message(kit.user(f"{n}.{i}")))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [e.id for e in Session(JsonlSessionStorage.open(path)).get_entries()]
    assert sorted(ids) == sorted(acked) and len(ids) == 500 and verify(path).ok


# -- a property: any interleaving of appends by N objects is the sequential replay of the same calls --------------------

ACTION = st.tuples(st.integers(0, 3), st.sampled_from(["message", "label", "name", "move_back", "follow"]))


@given(st.integers(2, 4), st.lists(ACTION, min_size=1, max_size=40))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_interleaved_appends_equal_their_sequential_replay(tmp_path_factory: Any, objects: int, actions: list[Any]) -> None:
    """N objects on one file, each call made on one of them in any order: the file holds what a model of the calls
    gives, replayed in the same order (each object appends under its own leaf, and every entry lands once)."""
    path = tmp_path_factory.mktemp("writers") / "s.jsonl"
    JsonlSessionStorage.create(path).close()
    sessions = [Session(JsonlSessionStorage.open(path)) for _ in range(objects)]
    model: list[tuple[str, str | None]] = []  # (id, parent) in the order written
    leaves: list[str | None] = [None] * objects
    for who, action in actions:
        who %= objects
        session = sessions[who]
        if action == "follow":
            session.refresh(follow=True)
            leaves[who] = _model_leaf(model)
            continue
        if action == "move_back" and leaves[who] is not None:
            target = dict(model)[leaves[who]]
            session.move_to(target)
            model.append(("<leaf>", leaves[who]))
            leaves[who] = target
            continue
        if action == "label" and leaves[who] is not None:
            new = session.append_label_change(leaves[who], "seen")
        elif action == "name":
            new = session.append_session_info(f"named by {who}")
        else:
            new = session.append_message(kit.user(f"{who}"))
        model.append((new, leaves[who]))
        leaves[who] = new
        assert session.leaf_id == new
    fresh = Session(JsonlSessionStorage.open(path))
    written = [(e.id if e.type != "leaf" else "<leaf>", e.parent_id) for e in fresh.get_entries()]
    assert written == model
    assert [s.leaf_id for s in sessions] == leaves
    assert verify(path).ok


def _model_leaf(model: list[tuple[str, str | None]]) -> str | None:
    """The log's leaf in the model: the last entry's, or where its last move went."""
    if not model:
        return None
    last = model[-1][0]
    if last != "<leaf>":
        return last
    return _moved_to(model)


def _moved_to(model: list[tuple[str, str | None]]) -> str | None:
    # a move's target is the parent of what it left (move_back): recorded as the leaf it left; its target is that
    # entry's parent
    return dict(model)[model[-1][1]] if model[-1][1] is not None else None


def test_a_session_deleted_and_created_again_is_never_appended_to_through_the_old_file(tmp_path: Path) -> None:
    """``repo.delete`` then a new session under the same id, while an old object is still open: its next append is
    refused (the path names another file now), never written into the deleted file or mixed into the new one."""
    from sessiontree import open_repo

    repo = open_repo(str(tmp_path / "repo"))
    old = repo.create(cwd="/p", session_id="chat-1")
    old.append_message(kit.user("before"))
    repo.delete("chat-1")
    with pytest.raises(SessionError) as caught:
        old.append_message(kit.user("into the deleted file?"))
    assert caught.value.code == "not_found"
    new = repo.create(cwd="/p", session_id="chat-1")
    with pytest.raises(SessionError) as caught:
        old.append_message(kit.user("into the new file?"))
    assert caught.value.code == "conflict" and "open it again" in caught.value.message
    assert [e.id for e in repo.open("chat-1").get_entries()] == [e.id for e in new.get_entries()] == []
