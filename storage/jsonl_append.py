"""The writer of a JSONL log file: whole-line appends, each under the file's lock for that append only.

An append takes the file's exclusive ``flock``, catches up with the lines other writers appended since this object
last read (its caller folds them in), checks that the path still names the open file, cuts a torn last line, writes
its own line with one ``write`` and releases the lock. Nothing is held between appends, so any number of objects and
processes append to one file; none is refused because another wrote first. Readers never lock and never wait. The OS
drops an ``flock`` with its process, so a writer killed mid-append leaves no stale lock, at most a torn line.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sessiontree.domain.errors import SessionError
from sessiontree.storage.files import lock_holder, open_regular
from sessiontree.storage.jsonl_file import LineFile, StaleFileError, TornLineWarning

DEFAULT_WAIT = 10.0  # seconds an append waits for another append's lock (each holds it for microseconds)
_FIRST_POLL, _LAST_POLL = 0.00005, 0.001  # seconds between two tries for a taken lock: doubling, up to 1 ms


class _Forks:
    """How many forks separate this process from the one that loaded the module (cheaper than a getpid per append)."""

    generation = 0


def _forked() -> None:
    _Forks.generation += 1


os.register_at_fork(after_in_child=_forked)


class WriterBusyError(StaleFileError):
    """The file's lock stayed taken for the whole ``wait``; ``pid`` is its holder where the OS tells it."""

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


class FileGoneError(StaleFileError):
    """The path no longer names the open file: deleted (``deleted``) or replaced by a rewrite."""

    def __init__(self, message: str, deleted: bool) -> None:
        super().__init__(message)
        self.deleted = deleted


def append_error(exc: Exception, session_id: str, where: str) -> SessionError:
    """The ``SessionError`` an append that failed with ``exc`` raises."""
    if isinstance(exc, WriterBusyError):
        why = f"could not take the file's lock to append: {exc}; open it with a longer wait=SECONDS"
        return SessionError("conflict", f"session {session_id} {why}", path=where)
    if isinstance(exc, FileGoneError):
        return SessionError("not_found" if exc.deleted else "conflict", f"session {session_id}: {exc}; nothing was written",
                            path=where)
    if isinstance(exc, StaleFileError):
        return SessionError("conflict", f"session {session_id} changed since it was read: {exc}; reopen it and retry", path=where)
    why = f"could not append to {where}: {getattr(exc, 'strerror', None) or exc}"
    return SessionError("storage", f"could not save to session {session_id}: {why}", path=where)


def names(path: Path, fd: int) -> bool:
    """Does ``path`` still name the file open as ``fd``?"""
    try:
        named, held = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def check_wait(wait: Any) -> float:
    """``wait`` checked: None is the default, :data:`DEFAULT_WAIT`."""
    if wait is None:
        return DEFAULT_WAIT
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0:
        raise ValueError(f"wait must be a number of seconds >= 0 (or None: {DEFAULT_WAIT:g}), not {wait!r}")
    return float(wait)


class AppendingFile(LineFile):
    """A :class:`LineFile` that appends; ``wait``: how long an append waits for the lock another append holds."""

    def __init__(self, path: Path, fd: int, *, wait: float | None = None, **options: Any) -> None:
        super().__init__(path, fd, **options)
        self.wait = check_wait(wait)
        self._mutex = threading.Lock()  # threads of one object share the descriptor, hence its flock
        self._generation = _Forks.generation
        self._identity: tuple[int, int] | None = None  # the open file's (device, inode), once looked at

    def _own_descriptor(self) -> None:
        """In a forked child, open the file again: an ``flock`` belongs to the open file description, which the child
        shares with its parent, so through the inherited descriptor the two would not exclude each other."""
        if self._generation == _Forks.generation:
            return
        self._generation = _Forks.generation
        self._mutex = threading.Lock()  # a thread of the parent may have held it at the fork
        if self.fd < 0:
            return
        try:
            fd = open_regular(self.path, os.O_RDWR | os.O_APPEND)
        except OSError:
            return  # the lock step finds the path gone and says so
        if (os.fstat(fd).st_dev, os.fstat(fd).st_ino) != (os.fstat(self.fd).st_dev, os.fstat(self.fd).st_ino):
            os.close(fd)  # a different file now: keep the inherited one, which the lock step refuses
            return
        old, self.fd = self.fd, fd
        os.close(old)  # the parent's description stays open in the parent, with its lock
        self._identity = None

    def _wait_for_lock(self) -> None:
        # Polled, not blocking: an flock cannot time out (and signals are the host's). Sleeps, not sched_yield: on a
        # busy machine a yielding waiter takes the CPU from the holder (measured: 4 writers at 0.3x one, against
        # 0.6-0.75x with sleeps; fairness 0.89 against 0.99).
        deadline = time.monotonic() + self.wait
        delay = _FIRST_POLL
        while True:
            time.sleep(delay)
            delay = min(delay * 2, _LAST_POLL)
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    pid = lock_holder(self.fd)
                    holder = f"process {pid}" if pid is not None else "another process"
                    raise WriterBusyError(f"{holder} held it for over {self.wait:g} s", pid) from None

    def lock(self) -> None:
        """Take this object's mutex and the file's exclusive lock for one append, and check that the path still names
        the open file (``FileGoneError`` if a prune deleted it or a rewrite replaced it); :meth:`unlock` after."""
        if self._generation != _Forks.generation:
            self._own_descriptor()
        self._mutex.acquire()
        try:
            if self.fd < 0:
                raise StaleFileError(f"{self.path} was closed")
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._wait_for_lock()
        except BaseException:
            self._mutex.release()
            raise
        try:
            self.check_named()
        except BaseException:
            self.unlock()
            raise

    def unlock(self) -> None:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            self._mutex.release()

    def check_named(self) -> None:
        """``FileGoneError`` unless the path still names the open file (one ``stat``: the open file's is kept)."""
        identity = self._identity
        if identity is None:
            held = os.fstat(self.fd)
            identity = self._identity = (held.st_dev, held.st_ino)
        try:
            named = os.stat(self.path)
            if (named.st_dev, named.st_ino) == identity:
                return
        except OSError:
            pass
        deleted = not os.path.lexists(self.path)
        raise FileGoneError(
            f"{self.path} was deleted since it was opened (a prune?)" if deleted else
            f"{self.path} was replaced since it was opened (a line was rewritten): open it again", deleted,
        )

    @contextmanager
    def locked(self) -> Iterator[None]:
        """:meth:`lock` ... :meth:`unlock` around a block."""
        self.lock()
        try:
            yield
        finally:
            self.unlock()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """This object's mutex, without the file's lock (a reader catching up)."""
        self._own_descriptor()
        with self._mutex:
            if self.fd < 0:
                raise StaleFileError(f"{self.path} was closed")
            yield

    def grew(self) -> bool:
        """Is the file longer than this object last saw it (one ``lseek``)?"""
        if self.size is None or self.fd < 0:
            return False
        try:
            return os.lseek(self.fd, 0, os.SEEK_END) > self.size + len(self.torn)
        except OSError:
            return False

    def catch_up(self) -> list[bytes]:
        """The complete lines appended since this object last read the file (without newlines), taken in; the count
        and size advance. A torn last line seen before may have been cut and replaced by another writer's line."""
        if self.size is None:
            self.sync()
            return []  # a first look: nothing is new to a caller that has not read the file through this object
        end = os.lseek(self.fd, 0, os.SEEK_END)
        if end == self.size + len(self.torn):
            return []
        if end < self.size:
            raise StaleFileError(f"{self.path} shrank from {self.size} to {end} bytes since it was read")
        start = self.size
        lines, tail, read = self.read_split(start)
        if self.needs_newline:
            if not lines or lines[0]:
                raise StaleFileError(f"{self.path}: a line was appended without a line break before it")
            lines.pop(0)
            start, read = start + 1, read - 1
        self.observe_lines(start, read, len(lines), tail)
        if self.needs_newline:  # a whole last line without its newline (another producer's): it counts
            lines.append(tail)
        return lines

    def append_in_flight(self) -> bool:
        """Might another writer be in the middle of an append (so an unterminated last line is not torn but still
        being written)? Only while someone holds the file's lock."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        return False

    def warn_torn(self, number: int, tail: bytes) -> None:
        """Warn that a read found a torn last line (unless another writer may still be writing it)."""
        if self.append_in_flight():
            return
        message = (f"{self.path}: ignoring a torn last line (line {number}, {len(tail)} bytes, left by an "
                   "interrupted append); it is removed before the next append")
        self.warnings.append(message)
        warnings.warn(message, TornLineWarning, stacklevel=5)

    def repair(self) -> None:
        """Cut off a torn last line (call under :meth:`locked`, caught up)."""
        if not self.torn:
            return
        assert self.size is not None
        tail = os.pread(self.fd, len(self.torn) + 1, self.size)
        if tail != self.torn:
            raise StaleFileError(f"the end of {self.path} changed since it was read")
        os.ftruncate(self.fd, self.size)
        message = (f"{self.path}: removed a torn last line (line {self.count + 1}, {len(self.torn)} bytes, "
                   "left by an interrupted append) before appending")
        self.warnings.append(message)
        warnings.warn(message, TornLineWarning, stacklevel=4)
        self.torn = b""

    def append_at(self, version: int, lines: Sequence[bytes]) -> None:
        """Append ``lines`` (each without newline) as line ``version`` and the ones after it, only there:
        ``StaleFileError`` if another writer took that line; an ``OSError`` of the write leaves the file as it was."""
        with self.locked():
            self.catch_up()
            self.repair()
            if version != self.count + 1:
                raise StaleFileError(
                    f"version {version} is "
                    + ("taken (another writer appended since this one last read the file)" if version <= self.count
                       else f"not the next one ({self.count + 1} is)")
                )
            self.write(lines)

    def write(self, lines: Sequence[bytes]) -> None:
        """Write ``lines`` (each without newline) with one ``os.write`` (under :meth:`locked`, caught up, repaired).
        On any failure the file is cut back to where it was."""
        assert self.size is not None
        data = b"\n".join((b"", *lines, b"") if self.needs_newline else (*lines, b""))
        start = self.size
        try:
            written = os.write(self.fd, data)
            while written < len(data):  # a short write, on a full disk or a signal: finish or fail
                more = os.write(self.fd, data[written:])
                if more <= 0:
                    raise OSError(errno.EIO, "short write")
                written += more
            if self._fsync:
                os.fsync(self.fd)
        except BaseException:
            try:
                os.ftruncate(self.fd, start)
            except OSError:
                pass
            raise
        self.size = start + len(data)
        self.count += len(lines)
        self.needs_newline = False
