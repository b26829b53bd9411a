"""files.write_atomic, the one temp-file-then-rename (or link) of the library: each variant its callers need."""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

import pytest

from sessiontree.storage.files import write_atomic


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_replaces_a_file_whole_private_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "cache.json"
    target.write_bytes(b"old")
    assert write_atomic(target, b"new") is None
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert _names(tmp_path) == ["cache.json"]


def test_link_never_overwrites_and_removes_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / "archive.gz"
    write_atomic(target, b"first", temp=tmp_path / ".archive.tmp", fsync=True, overwrite=False)
    with pytest.raises(FileExistsError):
        write_atomic(target, b"second", temp=tmp_path / ".archive.tmp", fsync=True, overwrite=False)
    assert target.read_bytes() == b"first"
    assert _names(tmp_path) == ["archive.gz"]


def test_a_link_planted_at_the_temporary_name_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"theirs")
    (tmp_path / "t.tmp").symlink_to(elsewhere)
    with pytest.raises(FileExistsError):
        write_atomic(tmp_path / "target", b"ours", temp=tmp_path / "t.tmp")
    assert elsewhere.read_bytes() == b"theirs" and not (tmp_path / "target").exists()


def test_a_failed_rename_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()  # a folder cannot be replaced by a file
    with pytest.raises(OSError):
        write_atomic(tmp_path / "target", b"data")
    assert _names(tmp_path) == ["target"]


def test_names_relative_to_a_folder_descriptor(tmp_path: Path) -> None:
    folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        write_atomic("blob", b"content", temp=".blob.tmp", dir_fd=folder, fsync=True)
    finally:
        os.close(folder)
    assert (tmp_path / "blob").read_bytes() == b"content" and _names(tmp_path) == ["blob"]


def test_keep_open_returns_the_new_file_locked_for_appending(tmp_path: Path) -> None:
    target = tmp_path / "log.jsonl"
    target.write_bytes(b"{}\n")
    fd = write_atomic(target, b'{"a":1}\n', temp=tmp_path / ".log.rewrite", mode=0o640, fsync=True, keep_open=True)
    try:
        os.write(fd, b'{"b":2}\n')
        assert target.read_bytes() == b'{"a":1}\n{"b":2}\n'
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o640 & ~_umask()
        other = os.open(target, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):  # held: an appender waiting for the lock finds the new file
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    finally:
        os.close(fd)
    assert _names(tmp_path) == ["log.jsonl"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
