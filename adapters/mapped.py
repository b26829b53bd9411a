"""A log file's lines read through a read-only mapping of the file, never held as a whole.

:class:`MappedLines` is a sequence of a file's lines that slices each line from the mapping when it is asked for, so
a reader holds only the lines it is using. The mapping has a descriptor of its own (:func:`map_file`). Pages of the
mapping that were read count in the process's resident memory until they are handed back: a forward pass over the
whole file (:class:`MappedLines` read forward, :func:`line_lengths`) hands them back as it goes, so its memory stays bounded
whatever the file's size.
"""

from __future__ import annotations

import mmap
import os
from array import array
from collections.abc import Iterator, Sequence
from typing import Any

from sessiontree.adapters.jsonl_loader import LineLoader

WINDOW = 1 << 20  # bytes of lines split at once
RELEASE = 8 << 20  # bytes read between two hand-backs of the mapping's pages


def map_file(fd: int, path: Any, length: int) -> mmap.mmap | None:
    """The first ``length`` bytes of the file open at ``fd``, mapped read-only through a descriptor of its own: the
    mapping keeps its descriptor open, and one that shared ``fd``'s open file would keep that open file (and any
    ``flock`` taken through it) alive after the storage closed. None if the file cannot be opened again."""
    try:
        own = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        try:
            own = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return None
    try:
        if os.path.samestat(os.fstat(own), os.fstat(fd)):
            return mmap.mmap(own, length, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        pass
    finally:
        os.close(own)
    return None


def release(mapped: mmap.mmap, start: int, end: int) -> int:
    """Hand back the pages of ``mapped`` from ``start`` to ``end`` (whole pages; the file is not touched); returns
    where it got to."""
    page = mmap.PAGESIZE
    first, last = start - start % page, end - end % page
    if last > first and hasattr(mapped, "madvise"):
        mapped.madvise(mmap.MADV_DONTNEED, first, last - first)
    return max(last, start)


def windows(mapped: mmap.mmap, size: int) -> Iterator[tuple[int, list[bytes]]]:
    """The newline-terminated lines of ``mapped[:size]`` in batches ``(offset of the batch, lines without their
    newlines)``, pages handed back as it goes; a line longer than a window comes alone. The bytes after the last
    newline are not given (the caller finds them after the last batch)."""
    pos = released = 0
    while pos < size:
        end = mapped.rfind(b"\n", pos, min(pos + WINDOW, size))
        if end < 0:  # a line longer than the window: taken whole
            end = mapped.find(b"\n", pos, size)
            if end < 0:
                break
        yield pos, (mapped[pos:end].split(b"\n") if end - pos < WINDOW else [mapped[pos:end]])
        pos = end + 1
        if pos - released >= RELEASE:
            released = release(mapped, released, pos)
    release(mapped, released, pos)


def line_lengths(mapped: mmap.mmap, size: int) -> tuple[array[int], int]:
    """The length of every newline-terminated line of ``mapped[:size]``, and where the last one ends."""
    lengths = array("q")
    end = 0
    for offset, batch in windows(mapped, size):
        lengths.extend(map(len, batch))
        end = offset + sum(map(len, batch)) + len(batch)
    return lengths, end


class MappedLines:
    """A file's lines as a sequence: those at ``offsets`` sliced from the mapped file when asked (nothing held),
    then the lines read or appended since, held. The loader's "drop this line" is a no-op for a mapped one. Reading
    forward hands back the pages behind every so often, so a pass over the whole file (an export, a replay) stays
    bounded; any order stays correct."""

    __slots__ = ("_count", "_held", "_map", "_released", "offsets")

    def __init__(self, mapped: mmap.mmap, offsets: Sequence[int], held: list[Any]) -> None:
        self._map, self.offsets, self._count, self._held = mapped, offsets, len(offsets) - 1, held
        self._released = 0

    def __len__(self) -> int:
        return self._count + len(self._held)

    def __getitem__(self, number: int) -> Any:
        if number < 0:
            number += len(self)
        if number < self._count:
            offsets = self.offsets
            offset = offsets[number]
            if offset < self._released:  # a new pass from an earlier line
                self._released = offset - offset % mmap.PAGESIZE
            elif offset - self._released >= RELEASE:
                self._released = release(self._map, self._released, offset)
            return self._map[offset : offsets[number + 1] - 1]
        return self._held[number - self._count]

    def __setitem__(self, number: int, value: Any) -> None:
        if number >= self._count:
            self._held[number - self._count] = value

    def extend(self, lines: Sequence[bytes]) -> None:
        self._held.extend(lines)

    def mapped(self, number: int) -> bool:
        """Is line ``number`` (0-based) read from the mapping (so it can be read again)?"""
        return 0 <= number < self._count



class RereadingLoader(LineLoader):
    """The loader of a mapped file: it can decode an entry again when its line is in the mapping (not one it decoded
    before the log asked, such as a leaf marker), which lets a pass over the log keep nothing (``EntryLog.passing``)."""

    def reloadable(self, position: int) -> bool:
        lines = self.lines
        return isinstance(lines, MappedLines) and lines.mapped(position + 1) and position not in self.decoded
