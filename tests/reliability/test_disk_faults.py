"""A full disk, a file size limit and a refused permission during an append: the caller gets
``SessionError('storage')``, the file stays valid (it verifies), the session in memory still
equals the file, and the next append after the fault is cleared works and chains on."""

from __future__ import annotations

import errno
import os
import resource
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sessiontree_faults as faults
import sessiontree_testkit as kit

from sessiontree import JsonlSessionStorage, Session, SessionError, open_repo, verify
from sessiontree.storage import jsonl_file

BIG = "x" * 200_000


def consistent(session: Session, path: Path) -> None:
    """The file verifies and reads back exactly what the live session holds."""
    report = verify(path)
    assert report.ok and report.chained and report.warnings == [], report.problems
    assert faults.reopen(path).get_entries() == session.get_entries()
    assert report.lines == session.version


def expect_storage_error(session: Session, append: Callable[[], Any]) -> SessionError:
    before = session.get_entries()
    with pytest.raises(SessionError) as caught:
        append()
    assert caught.value.code == "storage"
    assert session.get_entries() == before  # the failed append left no trace in memory
    return caught.value


# -- a real full disk: a small tmpfs ------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 kB tmpfs (needs root, or CAP_SYS_ADMIN); skipped where it cannot be mounted."""
    where = tmp_path / "small"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(folder: Path, room: int = 0) -> Path:
    """Fill a file system, then free ``room`` bytes; the filler file is returned."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    if room:
        os.truncate(filler, os.path.getsize(filler) - room)
    return filler


@pytest.mark.parametrize("out_of_line", [False, True], ids=["inline", "out of line"])
@pytest.mark.parametrize("room", [0, 64 * 1024], ids=["no room", "room for part of the line"])
def test_a_full_tmpfs_during_a_jsonl_append(small_disk: Path, room: int, out_of_line: bool) -> None:
    """ENOSPC from a real file system, at once or after part of the line (or of its content kept out of line) was
    written (a short write, whose bytes are cut off again), leaves the file valid."""
    path = small_disk / "s.jsonl"
    storage = JsonlSessionStorage.create(path)
    storage.blobs.threshold = 1024 if out_of_line else None  # type: ignore[union-attr]
    session = kit.open_session(storage)
    session.append_message(kit.user("before the disk filled"))
    filler = fill(small_disk, room)
    error = expect_storage_error(session, lambda: session.append_message(kit.user(BIG)))
    where = small_disk / ".blobs" if out_of_line else path
    assert "No space left on device" in error.message and str(where) in str(error)
    assert not out_of_line or not list(where.rglob("*.tmp"))  # no half-written blob left behind
    consistent(session, path)
    filler.unlink()
    session.append_message(kit.user("after space was freed"))
    consistent(session, path)
    method = ("tmpfs 512 kB, full" if not room else "tmpfs 512 kB, 64 kB left (short write)") + (
        ", content out of line" if out_of_line else "")
    faults.record("disk_full", backend="jsonl", method=method, code=error.code, message=error.message, lost=0)


def test_a_full_tmpfs_during_a_sqlite_append(small_disk: Path) -> None:
    """SQLite on a full file system refuses the insert; the database stays readable and verifies."""
    url = f"sqlite:///{small_disk / 's.db'}"
    repo = open_repo(url)
    session = repo.create(cwd="/p")
    session.append_message(kit.user("before the disk filled"))
    filler = fill(small_disk)
    failures = 0
    for _ in range(50):  # the WAL may still have room for a few: keep going until it has none
        try:
            session.append_message(kit.user(BIG))
        except SessionError as exc:
            assert exc.code == "storage" and "full" in exc.message
            failures += 1
            message = exc.message
            break
    assert failures == 1
    entries = session.get_entries()
    assert verify(session).ok
    filler.unlink()
    other = open_repo(url)
    assert other.open(session.id).get_entries() == entries
    session.append_message(kit.user("after space was freed"))
    assert verify(session).ok
    other.close()
    repo.close()
    faults.record("disk_full", backend="sqlite", method="tmpfs 512 kB", code="storage", message=message, lost=0)


# -- injected at the os.write boundary (runs everywhere) ----------------------------------------


class FailingWrites:
    """Replaces ``os.write`` for one file descriptor: each call takes the next planned outcome.

    Appends take the pure-Python path, where ``os.write`` is called; the compiled one meets
    real faults above (a full tmpfs) and below (a file size limit)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fd: int, plan: list[Any]) -> None:
        self.real = os.write
        self.fd = fd
        self.plan = plan
        monkeypatch.setattr(jsonl_file.os, "write", self)

    def __call__(self, fd: int, data: Any) -> int:
        if fd != self.fd or not self.plan:
            return self.real(fd, data)
        step = self.plan.pop(0)
        if step == "half":
            return self.real(fd, bytes(data)[: len(data) // 2])  # a short write: only part is on disk
        raise OSError(step, os.strerror(step))


@pytest.mark.parametrize(
    "plan",
    [[errno.ENOSPC], ["half", errno.ENOSPC], [errno.EACCES], [errno.EIO], [errno.EDQUOT]],
    ids=["ENOSPC", "short write then ENOSPC", "EACCES", "EIO", "EDQUOT"],
)
def test_a_failing_write_leaves_the_file_and_session_consistent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plan: list[Any]
) -> None:
    """Whatever the write fails with, half a line is cut off again and nothing is half-applied."""
    path = tmp_path / "s.jsonl"
    session = kit.open_session(JsonlSessionStorage.create(path))
    first = session.append_message(kit.user("one"))
    injected = FailingWrites(monkeypatch, session.storage._file.fd, list(plan))  # type: ignore[attr-defined]
    error = expect_storage_error(session, lambda: session.move_to(first, {"summary": "two lines"}))
    assert not injected.plan  # every planned failure happened
    consistent(session, path)
    session.append_message(kit.user("the fault is gone"))
    consistent(session, path)
    faults.record("write_fault", plan=[p if p == "half" else errno.errorcode[p] for p in plan], code=error.code,
                  message=error.message, lost=0)


def test_a_failing_fsync_is_a_storage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With durability="fsync", an fsync error fails the append and the line is taken back."""
    path = tmp_path / "s.jsonl"
    session = kit.open_session(JsonlSessionStorage.create(path, durability="fsync"))
    session.append_message(kit.user("one"))

    def fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(jsonl_file.os, "fsync", fsync)
    error = expect_storage_error(session, lambda: session.append_message(kit.user("two")))
    monkeypatch.undo()
    consistent(session, path)
    session.append_message(kit.user("three"))
    consistent(session, path)
    faults.record("write_fault", plan=["fsync EIO"], code=error.code, message=error.message, lost=0)


def test_sqlite_refusing_pages_is_a_storage_error(tmp_path: Path) -> None:
    """A SQLite database that may not grow (max_page_count) fails the append cleanly."""
    repo = open_repo(f"sqlite:///{tmp_path / 's.db'}")
    session = repo.create(cwd="/p")
    session.append_message(kit.user("one"))
    with repo.recorder.datastore.transaction(commit=True) as cursor:  # type: ignore[attr-defined]
        cursor.execute("PRAGMA max_page_count = 8")
    error = expect_storage_error(session, lambda: session.append_message(kit.user(BIG)))
    assert "full" in error.message and verify(session).ok
    assert repo.open(session.id).get_entries() == session.get_entries()
    repo.close()
    faults.record("disk_full", backend="sqlite", method="PRAGMA max_page_count", code=error.code, message=error.message, lost=0)


# -- a file size limit (RLIMIT_FSIZE) in a child process -----------------------------------------


def test_a_file_size_limit_stops_appends_cleanly(tmp_path: Path) -> None:
    """Under RLIMIT_FSIZE the write fails with EFBIG (SIGXFSZ ignored): a storage error, a valid file."""
    path = tmp_path / "s.jsonl"
    JsonlSessionStorage.create(path).close()

    def work(ack: int) -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 300_000, resource.RLIM_INFINITY))
        session = faults.reopen(path)
        while True:
            try:
                entry_id = session.append_message(kit.user("y" * 70_000))
            except SessionError as exc:
                os.write(ack, f"{exc.code}|{exc.message}|{session.version}\n".encode())
                return
            os.write(ack, f"{entry_id}\n".encode())

    pid, read_fd = faults.fork(work)
    lines = faults.drain(read_fd)
    faults.wait_ok(pid, lines)
    code, message, version = lines[-1].split("|")
    assert code == "storage" and "too large" in message.lower()
    report = verify(path)
    assert report.ok and report.lines == int(version) == len(lines)  # header + every acknowledged entry
    assert [e.id for e in faults.reopen(path).get_entries()] == lines[:-1]
    faults.record("write_fault", plan=["RLIMIT_FSIZE (EFBIG)"], code=code, message=message, lost=0)


# -- permission denied, for real, as another user ---------------------------------------------


@pytest.mark.skipif(not hasattr(os, "setuid") or os.geteuid() != 0, reason="needs root to become another user")
def test_permission_denied_as_another_user() -> None:
    """A user who may not write gets a read-only session whose appends are storage errors; one who
    may not read gets a storage error on open."""
    folder = Path(tempfile.mkdtemp(prefix="sessiontree-perm-"))  # pytest's own folders are root-only
    try:
        _permission_denied(folder)
    finally:
        shutil.rmtree(folder)


def _permission_denied(folder: Path) -> None:
    os.chmod(folder, 0o755)
    readable = folder / "readable.jsonl"
    private = folder / "private.jsonl"
    for path in (readable, private):
        kit.open_session(JsonlSessionStorage.create(path)).append_message(kit.user("owned by root"))
    os.chmod(readable, 0o644)

    def work(ack: int) -> None:
        os.setgid(65534)
        os.setuid(65534)  # nobody
        session = faults.reopen(readable)
        try:
            session.append_message(kit.user("not allowed"))
        except SessionError as exc:
            os.write(ack, f"{exc.code}|{exc.message}\n".encode())
        try:
            JsonlSessionStorage.open(private)
        except SessionError as exc:
            os.write(ack, f"{exc.code}|{exc.message}\n".encode())

    pid, read_fd = faults.fork(work)
    lines = faults.drain(read_fd)
    faults.wait_ok(pid, lines)
    (code1, message1), (code2, message2) = (line.split("|", 1) for line in lines)
    assert code1 == "storage" and "read-only" in message1
    assert code2 == "storage" and "Permission denied" in message2
    assert verify(readable).ok and verify(private).ok and verify(readable).lines == 2
    faults.record("permission", case="file not writable (other user)", code=code1, message=message1, lost=0)
    faults.record("permission", case="file not readable (other user)", code=code2, message=message2, lost=0)
