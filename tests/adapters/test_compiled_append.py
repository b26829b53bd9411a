"""The compiled append step (adapters/_speedups.c ``append_if_at``, used by
``LineFile.try_append``): what it writes, when it declines, and how it fails."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest

import sessiontree_testkit as kit
from sessiontree import JsonlSessionStorage, Session, SessionError
from sessiontree.adapters import jsonl_file
from sessiontree.adapters.speedups import compiled

pytestmark = pytest.mark.skipif(compiled is None, reason="the compiled append is not built here")


def _file(tmp_path: Path, data: bytes = b"") -> tuple[Path, int]:
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    return path, os.open(path, os.O_RDWR | os.O_APPEND)


def _append(fd: int, lines: list, end: int, fsync: bool) -> int:
    """append_if_at on ``fd``, naming the file it is."""
    st = os.fstat(fd)
    return compiled.append_if_at(fd, lines, end, fsync, st.st_dev, st.st_ino)


def test_it_writes_each_line_with_its_newline_and_returns_the_bytes_written(tmp_path: Path) -> None:
    path, fd = _file(tmp_path, b'{"a":0}\n')
    try:
        assert _append(fd, [b'{"a":1}', b'{"b":22}'], 8, False) == 17
        assert _append(fd, [b'{"c":3}'], 25, True) == 8
    finally:
        os.close(fd)
    assert path.read_bytes() == b'{"a":0}\n{"a":1}\n{"b":22}\n{"c":3}\n'


def test_it_declines_without_writing_when_the_file_does_not_end_where_expected(tmp_path: Path) -> None:
    path, fd = _file(tmp_path, b'{"a":0}\n')
    try:
        assert _append(fd, [b'{"a":1}'], 0, False) == 0
        assert _append(fd, [b'{"a":1}'], 9, False) == 0
        assert _append(fd, [], 8, False) == 0
        assert _append(fd, [b"{}"] * 65, 8, False) == 0  # many lines: the general path
        # and the lock is free again after each: another descriptor takes it at once
        other = os.open(path, os.O_RDWR)
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(other)
    finally:
        os.close(fd)
    assert path.read_bytes() == b'{"a":0}\n'


def test_it_declines_while_another_writer_holds_the_lock(tmp_path: Path) -> None:
    path, fd = _file(tmp_path)
    other = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(other, fcntl.LOCK_EX)
        assert _append(fd, [b"{}"], 0, False) == 0
        fcntl.flock(other, fcntl.LOCK_UN)
        assert _append(fd, [b"{}"], 0, False) == 3
    finally:
        os.close(other)
        os.close(fd)


def test_bad_arguments_and_a_bad_descriptor_raise() -> None:
    call = compiled.append_if_at
    with pytest.raises(TypeError):
        call(0, (b"{}",), 0, False, 0, 0)  # a tuple: only lists
    assert call(0, ["{}"], 0, False, 0, 0) == 0  # not bytes: the general path
    assert call(0, [bytearray(b"{}")], 0, False, 0, 0) == 0
    with pytest.raises(ValueError):
        call(0, [b"{}"], -1, False, 0, 0)
    with pytest.raises(TypeError):
        call(0, [b"{}"], 0, False)  # the file's identity is missing
    with pytest.raises(ValueError):
        call(-1, [b"{}"], 0, False, 0, 0)
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)
    with pytest.raises(OSError) as caught:
        call(fd, [b"{}"], 0, False, 0, 0)  # closed
    assert caught.value.errno == errno.EBADF


def test_a_refused_write_cuts_the_file_back(tmp_path: Path) -> None:
    """A descriptor opened read-only: the write fails (EBADF) after the lock and size check;
    nothing stays behind and the lock is free again."""
    path, fd = _file(tmp_path, b'{"a":0}\n')
    os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as caught:
            _append(fd, [b'{"a":1}'], 8, False)
        assert caught.value.errno == errno.EBADF
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    assert path.read_bytes() == b'{"a":0}\n'


def test_a_session_appends_through_it_and_falls_back_when_it_declines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Appends use the compiled step; a write from elsewhere makes it decline once, and the
    general path catches up and appends; the file reads back whole."""
    calls: list[int] = []
    real = jsonl_file._append_if_at

    def counting(fd: int, lines: list[bytes], end: int, fsync: bool, *ident: int) -> int:
        done = real(fd, lines, end, fsync, *ident)
        calls.append(done)
        return done

    monkeypatch.setattr(jsonl_file, "_append_if_at", counting)
    path = tmp_path / "s.jsonl"
    session = kit.open_session(JsonlSessionStorage.create(path))
    session.append_message(kit.user("one"))
    assert calls and calls[-1] > 0
    other = Session(JsonlSessionStorage.open(path))
    other.append_message(kit.user("from elsewhere"))
    with pytest.raises(SessionError) as caught:  # this writer is behind: a conflict, as before
        session.append_message(kit.user("two"))
    assert caught.value.code == "conflict"
    again = Session(JsonlSessionStorage.open(path))
    again.append_message(kit.user("three"))
    texts = [e.message.content[0].text for e in Session(JsonlSessionStorage.open(path)).get_entries()]
    assert texts == ["one", "from elsewhere", "three"]


@pytest.mark.parametrize("same_file", [True, False], ids=["same file", "descriptor reused for another file"])
def test_a_signal_handler_that_raises_during_the_append_takes_the_lines_back(tmp_path: Path, same_file: bool) -> None:
    """A KeyboardInterrupt-like exception from a signal handler, for a signal that arrives
    while the interpreter is released for the write and fsync, fails the append and cuts
    the file back, as the Python path's ``except BaseException`` does; the lock is free.

    The signal comes from another thread a few milliseconds into a large fsync'ed write;
    an attempt where it arrived too late (the call had returned) is tried again. When the
    descriptor no longer names the file it was given for (a handler closed it and opened
    another under the same number), nothing is cut."""
    import signal
    import threading

    class Interrupted(Exception):
        pass

    def handler(signum: int, frame: object) -> None:
        raise Interrupted

    path, fd = _file(tmp_path, b'{"a":0}\n')
    lines = [b'{"x":"' + b"y" * (1 << 20) + b'"}'] * 48  # ~48 MB
    old = signal.signal(signal.SIGUSR1, handler)
    try:
        for _ in range(5):
            size = os.path.getsize(path)
            timer = threading.Timer(0.003, os.kill, (os.getpid(), signal.SIGUSR1))
            result = None
            try:
                timer.start()
                st = os.fstat(fd)
                ident = (st.st_dev, st.st_ino) if same_file else (st.st_dev, st.st_ino + 1)
                result = compiled.append_if_at(fd, lines, size, True, *ident)
                timer.join()
            except Interrupted:
                timer.join()
            if result is None:  # raised from inside the call
                written = sum(len(line) + 1 for line in lines)
                assert os.path.getsize(path) == (size if same_file else size + written)
                other = os.open(path, os.O_RDWR)
                try:
                    if same_file:
                        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free
                    else:  # not its file any more: the descriptor is left alone, lock and all
                        with pytest.raises(BlockingIOError):
                            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                finally:
                    os.close(other)
                return
            assert os.path.getsize(path) == size + result  # returned: the lines stay
        pytest.skip("the signal never arrived during the write on this machine")
    finally:
        signal.signal(signal.SIGUSR1, old)
        os.close(fd)


def test_the_version_check_and_the_write_see_the_same_count(tmp_path: Path) -> None:
    """try_append declines when the line count it is given is no longer the file's (another
    thread appended after the caller checked its version): the general path then reports
    the conflict. Checked under the file's thread lock."""
    path, fd = _file(tmp_path, b'{"a":0}\n')
    os.close(fd)
    f = jsonl_file.LineFile.open(path)
    try:
        f.sync()
        assert f.count == 1
        assert not f.try_append([b'{"b":1}'], 0)  # the caller's count is stale
        assert f.try_append([b'{"b":1}'], 1)
        assert f.count == 2 and path.read_bytes() == b'{"a":0}\n{"b":1}\n'
    finally:
        f.close()


def test_two_sessions_on_one_storage_get_a_conflict_not_a_stale_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two Session objects on one storage: the first appends between the second's version
    check and its write (forced); the second gets a conflict, and the file verifies."""
    from sessiontree import verify

    path = tmp_path / "s.jsonl"
    storage = JsonlSessionStorage.create(path)
    one, two = Session(storage), Session(storage)
    one.append_message(kit.user("first"))
    two = Session(JsonlSessionStorage.open(path))
    shared = two.storage
    late = Session(shared)  # shares the LineFile with `two`
    real = jsonl_file.LineFile.try_append
    done = []

    def racing(self: jsonl_file.LineFile, lines: list[bytes], count: int) -> bool:
        if not done:
            done.append(1)
            late.append_message(kit.user("from the other session"))  # appends first
        return real(self, lines, count)

    monkeypatch.setattr(jsonl_file.LineFile, "try_append", racing)
    with pytest.raises(SessionError) as caught:
        two.append_message(kit.user("stale"))
    assert caught.value.code == "conflict"
    assert verify(path).ok
