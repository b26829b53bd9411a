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


def test_it_writes_each_line_with_its_newline_and_returns_the_bytes_written(tmp_path: Path) -> None:
    path, fd = _file(tmp_path, b'{"a":0}\n')
    try:
        assert compiled.append_if_at(fd, [b'{"a":1}', b'{"b":22}'], 8, False) == 17
        assert compiled.append_if_at(fd, [b'{"c":3}'], 25, True) == 8
    finally:
        os.close(fd)
    assert path.read_bytes() == b'{"a":0}\n{"a":1}\n{"b":22}\n{"c":3}\n'


def test_it_declines_without_writing_when_the_file_does_not_end_where_expected(tmp_path: Path) -> None:
    path, fd = _file(tmp_path, b'{"a":0}\n')
    try:
        assert compiled.append_if_at(fd, [b'{"a":1}'], 0, False) == 0
        assert compiled.append_if_at(fd, [b'{"a":1}'], 9, False) == 0
        assert compiled.append_if_at(fd, [], 8, False) == 0
        assert compiled.append_if_at(fd, [b"{}"] * 513, 8, False) == 0  # many lines: the general path
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
        assert compiled.append_if_at(fd, [b"{}"], 0, False) == 0
        fcntl.flock(other, fcntl.LOCK_UN)
        assert compiled.append_if_at(fd, [b"{}"], 0, False) == 3
    finally:
        os.close(other)
        os.close(fd)


def test_bad_arguments_and_a_bad_descriptor_raise() -> None:
    with pytest.raises(TypeError):
        compiled.append_if_at(0, (b"{}",), 0, False)  # a tuple: only lists
    with pytest.raises(TypeError):
        compiled.append_if_at(0, ["{}"], 0, False)
    with pytest.raises(TypeError):
        compiled.append_if_at(0, [b"{}"], 0)
    with pytest.raises(ValueError):
        compiled.append_if_at(-1, [b"{}"], 0, False)
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)
    with pytest.raises(OSError) as caught:
        compiled.append_if_at(fd, [b"{}"], 0, False)  # closed
    assert caught.value.errno == errno.EBADF


def test_a_refused_write_cuts_the_file_back(tmp_path: Path) -> None:
    """A descriptor opened read-only: the write fails (EBADF) after the lock and size check;
    nothing stays behind and the lock is free again."""
    path, fd = _file(tmp_path, b'{"a":0}\n')
    os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as caught:
            compiled.append_if_at(fd, [b'{"a":1}'], 8, False)
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

    def counting(fd: int, lines: list[bytes], end: int, fsync: bool) -> int:
        done = real(fd, lines, end, fsync)
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
