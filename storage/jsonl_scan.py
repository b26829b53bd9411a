"""Reading a session file: the header, then every entry line checked cheaply and held lazily.

msgspec validates each line's JSON building only its envelope (type, id, parent, timestamp),
the bytes it skips are checked as UTF-8, and the tree (unique ids, parents and leaf targets on
earlier lines) is checked in bulk; a :class:`~sessiontree.storage.jsonl_loader.LineLoader`
decodes bodies when first needed. Anything unusual goes line by line, naming the problem.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from operator import ge
from typing import Any

import msgspec

from sessiontree.audit.chain import strip as strip_chain
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted
from sessiontree.domain.log import EntryLog
from sessiontree.storage.jsonl_loader import LineLoader
from sessiontree.wire.codec import Codec, native_codec
from sessiontree.wire.jsontext import parse
from sessiontree.wire.schema import LEAF_TARGET, TARGET_ID_KEY, envelope_decoder, is_pi_header


def corrupt(path: Any, line: int | None, message: str, code: str = "corrupt") -> SessionError:
    return SessionError(code, message, path=str(path), line=line)


def read_header(first: bytes, path: Any, codec: Codec | None = None) -> tuple[SessionStarted, Codec]:
    """Decode a file's first line (without its newline) into the header and the file's codec:
    ``codec`` if given, else pi's for a pi header (the one place dialects are told apart)."""
    try:
        obj = parse(strip_chain(first))
    except (ValueError, RecursionError) as exc:
        raise corrupt(path, 1, f"the header line is not valid JSON ({exc})") from None
    if not isinstance(obj, dict) or obj.get("type") != "session":
        raise corrupt(path, 1, "the first line is not a session header (type 'session')")
    if codec is None:
        if is_pi_header(obj):
            from sessiontree.pi.pi import pi_codec  # loaded only for pi's files

            codec = pi_codec()
        else:
            codec = native_codec()
    try:
        return codec.decode_header(obj), codec
    except SessionError as exc:
        raise corrupt(path, 1, exc.message, exc.code) from None


def envelope_problem(obj: Any, parent_key: str) -> str | None:
    """What is wrong with an entry's envelope, or None."""
    if not isinstance(obj, dict):
        return "an entry line must be a JSON object"
    kind, entry_id = obj.get("type"), obj.get("id")
    if not isinstance(kind, str) or not kind:
        return "entry has no string 'type'"
    if kind == "session":
        return "a second session header"
    if not isinstance(entry_id, str) or not entry_id:
        return f"{kind} entry has no string 'id'"
    if parent_key not in obj:
        return f"entry {entry_id!r} has no '{parent_key}'"
    if obj[parent_key] is not None and not isinstance(obj[parent_key], str):
        return f"entry {entry_id!r}: '{parent_key}' must be a string or null"
    if not isinstance(obj.get("timestamp"), str):
        return f"entry {entry_id!r} has no string 'timestamp'"
    return None


def tree_problem(obj: dict[str, Any], parent_key: str, ids: Container[str]) -> str | None:
    """What is wrong with an entry's place in the tree (given the ids before it), or None."""
    entry_id, parent = obj["id"], obj[parent_key]
    if entry_id in ids:
        return f"duplicate entry id {entry_id!r}"
    if parent is not None and parent not in ids:
        return f"entry {entry_id!r} has unknown parent {parent!r} (not on an earlier line)"
    if obj["type"] == "leaf":
        target = obj.get(TARGET_ID_KEY)
        if target is not None and target not in ids:
            return f"leaf entry {entry_id!r} targets unknown entry {target!r}"
    return None


class Envelopes:
    """Every entry line's type, id and parent position (-1: a root), and the id index."""

    __slots__ = ("ids", "index", "parents", "types")

    def __init__(self, types: list[str], ids: list[str], parents: list[int], index: dict[str, int]) -> None:
        self.types, self.ids, self.parents, self.index = types, ids, parents, index


def scan(lines: Sequence[bytes], loader: LineLoader, found: Envelopes | None = None) -> EntryLog:
    """The lazy log of ``lines[1:]`` (line ``k``, 1-based, is version ``k``); strict: any bad
    line is ``SessionError("corrupt")`` naming the file and the line. ``found``: their envelopes,
    already checked in bulk (:func:`envelopes_of`)."""
    found = found or bulk_envelopes(lines, loader.parent_key)
    if found is None or ("leaf" in found.types and not _leaf_targets_ok(lines, found)):
        found = line_by_line(lines, loader)
    return EntryLog.lazy(found.types, found.ids, found.parents, found.index, loader)


def bulk_envelopes(lines: Sequence[bytes], parent_key: str) -> Envelopes | None:
    """Every line's envelope and place in the tree checked with bulk operations over whole
    lists, or None when anything is unusual (then :func:`line_by_line` names it)."""
    envelope = envelope_decoder(parent_key).decode
    try:
        heads = [envelope(lines[i]) for i in range(1, len(lines))]
    except (msgspec.DecodeError, RecursionError):
        return None
    if not all(map(bytes.isascii, lines)) and not utf8(lines):  # msgspec does not check UTF-8 inside strings it skips
        return None
    return envelopes_of(heads)


def utf8(lines: Sequence[bytes]) -> bool:
    try:
        for line in lines:
            if not line.isascii():
                line.decode()
    except UnicodeDecodeError:
        return False
    return True


def envelopes_of(heads: list[Any]) -> Envelopes | None:
    """:func:`bulk_envelopes` from the lines' decoded envelopes (one per entry line, in order)."""
    count = len(heads)
    kinds: dict[str, str] = {}
    types = [kinds.setdefault(h.type, h.type) for h in heads]  # one string per entry type
    ids = [h.id for h in heads]
    parent_ids = [h.parent for h in heads]
    del heads
    if "session" in kinds or not all(ids):
        return None
    index = dict(zip(ids, range(count)))
    if len(index) != count:
        return None
    get = index.get
    parents = [get(p, -1) for p in parent_ids]  # None is never an id
    if parents.count(-1) != parent_ids.count(None) or any(map(ge, parents, range(count))):
        return None  # a parent that is unknown, or not on an earlier line
    return Envelopes(types, ids, parents, index)


def _leaf_targets_ok(lines: Sequence[bytes], found: Envelopes) -> bool:
    """Does every ``leaf`` line target an earlier entry (or nothing)?"""
    for pos, kind in enumerate(found.types):
        if kind == "leaf":
            try:
                target = LEAF_TARGET.decode(lines[pos + 1]).target
            except (msgspec.DecodeError, RecursionError):
                return False
            if target is not None and (type(target) is not str or found.index.get(target, pos) >= pos):
                return False
    return True


def line_by_line(lines: Sequence[bytes], loader: LineLoader) -> Envelopes:
    """The envelopes of ``lines[1:]``, one line at a time, naming the first bad one."""
    pk, path = loader.parent_key, loader.path
    envelope = envelope_decoder(pk).decode
    index: dict[str, int] = {}
    types: list[str] = []
    parents: list[int] = []
    for number in range(2, len(lines) + 1):
        line = lines[number - 1]
        try:
            head = envelope(line)
            line.decode()
            kind, entry_id, parent = head.type, head.id, head.parent
            if kind in ("session", "leaf") or not entry_id or entry_id in index or (parent is not None and parent not in index):
                raise LookupError
        except (LookupError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            try:
                obj = parse(line)
            except (ValueError, RecursionError) as exc:
                raise corrupt(path, number, f"invalid JSON ({exc})") from None
            problem = envelope_problem(obj, pk) or tree_problem(obj, pk, index)
            if problem is not None:
                raise corrupt(path, number, problem) from None
            kind, entry_id, parent = obj["type"], obj["id"], obj[pk]
        index[entry_id] = len(types)
        types.append(kind)
        parents.append(-1 if parent is None else index[parent])
    return Envelopes(types, list(index), parents, index)
