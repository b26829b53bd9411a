"""Decoding a file's entries on demand.

:class:`LineLoader` is the log's loader port for a JSONL storage: it holds the file's lines
and decodes those asked for, in batches, dropping each decoded line's bytes. It leaves the
process's collector and allocator alone (docs/architecture.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from functools import partial
from typing import Any

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry
from sessiontree.storage.pipeline import LinePipeline

_AHEAD = 256  # lines read ahead of their decoding, together (``MappedLines.read_many``)


class DuplicateKeyWarning(UserWarning):
    """A pi line repeats a key in one object; its last value is read, as pi's reader does."""


class LineLoader:
    """The lines of one file, decoded into entries when the log asks (line ``k`` of the file,
    1-based, is version ``k``; position ``p`` of the log is line ``p + 2``)."""

    def __init__(self, lines: Any, path: Any, session_id: str, pipeline: LinePipeline, warned: list[str]) -> None:
        self.lines = lines
        self.pipeline = pipeline  # each line's way out: content kept out of line read back, then decoded
        self.path = path
        self.session_id = session_id
        self.codec = codec = pipeline.codec
        self.parent_key = codec.dialect.parent_key
        self.warned = warned
        self.decoded: dict[int, Entry] = {}  # entries decoded before the log asked (leaf markers, migrations)
        self.held = len(lines) - 1  # the entries it can give back (the storage adds the lines it appends)
        self.expected: Sequence[str] | None = None  # the ids an index says the lines hold: checked as each is decoded
        # what the index says of each line's type and parent (positions; orphans: parents kept by id): checked too
        self.expected_heads: tuple[Sequence[str], Sequence[int], dict[int, str]] | None = None

    def warn_at(self, version: int, message: str) -> None:
        self.warn(f"{self.path}:{version}: {message}")

    def warn(self, message: str) -> None:
        self.warned.append(message)
        warnings.warn(message, DuplicateKeyWarning, stacklevel=6)

    def load(self, positions: Sequence[int]) -> list[Entry]:
        out = []
        lines, sid = self.lines, self.session_id
        decode, inlined = self.codec.decode_line, self.pipeline.decode  # inline -> decode only where a line refers out
        marker = self.pipeline.marker
        decoded, warns = self.decoded, self.codec.warns
        expected = self.expected if self.expected is not None else ()
        known = len(expected)
        types, parents, orphans = self.expected_heads or ((), (), {})
        read_many = getattr(lines, "read_many", None)  # a file's lines: neighbours read together
        # a line is dropped once decoded (a mapped one is read again from the file when asked: nothing to drop)
        kept_from = lines.count_mapped if read_many is not None else 0
        ahead: dict[int, bytes] = {}
        for i, pos in enumerate(positions):
            if read_many is not None and not i % _AHEAD:  # a bounded batch of bytes held at a time
                ahead = read_many([p + 1 for p in positions[i : i + _AHEAD]])
            entry = decoded.pop(pos, None) if decoded else None
            if entry is None:
                line = ahead.pop(pos + 1, None) or lines[pos + 1]
                version = pos + 2
                try:  # only a dialect that warns of a repeated key gets the warning's callback (made per line)
                    entry = (inlined if marker is not None and marker in line else decode)(
                        line, sid, version, partial(self.warn_at, version) if warns else None)
                except SessionError as exc:  # (a failure to read content kept out of line too)
                    raise SessionError(exc.code, f"session {sid}: {exc.message}", path=str(self.path), line=version) from None
                if pos + 1 >= kept_from:
                    lines[pos + 1] = None
                if pos < known:  # the index is a cache, never a source: what it said is checked against the line
                    if entry.id != expected[pos]:
                        raise self.moved(version, entry.id)
                    if types:
                        parent = parents[pos]
                        if entry.type != types[pos] or entry.parent_id != (expected[parent] if parent >= 0 else
                                                                           orphans.get(pos)):
                            self._check_head(pos, entry)
            out.append(entry)
        return out

    def _check_head(self, pos: int, entry: Entry) -> None:
        """The index is a cache, never a source: an entry whose type or parent is not what the index said (a forged
        or damaged index, re-sealed) is ``corrupt``, and the index is dropped."""
        assert self.expected is not None and self.expected_heads is not None
        types, parents, orphans = self.expected_heads
        kind, parent = types[pos], self.expected[parents[pos]] if parents[pos] >= 0 else orphans.get(pos)
        if entry.type != kind or entry.parent_id != parent:
            from sessiontree.storage.jsonl_index import remove

            remove(self.path)
            said, found = (f"type {kind!r}", f"type {entry.type!r}") if entry.type != kind else (
                f"parent {parent!r}", f"parent {entry.parent_id!r}")
            raise SessionError("corrupt", f"session {self.session_id}: line {pos + 2} holds entry {entry.id!r} of {found}, "
                               f"but the sidecar index said {said}: the index does not match the file (damaged or "
                               "forged); it was removed: open the session again", path=str(self.path), line=pos + 2)

    def moved(self, version: int, found: str) -> SessionError:
        """The file no longer says what its index did (rewritten in place since): the index is dropped."""
        from sessiontree.storage.jsonl_index import remove

        remove(self.path)
        wanted = self.expected[version - 2] if self.expected is not None else None
        return SessionError("corrupt", f"session {self.session_id}: line {version} now holds entry {found!r}, not "
                            f"{wanted!r}: the file was changed in place since it was opened; open it again",
                            path=str(self.path), line=version)
