"""A log file's lines read in place with ``pread``, never held as a whole.

:class:`MappedLines` is a sequence of a file's lines that reads each line from the file (a :class:`FileView`) when it
is asked for, so a reader holds only the lines it is using. The view has a descriptor of its own (:func:`map_file`).
It reads with ``pread`` rather than through a memory mapping: a file cut short under a mapping stops the process
(``SIGBUS``, which a library cannot catch without a process-wide signal handler), while a short read is an error
(``SessionError('corrupt')``), and a line costs about the same either way (~0.5 µs for a 470-byte line).
"""

from __future__ import annotations

import os
import weakref
from array import array
from collections.abc import Iterator, Sequence
from typing import Any

from sessiontree.domain.errors import SessionError
from sessiontree.storage.jsonl_scan import LineLoader

WINDOW = 1 << 20  # bytes of lines split at once


class FileView:
    """The first ``length`` bytes of a file, read with ``pread`` when sliced (``view[a:b]`` is bytes). A file cut
    short meanwhile is ``SessionError('corrupt')`` naming it."""

    __slots__ = ("__weakref__", "_close", "_fd", "length", "path")

    def __init__(self, fd: int, path: Any, length: int) -> None:
        self._fd, self.path, self.length = fd, path, length
        self._close = weakref.finalize(self, os.close, fd)  # the descriptor lives as long as the lines read from it

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, key: slice) -> bytes:
        start, stop, _ = key.indices(self.length)
        want = max(0, stop - start)
        data = os.pread(self._fd, want, start)
        while 0 < len(data) < want:  # a read may stop short of a large request; the end of the file stops it dead
            more = os.pread(self._fd, want - len(data), start + len(data))
            if not more:
                break
            data += more
        if len(data) != want:
            raise SessionError("corrupt", f"the file was cut short while it was read: it no longer has the bytes "
                               f"{start}..{stop} it had when it was opened; open it again", path=str(self.path))
        return data

    def close(self) -> None:
        self._close()


def whole_lines_end(fd: int, size: int, chunk: int = 1 << 16) -> int:
    """Where the last newline-terminated line in the first ``size`` bytes of ``fd`` ends (0: there is none), found
    with plain reads from the end. A view stops there: a writer repairing a torn tail cuts the file back to that
    point."""
    end = size
    while end > 0:
        start = max(0, end - chunk)
        data = os.pread(fd, end - start, start)
        cut = data.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        if len(data) < end - start:  # cut short meanwhile: look again below what is there now
            end = start + len(data)
            continue
        end = start
    return 0


def map_file(fd: int, path: Any, length: int) -> FileView | None:
    """The first ``length`` bytes of the file open at ``fd`` (whole lines only: :func:`whole_lines_end`), as a view
    through a descriptor of its own: one that shared ``fd``'s open file would keep that open file (and any ``flock``
    taken through it) alive after the storage closed. None if the file cannot be opened again."""
    try:
        own = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        try:
            own = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return None
    try:
        if os.path.samestat(os.fstat(own), os.fstat(fd)):
            return FileView(own, path, length)
    except OSError:
        pass
    os.close(own)
    return None


def windows(view: FileView, size: int) -> Iterator[tuple[int, list[bytes]]]:
    """The newline-terminated lines of ``view[:size]`` in batches ``(offset of the batch, lines without their
    newlines)``, read a window at a time; a line longer than a window comes alone. The bytes after the last newline
    are not given (the caller finds them after the last batch)."""
    pos = 0
    while pos < size:
        chunk = view[pos : min(pos + WINDOW, size)]
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            yield pos, chunk[:cut].split(b"\n")
            pos += cut + 1
            continue
        end = _newline_after(view, pos + len(chunk), size)  # a line longer than the window: taken whole
        if end < 0:
            break
        yield pos, [view[pos:end]]
        pos = end + 1


def _newline_after(view: FileView, start: int, size: int) -> int:
    while start < size:
        chunk = view[start : min(start + WINDOW, size)]
        cut = chunk.find(b"\n")
        if cut >= 0:
            return start + cut
        start += len(chunk)
    return -1


def line_lengths(view: FileView, size: int) -> tuple[array[int], int]:
    """The length of every newline-terminated line of ``view[:size]``, and where the last one ends."""
    lengths = array("q")
    end = 0
    for offset, batch in windows(view, size):
        lengths.extend(map(len, batch))
        end = offset + sum(map(len, batch)) + len(batch)
    return lengths, end


class MappedLines:
    """A file's lines as a sequence: those at ``offsets`` read from the file's view (or sliced from bytes in memory:
    an expanded archive) when asked (nothing held), then the lines read or appended since, held. The loader's "drop
    this line" is a no-op for a line in the file."""

    __slots__ = ("_count", "_held", "_map", "offsets")

    def __init__(self, mapped: FileView | bytes, offsets: Sequence[int], held: list[Any]) -> None:
        self._map, self.offsets, self._count, self._held = mapped, offsets, len(offsets) - 1, held

    def __len__(self) -> int:
        return self._count + len(self._held)

    def __getitem__(self, number: int) -> Any:
        if number < 0:
            number += len(self)
        if number < self._count:
            offsets = self.offsets
            return self._map[offsets[number] : offsets[number + 1] - 1]
        return self._held[number - self._count]

    def read_many(self, numbers: Sequence[int]) -> dict[int, bytes]:
        """Lines ``numbers`` of the file, those near each other read with one ``pread`` (runs of up to a window, with
        gaps under 64 KiB read through): a pass over many lines makes a read per window, not per line."""
        offsets, count = self.offsets, self._count
        wanted = sorted({n for n in numbers if 0 <= n < count})
        out: dict[int, bytes] = {}
        i = 0
        while i < len(wanted):
            j = i  # the run wanted[i:j+1]
            while (j + 1 < len(wanted) and offsets[wanted[j + 1] + 1] - offsets[wanted[i]] <= WINDOW
                   and offsets[wanted[j + 1]] - offsets[wanted[j] + 1] < 1 << 16):
                j += 1
            base = offsets[wanted[i]]
            data = self._map[base : offsets[wanted[j] + 1]]
            for n in wanted[i : j + 1]:
                out[n] = data[offsets[n] - base : offsets[n + 1] - base - 1]
            i = j + 1
        return out

    def __setitem__(self, number: int, value: Any) -> None:
        if number >= self._count:
            self._held[number - self._count] = value

    def extend(self, lines: Sequence[bytes]) -> None:
        self._held.extend(lines)

    @property
    def count_mapped(self) -> int:
        """How many lines, from the first, are read from the file (the rest are held in memory)."""
        return self._count

    def mapped(self, number: int) -> bool:
        """Is line ``number`` (0-based) read from the file (so it can be read again)?"""
        return 0 <= number < self._count


class RereadingLoader(LineLoader):
    """The loader of a mapped file: it can decode an entry again when its line is in the mapping (not one it decoded
    before the log asked, such as a leaf marker), which lets a pass over the log keep nothing (``EntryLog.passing``)."""

    def reloadable(self, position: int) -> bool:
        lines = self.lines
        return isinstance(lines, MappedLines) and lines.mapped(position + 1) and position not in self.decoded
