"""A pi session file as a session storage: read without rewriting, appended in pi's dialect.

:class:`PiSessionStorage` is a :class:`~sessiontree.adapters.jsonl.JsonlSessionStorage`
(same locked whole-line appends, torn-tail repair, conflict detection) whose lines are in
pi's dialect. ``JsonlSessionStorage.open(path)`` returns one when the header is pi's;
:meth:`PiSessionStorage.create` makes a new pi file. What differs from a native file:

* reading: versions 1 and 2 are migrated in memory (``pi_migrate.py``); a leaf marker (the
  ``custom`` entry that records a leaf move, see ``pi.py``) is read as a ``leaf`` entry
  unless pi has since appended under it, in which case it is the ordinary custom entry
  pi sees (a node of the tree); every line is still checked (parent on an earlier line,
  unique ids) and an error names the file and line;
* writing: lines are pi's (``PiCodec``); a version 1 file is read-only (pi would give every
  entry a new id when it next opens the file, orphaning what we appended), and a
  compaction with a ``retained_tail`` is refused (pi ignores that field, so pi and we
  would build different contexts);
* context: pi 1.x's rules for ``context_edit`` entries and system messages apply
  (``context_options``; ``projections/pi_context.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import orjson
from eventsourcing.persistence import StoredEvent

from sessiontree.adapters.codec import parse
from sessiontree.adapters.jsonl import JsonlSessionStorage
from sessiontree.adapters.jsonl_recorder import line_type, topic_of
from sessiontree.adapters.jsonl_scan import (
    JsonlEntry,
    bulk_envelopes,
    ScanContext,
    corrupt,
    envelope_decoder,
    envelope_problem,
    tree_problem,
)
from sessiontree.adapters.pi import PI_PARENT_KEY, PiCodec, pi_codec
from sessiontree.adapters.pi_migrate import CURRENT, migrate
from sessiontree.adapters.storage import SessionMapper
from sessiontree.domain.errors import SessionError
from sessiontree.domain.gcpause import building_many
from sessiontree.domain.log import LazyBlock
from sessiontree.domain.events import ContextCompacted, SessionStarted
from sessiontree.projections.context import SessionContextBuildOptions
from sessiontree.projections.pi_context import pi_entry_transform


class PiSessionMapper(SessionMapper):
    """The session mapper for pi lines: a stored event's topic comes from its line's type
    (a ``leaf`` event is a ``custom`` line in pi's dialect)."""

    def stored_event(self, domain_event: Any, state: bytes) -> StoredEvent:
        return StoredEvent(domain_event.originator_id, domain_event.originator_version, topic_of(line_type(state)), state)


def pi_context_options(codec: PiCodec | None = None) -> SessionContextBuildOptions:
    """Context options that give pi 1.x's meaning to ``context_edit`` entries and system
    messages (pi sessions get them automatically; pass them for a session imported from pi)."""
    codec = codec or pi_codec()
    return SessionContextBuildOptions(
        entry_transforms=(pi_entry_transform(codec.structure_content, codec.structure_message),)
    )


def _decode(ctx: ScanContext, obj: dict[str, Any], lineno: int, marker: bool) -> Any:
    codec: PiCodec = ctx.codec  # type: ignore[assignment]
    try:
        if marker:
            return codec.decode_leaf_marker(obj, ctx.session_id, lineno)
        return codec.decode_entry(obj, ctx.session_id, lineno)
    except SessionError as exc:
        raise corrupt(ctx.path, lineno, f"session {ctx.session_id}: {exc.message}", exc.code) from None


def _scan_objects(lines: Sequence[bytes], ctx: ScanContext) -> list[tuple[int, Any]]:
    """``(line number, envelope)`` for ``lines[1:]``: the envelope is the parsed object for
    lines that need one (custom entries, which may be leaf markers; any line that fails the
    quick check), else a cheap msgspec envelope (``type``, ``id``, ``parent``)."""
    envelope = envelope_decoder(PI_PARENT_KEY).decode
    out: list[tuple[int, Any]] = []
    for index in range(1, len(lines)):
        line = lines[index]
        try:
            head = envelope(line)
            line.decode()  # msgspec does not check UTF-8 inside the strings it skips
            if head.type == "custom" or head.type == "session" or not head.id:
                raise LookupError
            out.append((index + 1, head))
        except (LookupError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            try:
                out.append((index + 1, parse(line)))
            except (ValueError, RecursionError) as exc:
                raise corrupt(ctx.path, index + 1, f"invalid JSON ({exc})") from None
    return out


def _envelope(obj: Any) -> tuple[str, str, str | None]:
    if isinstance(obj, dict):
        return obj["type"], obj["id"], obj[PI_PARENT_KEY]
    return obj.type, obj.id, obj.parent


def read_pi_entries(lines: Sequence[bytes], ctx: ScanContext, version: int) -> Sequence[Any]:
    """The entries of a pi file's ``lines`` (line 1 is the header), checked line by line.

    Version 3 lines are held lazily (decoded on first use); older versions are migrated
    and decoded now. Line ``k`` is version ``k`` of the session.
    """
    lazy = version >= CURRENT
    with building_many():
        if lazy:
            block = _pi_block(lines, ctx)
            if block is not None:
                return block
            objs = _scan_objects(lines, ctx)
        else:
            objs = []
            for index in range(1, len(lines)):
                try:
                    objs.append((index + 1, parse(lines[index])))
                except (ValueError, RecursionError) as exc:
                    raise corrupt(ctx.path, index + 1, f"invalid JSON ({exc})") from None
            objs = migrate(version, ctx.session_id, objs, str(ctx.path))
        ids: set[str] = set()
        parents: set[str] = set()
        markers: set[int] = set()
        for lineno, obj in objs:
            if not isinstance(obj, msgspec.Struct):  # a parsed line, of any JSON type
                problem = envelope_problem(obj, PI_PARENT_KEY) or tree_problem(obj, PI_PARENT_KEY, ids)
                if problem is not None:
                    raise corrupt(ctx.path, lineno, problem)
                if PiCodec.is_leaf_marker(obj):
                    markers.add(lineno)
            _, entry_id, parent = _envelope(obj)
            if entry_id in ids or (parent is not None and parent not in ids):
                problem = tree_problem({"type": "", "id": entry_id, PI_PARENT_KEY: parent}, PI_PARENT_KEY, ids)
                raise corrupt(ctx.path, lineno, problem or "bad entry")
            ids.add(entry_id)
            if parent is not None:
                parents.add(parent)
        out: list[Any] = []
        for lineno, obj in objs:
            kind, entry_id, parent = _envelope(obj)
            marker = lineno in markers and entry_id not in parents
            if lazy and not marker:
                out.append(JsonlEntry(kind, entry_id, parent, lines[lineno - 1], lineno, lineno, ctx))
            else:
                out.append(_decode(ctx, obj, lineno, marker))
        return out


def _pi_block(lines: Sequence[bytes], ctx: ScanContext) -> LazyBlock | None:
    """A version 3 file's entries checked in bulk (see ``bulk_envelopes``), or None: scan
    line by line. ``custom`` lines are parsed now, since one may be a leaf marker."""
    scan = bulk_envelopes(lines, ctx, 1)
    if scan is None or "leaf" in scan.types:  # not pi's own type: the line-by-line checks apply
        return None
    items: list[Any] = [None] * len(scan.body)
    if "custom" in scan.types:
        types, body = scan.types, scan.body
        has_children = set(scan.ppos)
        for pos, kind in enumerate(types):
            if kind != "custom":
                continue
            try:
                obj = parse(body[pos])
            except (ValueError, RecursionError):
                return None
            if envelope_problem(obj, PI_PARENT_KEY) is not None:
                return None
            if PiCodec.is_leaf_marker(obj) and pos not in has_children:
                entry = _decode(ctx, obj, pos + scan.offset, True)
                items[pos] = entry
                types[pos] = entry.type
                # A leaf record's parent is the leaf it moved from (data.fromId), not the
                # line's parentId (its target): as the line-by-line path has it.
                came_from = entry.parent_id
                parent = -1 if came_from is None else scan.index.get(came_from, pos)
                if parent >= pos:
                    return None  # not an earlier entry: the line-by-line path keeps it as an orphan
                scan.ppos[pos] = parent
    return scan.block(ctx, items)


class PiSessionStorage(JsonlSessionStorage):
    """One pi session file (see the module docstring)."""

    def __init__(self, path: Path, file: Any, header: SessionStarted, *, codec: Any, read_only: bool = False):
        if not isinstance(codec, PiCodec):
            raise SessionError("corrupt", "not a pi session file (its header is in the native dialect)", path=str(path), line=1)
        super().__init__(path, file, header, codec=codec, read_only=read_only)
        self.mapper = PiSessionMapper(codec)
        self.source_version: int = header.version
        self.context_options = pi_context_options(codec)

    @classmethod
    def default_codec(cls) -> Any:
        """``create`` writes pi's dialect (its ``parent_session`` is a file path, as in pi)."""
        return pi_codec()

    # -- reading --------------------------------------------------------------------------

    def _scan(self, lines: list[bytes]) -> list[Any]:
        """pi's lines: its envelope, its older versions migrated in memory."""
        return read_pi_entries(lines, self._context(), self.source_version)

    def _salvage(self) -> None:
        if self.source_version < CURRENT:
            raise SessionError(
                "unsupported_version",
                f"salvage reads pi files of version {CURRENT} only (this one is version {self.source_version})",
                path=str(self.path),
                line=1,
            )
        super()._salvage()

    # -- writing --------------------------------------------------------------------------

    def check_writable(self) -> None:
        if self.source_version < 2:
            raise SessionError(
                "storage",
                f"session {self.session_id} is a pi version 1 file: it is read-only here, because pi "
                "gives every entry of such a file a new id when it next opens it (export it to a "
                "version 3 file, or let pi migrate it, to append)",
                path=str(self.path),
            )
        if self.read_only:  # what the base class checks (it runs on every append: no call otherwise)
            super().check_writable()

    def save(self, events: Sequence[Any]) -> None:
        for event in events:
            if event.type == "compaction" and isinstance(event, ContextCompacted) and event.retained_tail is not None:
                raise SessionError(
                    "invalid_entry",
                    f"compaction {event.id!r}: pi files cannot carry a retained_tail (pi ignores "
                    "it and would build a different context); use first_kept_entry_id",
                    path=str(self.path),
                )
        super().save(events)


__all__ = ["PiSessionMapper", "PiSessionStorage", "pi_context_options", "read_pi_entries"]
