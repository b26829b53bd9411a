"""A pi session file as a session storage: read without rewriting, appended in pi's dialect.

:class:`PiSessionStorage` is a JSONL storage whose lines are pi's (``JsonlSessionStorage.open`` returns one for a
pi header). It migrates versions 1 and 2 in memory, reads a leaf marker as a ``leaf`` entry unless pi appended
under it, refuses to write a version 1 file or a compaction with a retained tail (pi would not read either as we
do), and applies pi 1.x's context rules (docs/pi.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import ContextCompacted, Entry, SessionStarted
from sessiontree.domain.log import EntryLog
from sessiontree.pi.pi import CURRENT, PiCodec, migrate, pi_codec
from sessiontree.projections.context import SessionContextBuildOptions
from sessiontree.projections.pi_context import pi_entry_transform
from sessiontree.storage.jsonl import JsonlSessionStorage
from sessiontree.storage.jsonl_scan import (
    Envelopes,
    LineLoader,
    bulk_envelopes,
    corrupt,
    envelope_problem,
    line_by_line,
    tree_problem,
)
from sessiontree.wire.jsontext import parse
from sessiontree.wire.pi_names import PARENT_KEY


def pi_context_options(codec: PiCodec | None = None) -> SessionContextBuildOptions:
    """Context options that give pi 1.x's meaning to ``context_edit`` entries and system
    messages (pi sessions get them automatically; pass them for a session imported from pi)."""
    codec = codec or pi_codec()
    return SessionContextBuildOptions(entry_transforms=(pi_entry_transform(codec.content_from_dict, codec.message_from_dict),))


class PiSessionStorage(JsonlSessionStorage):
    """One pi session file (see the module docstring)."""

    codec: PiCodec  # __init__ refuses any other

    def __init__(self, path: Path, file: Any, header: SessionStarted, *, codec: Any, read_only: bool = False) -> None:
        if not isinstance(codec, PiCodec):
            raise SessionError("corrupt", "not a pi session file (its header is in the native dialect)", path=str(path), line=1)
        # a version 1 file is read-only: pi gives its entries new ids when it next opens it (check_writable says so)
        super().__init__(path, file, header, codec=codec, read_only=read_only or header.version < 2)
        self.source_version: int = header.version
        self.context_options = pi_context_options(codec)
        self.pipeline.refuse = self.check_events  # before the encode: what pi's files cannot carry

    @classmethod
    def default_codec(cls) -> Any:
        """``create`` writes pi's dialect (its ``parent_session`` is a file path, as in pi)."""
        return pi_codec()

    def _entries(self, lines: Any, loader: LineLoader, found: Envelopes | None = None) -> EntryLog:
        if self.source_version < CURRENT:
            return self._migrated(lines)
        found = found or bulk_envelopes(lines, PARENT_KEY)
        if found is None or "leaf" in found.types:  # not pi's own type: the line-by-line checks apply
            found = line_by_line(lines, loader)
        orphans = self._markers(lines, found, loader) if "custom" in found.types else {}
        return EntryLog.lazy(found.types, found.ids, found.parents, found.index, loader, orphans)

    def _markers(self, lines: list[bytes], found: Envelopes, loader: LineLoader) -> dict[int, str]:
        """Decode the leaf markers now (a ``custom`` line no entry hangs under), as ``leaf``
        entries whose parent is the leaf they moved from; the parents not earlier in the log."""
        has_children = set(found.parents)
        orphans: dict[int, str] = {}
        for pos, kind in enumerate(found.types):
            if kind != "custom" or pos in has_children:
                continue
            obj = self._parse(lines, pos + 2)
            if not PiCodec.is_leaf_marker(obj):
                continue
            entry = self._decode(obj, pos + 2, marker=True)
            loader.decoded[pos] = entry
            found.types[pos] = "leaf"
            parent = -1 if entry.parent_id is None else found.index.get(entry.parent_id, pos)
            if parent >= pos:  # a leaf it moved from that is not earlier: kept by id
                parent = -1
                orphans[pos] = entry.parent_id  # type: ignore[assignment]  # not None: a None parent is -1
            found.parents[pos] = parent
        return orphans

    @property
    def indexable(self) -> bool:  # a migrated file is decoded whole: no index
        return super().indexable and self.source_version >= CURRENT

    def _restore(self, lines: Any, markers: list[int], loader: LineLoader) -> bool:
        """Decode the leaf markers an index names (the log's envelopes already read them as ``leaf`` entries)."""
        for pos in markers:
            obj = self._parse(lines, pos + 2)
            if not PiCodec.is_leaf_marker(obj):  # an index that names another line a marker: not used
                return False
            loader.decoded[pos] = self._decode(obj, pos + 2, marker=True)
        return True

    def _extension_ok(self, lines: Any, found: Envelopes, start: int) -> bool:
        """New entries extend an index unless one hangs under a leaf marker or may be one (a full scan decides)."""
        new_parents = set(found.parents[start:])
        if any(found.types[p] == "leaf" for p in new_parents if p >= 0):
            return False
        for pos in range(start, len(found.types)):
            if found.types[pos] == "leaf" or (found.types[pos] == "custom" and pos not in new_parents
                                              and PiCodec.is_leaf_marker(self._parse(lines, pos + 2))):
                return False
        return True

    def _migrated(self, lines: list[bytes]) -> EntryLog:
        """A version 1 or 2 file, migrated in memory and decoded now."""
        objs = [(number, self._parse(lines, number)) for number in range(2, len(lines) + 1)]
        objs = migrate(self.source_version, self.session_id, objs, str(self.path))
        parents = {obj.get(PARENT_KEY) for _, obj in objs if isinstance(obj, dict)}
        ids: set[str] = set()
        entries = []
        for number, obj in objs:
            problem = envelope_problem(obj, PARENT_KEY) or tree_problem(obj, PARENT_KEY, ids)
            if problem is not None:
                raise corrupt(self.path, number, problem)
            entry = self._decode(obj, number, marker=PiCodec.is_leaf_marker(obj) and obj["id"] not in parents)
            ids.add(entry.id)
            entries.append(entry)
        return EntryLog.of(entries)

    def _parse(self, lines: list[bytes], number: int) -> Any:
        try:
            return parse(lines[number - 1])
        except (ValueError, RecursionError) as exc:
            raise corrupt(self.path, number, f"invalid JSON ({exc})") from None

    def _decode(self, obj: Any, number: int, *, marker: bool) -> Entry:
        """The entry on line ``number`` (``marker``: the ``leaf`` entry a leaf marker stands for)."""
        try:
            if marker:
                return self.codec.decode_leaf_marker(obj, self.session_id, number)
            return self.codec.decode_entry(obj, self.session_id, number)
        except SessionError as exc:
            raise corrupt(self.path, number, f"session {self.session_id}: {exc.message}", exc.code) from None

    def _salvage(self) -> None:
        if self.source_version < CURRENT:
            raise SessionError("unsupported_version", f"salvage reads pi files of version {CURRENT} only (this one is "
                               f"version {self.source_version})", path=str(self.path), line=1)
        super()._salvage()

    can_replace_lines = False
    why_no_replace = ("pi's files cannot hold a redaction (pi would drop the record and could not verify the stub); nothing "
                      "was changed: import the file (sessiontree import FILE) and redact the copy, then delete the original")

    def check_writable(self) -> None:
        if self.source_version < 2:
            raise SessionError("storage", f"session {self.session_id} is a pi version 1 file: it is read-only here, because "
                               "pi gives every entry of such a file a new id when it next opens it (export it to a version 3 "
                               "file, or let pi migrate it, to append)", path=str(self.path))
        super().check_writable()

    def check_events(self, events: Sequence[Any]) -> None:
        compactions = [e for e in events if e.__class__ is ContextCompacted and e.retained_tail is not None]
        if compactions:
            raise SessionError("invalid_entry", f"compaction {compactions[0].id!r}: pi files cannot carry a retained_tail "
                               "(pi ignores it and would build a different context); use first_kept_entry_id",
                               path=str(self.path))


__all__ = ["PiSessionStorage", "pi_context_options"]
