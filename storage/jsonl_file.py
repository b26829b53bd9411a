"""One JSONL log file: :class:`LineFile` reads it (its complete lines, a torn tail; readers never lock) and
:class:`AppendingFile` appends whole lines, each under the file's exclusive ``flock`` for that append only (caught up
with other writers' lines, a torn last line cut first); the OS drops an ``flock`` with its process. A *torn* line (no
newline: what a crash mid-append leaves) is never valid JSON, so never taken for a line: ignored, cut by the next writer.
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
from typing import Any, Self

from sessiontree.domain.errors import SessionError
from sessiontree.storage.files import is_whole_line, lock_holder, make_private_dirs, open_regular

DURABILITIES = ("flush", "fsync")
_CHUNK = 1 << 16
DEFAULT_WAIT = 10.0  # seconds an append waits for another append's lock (each holds it for microseconds)
_FIRST_POLL, _LAST_POLL = 0.00005, 0.001  # seconds between two tries for a taken lock: doubling, up to 1 ms


def check_durability(durability: Any) -> str:
    if durability not in DURABILITIES:
        raise ValueError(f"durability must be one of {', '.join(DURABILITIES)}, not {durability!r}")
    return str(durability)


class TornLineWarning(UserWarning):
    """A log file ends with a line cut short by a crash; it is ignored and later removed."""


class StaleFileError(Exception):
    """The file changed under this writer in a way appends cannot continue from."""


class LineFile:
    """An open JSONL log file and what this process knows of it: ``size``, bytes up to the end of the last complete
    line seen (None until the file is scanned, :meth:`sync`); ``count``, complete lines seen; ``torn``, the bytes of
    an unterminated last line seen after them (empty if none)."""

    def __init__(self, path: Path, fd: int, *, durability: str = "flush", writable: bool = True) -> None:
        self.path = path
        self.fd = fd
        self._durability = check_durability(durability)
        self._fsync = durability == "fsync"
        self.writable = writable
        self.size: int | None = None
        self.count = 0
        self.torn = b""
        self.needs_newline = False
        self.bytes_read = 0
        self.warnings: list[str] = []

    @property
    def durability(self) -> str:  # "flush" (each append is written) or "fsync" (and synced to the disk)
        return self._durability

    @classmethod
    def create(cls, path: Path, *, durability: str = "flush", **options: Any) -> Self:
        """Create a new, empty file (mode 0600, parent folders 0700); FileExistsError if any."""
        make_private_dirs(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND | os.O_CLOEXEC, 0o600)
        out = cls(path, fd, durability=durability, **options)
        out.size = 0
        return out

    @classmethod
    def open(
        cls, path: Path, *, durability: str = "flush", read_only: bool = False, follow: bool = True, **options: Any
    ) -> Self:
        """Open an existing file (FileNotFoundError if none); read-only if it is not writable.
        ``follow=False`` refuses a symlink (a repository's files are its own)."""
        if not read_only:
            try:
                fd = open_regular(path, os.O_RDWR | os.O_APPEND, follow=follow)
                return cls(path, fd, durability=durability, **options)
            except PermissionError:
                pass
        return cls(path, open_regular(path, follow=follow), durability=durability, writable=False, **options)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass

    def read(self, start: int = 0, lines: int | None = None, limit: int | None = None) -> bytes:
        """Bytes from ``start`` to the end, or only until ``lines`` newlines have been read
        (or, with ``limit``, more than ``limit`` bytes: a line that long is refused anyway)."""
        if lines is None:
            end = os.fstat(self.fd).st_size
            data = os.pread(self.fd, max(0, end - start), start) if end > start else b""
            while True:  # the file may have grown meanwhile: read to the real end
                more = os.pread(self.fd, _CHUNK, start + len(data))
                if not more:
                    break
                data += more
            self.bytes_read += len(data)
            return data
        parts: list[bytes] = []
        found = 0
        chunk = 4096
        pos = start
        while found < lines and (limit is None or pos - start <= limit):
            more = os.pread(self.fd, chunk, pos)
            if not more:
                break
            parts.append(more)
            pos += len(more)
            found += more.count(b"\n")
            chunk = min(chunk * 2, 1 << 24)
        data = b"".join(parts)
        self.bytes_read += len(data)
        if found > lines:  # cut after the wanted newline, searching back from the end
            cut = len(data)
            for _ in range(found - lines + 1):
                cut = data.rindex(b"\n", 0, cut)
            data = data[: cut + 1]
        return data

    def header_line(self, limit: int) -> bytes:
        """The first line, read no further than ``limit`` bytes; ValueError if there is no
        whole first line (an empty file, a torn one, or one over the limit)."""
        first = self.read(0, lines=1, limit=limit)
        cut = first.find(b"\n")
        if cut >= 0:
            first = first[:cut]
        if len(first) > limit:
            raise ValueError(f"the header line is over the {limit}-byte line limit")
        if cut < 0 and not (first and is_whole_line(first)):
            raise ValueError(f"{'the file is empty' if not first else 'the header line is incomplete (torn)'}: no session header")
        return first

    def observe(self, start: int, data: bytes, count: int | None = None) -> None:
        """Record what was read: ``data`` runs from byte ``start`` to the end of the file (``count``, its complete
        lines, saves a pass when the caller has split it). A last line without newline counts as complete when it is
        a whole JSON object (a producer that writes no final newline): one is added before the next append.
        Otherwise it is torn and kept aside."""
        cut = data.rfind(b"\n") + 1
        n = data.count(b"\n", 0, cut) if count is None else count
        self.observe_lines(start, len(data), n, data[cut:])

    def observe_lines(self, start: int, size: int, count: int, tail: bytes) -> None:
        """:meth:`observe` from what a split read found: ``size`` bytes from ``start``,
        ``count`` newline-terminated lines, then ``tail`` (bytes after the last newline)."""
        self.count = count if start == 0 else self.count + count
        if tail and is_whole_line(tail):
            self.count += 1
            self.size = start + size
            self.torn = b""
            self.needs_newline = True
        else:
            self.size = start + size - len(tail)
            self.torn = tail
            self.needs_newline = False

    def read_split(self, start: int = 0, chunk: int = 256 << 10) -> tuple[list[bytes], bytes, int]:
        """Every newline-terminated line from ``start`` to the end (newlines cut), the bytes after the last newline,
        and how many bytes were read.

        Reads and splits chunk by chunk, so a large file is never held twice in memory (a whole read then a split
        peaks at twice the file). Chunks are small: large ones, once freed, raise glibc's mmap threshold and later
        ones fragment the heap, which measured +6% peak RSS on a 100k-entry open (docs/performance.md). A line
        longer than a chunk is gathered piece by piece and joined once (never re-copied per chunk).
        """
        lines: list[bytes] = []
        pending: list[bytes] = []  # the pieces of a line whose newline has not come yet
        pos = start
        while True:
            more = os.pread(self.fd, chunk, pos)
            if not more:
                break
            pos += len(more)
            if b"\n" not in more:
                pending.append(more)
                continue
            if pending:
                pending.append(more)
                more = b"".join(pending)
                pending = []
            parts = more.split(b"\n")
            tail = parts.pop()
            lines.extend(parts)
            if tail:
                pending.append(tail)
        self.bytes_read += pos - start
        return lines, b"".join(pending), pos - start

    def sync(self) -> None:
        """Catch up with lines appended since the last look (no JSON parsing)."""
        if self.size is None:
            self.observe(0, self.read(0))
            return
        # The file's size: lseek to the end tells it without building a stat result (a quarter of fstat's cost, on
        # every append). Moving the offset is harmless: reads give their offsets (pread), writes go to the end (O_APPEND).
        end = os.lseek(self.fd, 0, os.SEEK_END)
        known = self.size + len(self.torn)
        if end == known:
            return
        if end < known:
            raise StaleFileError(f"{self.path} shrank from {known} to {end} bytes since it was read")
        start = self.size
        data = self.read(start)
        if self.needs_newline:
            if not data.startswith(b"\n"):
                raise StaleFileError(f"{self.path}: a line was appended without a line break before it")
            data = data[1:]
            start += 1
        self.observe(start, data)


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
