"""The writer of a JSONL log file: a lease, then whole-line appends.

A writer holds a *lease*: the file's exclusive ``flock``, taken at its first append and kept until it closes (the
OS drops it when the process dies). While it holds the lease no other writer appends, so an append only checks that
the file still ends where this writer left it; a second writer is refused at once, naming the holder's pid, or
waits up to its ``wait`` seconds. Readers never lock and never wait.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sessiontree.adapters.files import lock_holder
from sessiontree.adapters.jsonl_file import LineFile, StaleFileError, TornLineWarning
from sessiontree.domain.errors import SessionError


class _Forks:
    """How many forks separate this process from the one that loaded the module: a lease
    taken in an earlier generation belongs to a parent (its descriptor's lock is shared)."""

    generation = 0


def _forked() -> None:
    _Forks.generation += 1


os.register_at_fork(after_in_child=_forked)


class WriterBusyError(StaleFileError):
    """Another writer holds the file's lease; ``pid`` is its process where the OS tells it."""

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


def append_error(exc: Exception, session_id: str, where: str) -> SessionError:
    """The ``SessionError`` an append that failed with ``exc`` raises."""
    if isinstance(exc, WriterBusyError):
        why = f"has another writer: {exc}; close that writer, or open this one with wait=SECONDS to wait for it"
        return SessionError("conflict", f"session {session_id} {why}", path=where)
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
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0:
        raise ValueError(f"wait must be a number of seconds >= 0, not {wait!r}")
    return float(wait)


class LeasedFile(LineFile):
    """A :class:`LineFile` that appends; ``wait``: how long an append waits for another writer's lease."""

    def __init__(self, path: Path, fd: int, *, wait: float = 0.0, **options: Any) -> None:
        super().__init__(path, fd, **options)
        self.wait = check_wait(wait)
        self._mutex = threading.Lock()
        self._lease_pid = 0  # the process that took the lease through this descriptor (0: none)
        self._lease_generation = -1

    def close(self) -> None:
        """Close the file, which ends the lease if this writer held it."""
        super().close()
        self._lease_pid, self._lease_generation = 0, -1

    @property
    def leased(self) -> bool:
        """Does this process hold the file's lease through this descriptor?"""
        return self._lease_generation == _Forks.generation

    def take_lease(self) -> None:
        """Take the exclusive lock and keep it until :meth:`close`, waiting up to ``wait``
        seconds for another writer's (``WriterBusyError`` if it does not end by then)."""
        if self._lease_pid:
            if self.leased:
                return
            raise WriterBusyError(  # inherited through fork(): the descriptor's lock is the parent's
                f"process {self._lease_pid} took its writer lease before it forked; open it again in this process",
                self._lease_pid,
            )
        deadline = time.monotonic() + self.wait
        delay = 0.0005
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    pid = lock_holder(self.fd)
                    holder = f"process {pid}" if pid is not None else "another process"
                    raise WriterBusyError(f"{holder} holds its writer lease", pid) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.02)
        if not names(self.path, self.fd):  # replaced while this writer waited (a rewritten line): its file is gone
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            raise StaleFileError(f"{self.path} was replaced since it was opened (a line was rewritten); open it again")
        self._lease_pid, self._lease_generation = os.getpid(), _Forks.generation

    def release_lease(self) -> None:
        """End the lease early (a new file's creator, done with its header)."""
        if self.leased:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            self._lease_pid, self._lease_generation = 0, -1

    def append_in_flight(self) -> bool:
        """Might another writer be in the middle of an append (so an unterminated last line
        is not torn but still being written)? Only while someone else holds the lease."""
        if self.leased:
            return False
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
        """Cut off a torn last line (call with the lock held, after :meth:`sync`)."""
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
        """Append ``lines`` (each without newline) as line ``version`` and the ones after it.

        The first append takes the lease, catches up with the file and cuts a torn last line; later ones only check
        that the file still ends where this writer left it (a writer that ignores the lock is caught up with).
        ``StaleFileError`` if ``version`` is not the next line; an ``OSError`` of the write leaves the file as it was.
        """
        with self._mutex:
            if self._lease_generation != _Forks.generation:  # not leased (in this process)
                self.take_lease()
                self.sync()
            elif self.size is None or os.lseek(self.fd, 0, os.SEEK_END) != self.size + len(self.torn):
                self.sync()
            if self.torn:
                self.repair()
            if version != self.count + 1:
                raise StaleFileError(
                    f"version {version} is "
                    + ("taken (another writer appended since this one last read the file)" if version <= self.count
                       else f"not the next one ({self.count + 1} is)")
                )
            self._write(lines)

    def _write(self, lines: Sequence[bytes]) -> None:
        """Write ``lines`` (each without newline) with one ``os.write``; leased, state synced. On any failure the file
        is cut back to where it was, so it stays valid, and the OSError propagates."""
        assert self.size is not None and not self.torn
        data = b"\n".join((b"", *lines, b"") if self.needs_newline else (*lines, b""))
        start = self.size
        try:
            written = os.write(self.fd, data)
            while written < len(data):  # only on a full disk or a signal: finish or fail
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
