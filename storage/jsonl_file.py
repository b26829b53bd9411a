"""One JSONL log file as this process knows it: its complete lines, a torn tail, reads.

:class:`LineFile` is the one place that reads a log file's bytes (whole, a prefix, or split into lines without
holding the file twice) and catches up with lines appended since; readers never lock (``jsonl_append.py`` adds the
writer). A *torn* line, a last line without its newline, is what a crash mid-append leaves; no proper prefix of a
JSON object is valid JSON, so it is never mistaken for a line: it is ignored, and cut off by the next writer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Self

from sessiontree.storage.files import is_whole_line, make_private_dirs, open_regular

DURABILITIES = ("flush", "fsync")
_CHUNK = 1 << 16


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
