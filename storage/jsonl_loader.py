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

from sessiontree.content.blob_share import SharedContent
from sessiontree.content.blobs import MARKER, inline
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry
from sessiontree.wire.codec import Codec

_AHEAD = 256  # lines read ahead of their decoding, together (``MappedLines.read_many``)


class DuplicateKeyWarning(UserWarning):
    """A pi line repeats a key in one object; its last value is read, as pi's reader does."""


class LineLoader:
    """The lines of one file, decoded into entries when the log asks (line ``k`` of the file,
    1-based, is version ``k``; position ``p`` of the log is line ``p + 2``)."""

    def __init__(self, lines: Any, path: Any, session_id: str, codec: Codec, warned: list[str], blobs: Any = None) -> None:
        self.lines = lines
        self.blobs = blobs  # where out-of-line content is read from (``blobs.py``), each blob once (``blob_share.py``)
        self.shared = SharedContent(blobs) if blobs is not None else None
        self.path = path
        self.session_id = session_id
        self.codec = codec
        self.parent_key = codec.dialect.parent_key
        self.warned = warned
        self.decoded: dict[int, Entry] = {}  # entries decoded before the log asked (leaf markers, migrations)
        self.held = len(lines) - 1  # the entries it can give back (the storage adds the lines it appends)
        self.expected: Sequence[str] | None = None  # the ids an index says the lines hold: checked as each is decoded
        self.expected_heads: Any = None  # what the index says of each (``EntryLog.heads``-like): checked too

    def warn_at(self, version: int, message: str) -> None:
        self.warn(f"{self.path}:{version}: {message}")

    def warn(self, message: str) -> None:
        self.warned.append(message)
        warnings.warn(message, DuplicateKeyWarning, stacklevel=6)

    def load(self, positions: Sequence[int]) -> list[Entry]:
        out = []
        lines, decode, sid, shared = self.lines, self.codec.decode_line, self.session_id, self.shared
        decoded, warns = self.decoded, self.codec.warns
        expected = self.expected if self.expected is not None else ()
        known = len(expected)
        read_many = getattr(lines, "read_many", None)  # a file's lines: neighbours read together
        ahead: dict[int, bytes] = {}
        for i, pos in enumerate(positions):
            if read_many is not None and not i % _AHEAD:  # a bounded batch of bytes held at a time
                ahead = read_many([p + 1 for p in positions[i : i + _AHEAD]])
            entry = decoded.pop(pos, None) if decoded else None
            if entry is None:
                line = ahead.pop(pos + 1, None) or lines[pos + 1]
                version = pos + 2
                try:  # only a dialect that warns of a repeated key gets the warning's callback (made per line)
                    warn = partial(self.warn_at, version) if warns else None
                    if shared is not None and MARKER in line:  # a failure to read its content is named below
                        entry = decode(inline(line, self.blobs, read=shared.reader(lambda: "")), sid, version, warn)
                        shared.share(entry)
                    else:
                        entry = decode(line, sid, version, warn)
                except SessionError as exc:
                    raise SessionError(exc.code, f"session {sid}: {exc.message}", path=str(self.path), line=version) from None
                lines[pos + 1] = None
                if pos < known and entry.id != expected[pos]:
                    raise self.moved(version, entry.id)
                if pos < known and self.expected_heads is not None:
                    self._check_head(pos, entry)
            out.append(entry)
        return out

    def _check_head(self, pos: int, entry: Entry) -> None:
        """The index is a cache, never a source: an entry whose type or parent is not what the index said (a forged
        or damaged index, re-sealed) is ``corrupt``, and the index is dropped."""
        kind, parent = self.expected_heads(pos)
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
