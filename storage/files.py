"""Opening, reading and creating the library's files safely.

Nothing here knows the log format: a regular file is opened without blocking (a FIFO or a
device is refused before a byte is read), long lines are read within a bound, folders are
made private, and the process holding a file's write lock is named.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, overload

from sessiontree.wire.jsontext import DECODE_ERRORS, loads

GZIP_MAGIC = b"\x1f\x8b"  # how a pruned session's archive starts (retention/archive.py)


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
        return isinstance(loads(tail), dict)
    except DECODE_ERRORS:
        return False


def lock_holder(fd: int) -> int | None:
    """The pid of the process holding an ``flock`` on the file of ``fd``, where the system
    tells it (Linux's /proc/locks); None if it does not."""
    st = os.fstat(fd)
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            for row in fh:
                fields = row.split()
                # "1: FLOCK ADVISORY WRITE 1234 fe:00:5678 0 EOF" (blocked waiters are marked "->")
                if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == device:
                    return int(fields[4])
    except (OSError, ValueError):
        return None
    return None


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (its directory entry synced); a no-op where directories cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@overload
def write_atomic(path: str | os.PathLike[str], data: bytes, *, temp: str | os.PathLike[str] | None = ...,
                 dir_fd: int | None = ..., mode: int = ..., fsync: bool = ..., overwrite: bool = ...,
                 keep_open: Literal[False] = ...) -> None: ...
@overload
def write_atomic(path: str | os.PathLike[str], data: bytes, *, temp: str | os.PathLike[str] | None = ...,
                 dir_fd: int | None = ..., mode: int = ..., fsync: bool = ..., overwrite: bool = ...,
                 keep_open: Literal[True]) -> int: ...
def write_atomic(path: str | os.PathLike[str], data: bytes, *, temp: str | os.PathLike[str] | None = None,
                 dir_fd: int | None = None, mode: int = 0o600, fsync: bool = False, overwrite: bool = True,
                 keep_open: bool = False) -> int | None:
    """Put ``data`` at ``path`` whole or not at all: written to a new file at ``temp`` (default
    ``<path>.<pid>.<random>.tmp``; ``O_EXCL|O_NOFOLLOW``, so a file or link planted there is refused), then renamed over
    ``path`` (``overwrite``) or linked to it (never over an existing file: ``FileExistsError``). ``fsync`` syncs the
    file before it gets its name and the folder after; ``keep_open`` returns the new file's descriptor (read-write,
    append, locked ``LOCK_EX`` before the rename) instead of closing it. Paths are relative to ``dir_fd`` if given.
    The temporary file never outlives the call."""
    if temp is None:
        temp = f"{os.fspath(path)}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    access = os.O_RDWR | os.O_APPEND if keep_open else os.O_WRONLY
    # descriptors passed only if given: the calls are those the writers made before (tests hook them by their shape)
    at = {} if dir_fd is None else {"dir_fd": dir_fd}
    fd = os.open(temp, access | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, **at)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                if written <= 0:
                    raise OSError(errno.EIO, "short write")
                view = view[written:]
            if fsync:
                os.fsync(fd)
            if keep_open:  # no append slips in between the rename and the caller taking the file
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                os.close(fd)
                fd = -1
            move = os.replace if overwrite else os.link
            if dir_fd is None:
                move(temp, path)
            else:
                move(temp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        finally:
            if not overwrite:  # linked or not, the temporary name goes
                _unlink(temp, dir_fd)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        if overwrite:
            _unlink(temp, dir_fd)
        raise
    if fsync:
        if dir_fd is None:
            fsync_dir(Path(path).parent)
        else:
            os.fsync(dir_fd)
    return fd if keep_open else None


def _unlink(name: str | os.PathLike[str], dir_fd: int | None) -> None:
    try:
        os.unlink(name, **({} if dir_fd is None else {"dir_fd": dir_fd}))
    except OSError:
        pass


def is_archive(path: str | os.PathLike[str]) -> bool:
    """Does ``path`` name a regular file that starts as a gzip stream does (an archive, whatever its name)?"""
    try:
        fd = open_regular(path)
    except OSError:
        return False
    try:
        return os.pread(fd, 2, 0) == GZIP_MAGIC
    finally:
        os.close(fd)
