"""One append-only JSONL file: locked, whole-line appends and prefix reads.

:class:`LineFile` is the single place that touches a log file's bytes. It knows how many
complete lines the file holds (as far as this process has looked), appends whole lines
with one ``os.write`` under an exclusive ``flock``, repairs a torn last line before it
appends, and reads the file or only a prefix of it. Readers never lock.

A *torn* line is a last line without its newline: what a crash in the middle of an append
leaves. Every proper prefix of a JSON object line is invalid JSON, so a torn line can
never be mistaken for a complete one; it is ignored on read and cut off, with a warning,
by the next append (which holds the lock, so no append is in flight at that moment).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import orjson

DURABILITIES = ("flush", "fsync")
_CHUNK = 1 << 16


class NotRegularFileError(OSError):
    """The path names a FIFO, a device, a socket or a directory: no session log is read from
    it (a FIFO would block, a device read without end)."""


def open_regular(path: str | os.PathLike[str], flags: int = os.O_RDONLY, *, follow: bool = True) -> int:
    """A descriptor on the regular file at ``path``, or ``NotRegularFileError``.

    Opened without blocking (a FIFO with no writer would hang the open) and checked with
    ``fstat`` before a byte is read; ``follow=False`` refuses a symlink (``O_NOFOLLOW``).
    """
    flags |= os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
            raise NotRegularFileError(errno.EINVAL, f"not a regular file ({kind})", os.fspath(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_lines(fd: int, start: int, limit: int, chunk: int = 1 << 20) -> Iterator[tuple[bytes | None, int]]:
    """Each newline-terminated line from byte ``start`` on, with the offset just after it;
    a line longer than ``limit`` comes as None and is never held whole (memory stays within
    ``chunk`` plus ``limit``). Bytes after the last newline (a torn line) are not given."""
    pending: list[bytes] = []
    held = 0  # bytes of the current line so far (None once it is over the limit)
    over = False
    pos = start
    while True:
        data = os.pread(fd, chunk, pos)
        if not data:
            return
        begin = 0
        while True:
            cut = data.find(b"\n", begin)
            if cut < 0:
                if not over:
                    piece = data[begin:]
                    held += len(piece)
                    if held > limit:
                        over, pending = True, []
                    else:
                        pending.append(piece)
                break
            line_end = pos + cut + 1
            if over or held + cut - begin > limit:
                yield None, line_end
            else:
                pending.append(data[begin:cut])
                yield b"".join(pending), line_end
            pending, held, over = [], 0, False
            begin = cut + 1
        pos += len(data)


class TornLineWarning(UserWarning):
    """A log file ends with a line cut short by a crash; it is ignored and later removed."""


class StaleFileError(Exception):
    """The file changed under this writer in a way appends cannot continue from."""


class LineFile:
    """An open JSONL log file and what this process knows of it.

    ``size``: bytes up to the end of the last complete line seen; ``count``: complete
    lines seen; ``torn``: the bytes of an unterminated last line seen after them (empty if
    none). ``size`` is None until the file is scanned (:meth:`sync`).
    """

    def __init__(self, path: Path, fd: int, *, durability: str = "flush", writable: bool = True) -> None:
        if durability not in DURABILITIES:
            raise ValueError(f"durability must be one of {DURABILITIES}, not {durability!r}")
        self.path = path
        self.fd = fd
        self._durability = durability
        self._fsync = durability == "fsync"
        st = os.fstat(fd)
        self._ident = (st.st_dev, st.st_ino)  # which file fd is (see try_append)
        self.writable = writable
        self.size: int | None = None
        self.count = 0
        self.torn = b""
        self.needs_newline = False
        self.bytes_read = 0
        self.warnings: list[str] = []
        self._mutex = threading.Lock()

    @property
    def durability(self) -> str:
        """``flush`` (each append is written) or ``fsync`` (and synced to the disk)."""
        return self._durability

    # -- opening ------------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path, *, durability: str = "flush") -> LineFile:
        """Create a new, empty file (mode 0600, parent folders 0700); FileExistsError if any."""
        make_private_dirs(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND | os.O_CLOEXEC, 0o600)
        out = cls(path, fd, durability=durability)
        out.size = 0
        return out

    @classmethod
    def open(cls, path: Path, *, durability: str = "flush", read_only: bool = False, follow: bool = True) -> LineFile:
        """Open an existing file (FileNotFoundError if none); read-only if it is not writable.
        ``follow=False`` refuses a symlink (a repository's files are its own)."""
        if not read_only:
            try:
                return cls(path, open_regular(path, os.O_RDWR | os.O_APPEND, follow=follow), durability=durability)
            except PermissionError:
                pass
        return cls(path, open_regular(path, follow=follow), durability=durability, writable=False)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

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

    def lock(self, timeout: float = 30.0) -> None:
        """Take the exclusive OS lock (and this object's thread lock), waiting up to ``timeout``."""
        # acquire(timeout=...) costs ~0.3 µs more than a try that does not wait
        if not (self._mutex.acquire(False) or self._mutex.acquire(timeout=timeout)):
            raise TimeoutError(f"timed out waiting for the write lock on {self.path}")
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        except BaseException:
            self._mutex.release()
            raise
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self._mutex.release()
                    raise TimeoutError(f"timed out waiting for the write lock on {self.path}") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.02)
            except BaseException:
                self._mutex.release()
                raise

    def unlock(self) -> None:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            self._mutex.release()

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

    def append_at(self, version: int, lines: Sequence[bytes], timeout: float = 30.0) -> None:
        """Append ``lines`` (each without newline) as line ``version`` and the ones after it,
        under the exclusive lock: catch up with what other writers appended, cut a torn last
        line, check that ``version`` is the next line (``StaleFileError`` if not), write.
        ``TimeoutError`` if the lock is not free within ``timeout``; an ``OSError`` of the
        write leaves the file as it was."""
        self.lock(timeout)
        try:
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
        finally:
            self.unlock()

    def append(self, lines: Sequence[bytes]) -> None:
        """Write ``lines`` (each without newline) with one ``os.write``; lock held, state synced.

        On any failure the file is cut back to where it was, so it stays valid, and the
        OSError propagates.
        """
        assert self.size is not None and not self.torn
        data = b"\n".join(lines) + b"\n"
        if self.needs_newline:
            data = b"\n" + data
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


def make_private_dirs(folder: Path) -> None:
    """Create ``folder`` and every missing parent with mode 0700, whatever the umask."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for item in reversed(missing):
        try:
            item.mkdir(mode=0o700)
        except FileExistsError:
            continue  # made meanwhile by someone else: theirs to set
        os.chmod(item, 0o700)  # the umask may have taken bits away


def is_whole_line(tail: bytes) -> bool:
    """Is an unterminated last line a whole JSON object (rather than a torn one)?"""
    if not (tail.startswith(b"{") and tail.rstrip().endswith(b"}")):
        return False
    try:
        return isinstance(orjson.loads(tail), dict)
    except orjson.JSONDecodeError:
        return False
