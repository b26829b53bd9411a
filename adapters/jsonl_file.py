"""One append-only JSONL file: leased, whole-line appends and prefix reads.

:class:`LineFile` is the single place that touches a log file's bytes. It knows how many
complete lines the file holds (as far as this process has looked), appends whole lines
with one ``os.write``, repairs a torn last line before it appends, and reads the file or
only a prefix of it. Readers never lock.

A writer holds a *lease*: the file's exclusive ``flock``, taken at its first append and
kept until it closes (the OS drops it when the process dies). While it holds the lease no
other writer appends, so an append only checks that the file still ends where this writer
left it; a second writer is refused at once, naming the holder's pid, or waits up to its
``wait`` seconds.

A *torn* line is a last line without its newline: what a crash in the middle of an append
leaves. Every proper prefix of a JSON object line is invalid JSON, so a torn line can
never be mistaken for a complete one; it is ignored on read and cut off, with a warning,
when the next writer takes the lease.
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

from sessiontree.adapters.files import is_whole_line, lock_holder, make_private_dirs, open_regular

DURABILITIES = ("flush", "fsync")
_CHUNK = 1 << 16


class _Forks:
    """How many forks separate this process from the one that loaded the module: a lease
    taken in an earlier generation belongs to a parent (its descriptor's lock is shared)."""

    generation = 0


def _forked() -> None:
    _Forks.generation += 1


os.register_at_fork(after_in_child=_forked)


class TornLineWarning(UserWarning):
    """A log file ends with a line cut short by a crash; it is ignored and later removed."""


class StaleFileError(Exception):
    """The file changed under this writer in a way appends cannot continue from."""


class WriterBusyError(StaleFileError):
    """Another writer holds the file's lease; ``pid`` is its process where the OS tells it."""

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


class LineFile:
    """An open JSONL log file and what this process knows of it.

    ``size``: bytes up to the end of the last complete line seen; ``count``: complete
    lines seen; ``torn``: the bytes of an unterminated last line seen after them (empty if
    none). ``size`` is None until the file is scanned (:meth:`sync`). ``wait``: how long
    an append waits for another writer's lease before it gives up.
    """

    def __init__(
        self, path: Path, fd: int, *, durability: str = "flush", writable: bool = True, wait: float = 0.0,
    ) -> None:
        if durability not in DURABILITIES:
            raise ValueError(f"durability must be one of {DURABILITIES}, not {durability!r}")
        self.path = path
        self.fd = fd
        self._durability = durability
        self._fsync = durability == "fsync"
        self.writable = writable
        self.wait = wait
        self.size: int | None = None
        self.count = 0
        self.torn = b""
        self.needs_newline = False
        self.bytes_read = 0
        self.warnings: list[str] = []
        self._mutex = threading.Lock()
        self._lease_pid = 0  # the process that took the lease through this descriptor (0: none)
        self._lease_generation = -1

    @property
    def durability(self) -> str:
        """``flush`` (each append is written) or ``fsync`` (and synced to the disk)."""
        return self._durability

    # -- opening ------------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path, *, durability: str = "flush", wait: float = 0.0) -> LineFile:
        """Create a new, empty file (mode 0600, parent folders 0700); FileExistsError if any."""
        make_private_dirs(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND | os.O_CLOEXEC, 0o600)
        out = cls(path, fd, durability=durability, wait=wait)
        out.size = 0
        return out

    @classmethod
    def open(
        cls, path: Path, *, durability: str = "flush", read_only: bool = False, follow: bool = True, wait: float = 0.0,
    ) -> LineFile:
        """Open an existing file (FileNotFoundError if none); read-only if it is not writable.
        ``follow=False`` refuses a symlink (a repository's files are its own)."""
        if not read_only:
            try:
                fd = open_regular(path, os.O_RDWR | os.O_APPEND, follow=follow)
                return cls(path, fd, durability=durability, wait=wait)
            except PermissionError:
                pass
        return cls(path, open_regular(path, follow=follow), durability=durability, writable=False)

    def close(self) -> None:
        """Close the file, which ends the lease if this writer held it."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self._lease_pid, self._lease_generation = 0, -1

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass

    # -- reading ------------------------------------------------------------------------

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

    def observe(self, start: int, data: bytes, count: int | None = None) -> None:
        """Record what was read: ``data`` runs from byte ``start`` to the end of the file.

        ``count`` (complete lines in ``data``) saves a pass when the caller has split it.
        A last line without newline counts as complete when it is a whole JSON object (a
        file from a producer that writes no final newline); one is added before the next
        append. Otherwise it is torn and kept aside.
        """
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
        """Every newline-terminated line from ``start`` to the end (newlines cut), the bytes
        after the last newline, and how many bytes were read.

        Reads and splits chunk by chunk, so a large file is never held twice in memory
        (a whole read then a split peaks at twice the file). Chunks are small: large ones,
        once freed, raise glibc's mmap threshold and later ones fragment the heap, which
        measured +6% peak RSS on a 100k-entry open (docs/performance.md). A line longer than
        a chunk is gathered piece by piece and joined once (never re-copied per chunk).
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
        # The file's size: lseek to the end tells it without building a stat result (a
        # quarter of fstat's cost, on every append). Moving the offset is harmless: reads
        # give their offsets (pread) and writes go to the end (O_APPEND).
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

    # -- appending ----------------------------------------------------------------------

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

    def repair(self) -> None:
        """Cut off a torn last line (call with the lock held, after :meth:`sync`)."""
        if not self.torn:
            return
        assert self.size is not None
        tail = os.pread(self.fd, len(self.torn) + 1, self.size)
        if tail != self.torn:
            raise StaleFileError(f"the end of {self.path} changed since it was read")
        os.ftruncate(self.fd, self.size)
        message = (
            f"{self.path}: removed a torn last line (line {self.count + 1}, {len(self.torn)} bytes, "
            "left by an interrupted append) before appending"
        )
        self.warnings.append(message)
        warnings.warn(message, TornLineWarning, stacklevel=4)
        self.torn = b""

    def append_at(self, version: int, lines: Sequence[bytes]) -> None:
        """Append ``lines`` (each without newline) as line ``version`` and the ones after it.

        The first append takes the lease, catches up with the file and cuts a torn last line;
        later ones only check that the file still ends where this writer left it (a writer
        that ignores the lock is caught up with). ``StaleFileError`` if ``version`` is not
        the next line; an ``OSError`` of the write leaves the file as it was.
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
            self.append(lines)

    def append(self, lines: Sequence[bytes]) -> None:
        """Write ``lines`` (each without newline) with one ``os.write``; lock held, state synced.

        On any failure the file is cut back to where it was, so it stays valid, and the
        OSError propagates.
        """
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
