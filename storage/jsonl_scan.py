"""Reading a session file: the header, then every entry line checked cheaply, held lazily and decoded on demand;
or salvaged.

msgspec validates each line's JSON building only its envelope (type, id, parent, timestamp), the bytes it skips are
checked as UTF-8, and the tree (unique ids, parents and leaf targets on earlier lines) is checked in bulk; anything
unusual goes line by line, naming the problem. :class:`LineLoader`, the log's loader port, holds the file's lines and
decodes those asked for, in batches, dropping each decoded line's bytes; it leaves the process's collector and
allocator alone (docs/architecture.md).

Salvage (:func:`salvage_log`) is only used when asked for (``JsonlSessionStorage.open(path, salvage=True)``, which
opens the file read-only, or a copy or fork with ``salvage=True``). Every line is fully decoded, so a line is kept only
if it is entirely sound: safe to parse, valid JSON, a good envelope, a known parent (a line whose parent was skipped is
skipped too), a new id, and a body the codec accepts. Kept entries are numbered again from version 2, so the session
they form is consistent; the skipped lines come with their reasons.
"""

from __future__ import annotations

import warnings
from collections.abc import Container, Sequence
from functools import partial
from operator import ge
from typing import Any

import msgspec

from sessiontree.audit.chain import strip as strip_chain
from sessiontree.content.blobs import MARKER, resolve
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry, SessionStarted
from sessiontree.domain.log import EntryLog
from sessiontree.storage.pipeline import LinePipeline
from sessiontree.wire.codec import Codec, native_codec
from sessiontree.wire.jsontext import line_problem, parse
from sessiontree.wire.schema import LEAF_TARGET, TARGET_ID_KEY, envelope_decoder, is_pi_header

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
        self.issued: set[str] = set()  # the warnings this loader gave (a line decoded again warns no second time)
        self.decoded: dict[int, Entry] = {}  # entries decoded before the log asked (leaf markers, migrations)
        self.held = len(lines) - 1  # the entries it can give back (the storage adds the lines it appends)
        self.expected: Sequence[str] | None = None  # the ids an index says the lines hold: checked as each is decoded
        # what the index says of each line's type and parent (positions; orphans: parents kept by id): checked too
        self.expected_heads: tuple[Sequence[str], Sequence[int], dict[int, str]] | None = None

    def warn_at(self, version: int, message: str) -> None:
        self.warn(f"{self.path}:{version}: {message}")

    def warn(self, message: str) -> None:
        if message in self.issued:
            return
        self.issued.add(message)
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



def salvage_log(
    lines: Sequence[bytes], location: str, codec: Codec | None = None, blobs: Any = None,
) -> tuple[SessionStarted, list[Entry], list[tuple[int, str]]]:
    """The header, the sound entries and the skipped ``(line, reason)`` of a whole log given
    as lines (any backend; ``blobs``: the store its out-of-line content is read from). A header that cannot be
    read is an error."""
    if not lines:
        raise SessionError("corrupt", f"{location}: no session header")
    header, codec = read_header(strip_chain(lines[0]), location, codec)
    ids: set[str] = set()
    kept: list[Entry] = []
    skipped: list[tuple[int, str]] = []
    for number in range(2, len(lines) + 1):
        found = read_entry(lines[number - 1], codec, header.originator_id, len(kept) + 2, ids, blobs)
        if isinstance(found, str):
            skipped.append((number, found))
        else:
            ids.add(found.id)
            kept.append(found)
    return header, kept, skipped


def read_entry(
    line: bytes, codec: Codec, session_id: str, version: int, ids: Container[str], blobs: Any = None,
) -> Entry | str:
    """The entry on ``line`` as entry ``version`` if the line is entirely sound (see the module
    docstring; ``ids``: the ids of the entries before it), else the reason it is not. Out-of-line content is read
    from ``blobs``: a store, or a function from a reference to the string it stands for (verify's check)."""
    problem = line_problem(line, duplicates=codec.dialect.name == "native")
    if problem is not None:
        return problem
    try:
        obj = parse(strip_chain(line))
    except (ValueError, RecursionError) as exc:
        return f"invalid JSON ({exc})"
    parent_key = codec.dialect.parent_key
    problem = envelope_problem(obj, parent_key) or tree_problem(obj, parent_key, ids)
    if problem is not None:
        return problem
    if MARKER in line and codec.dialect.name == "native":
        try:
            resolve(obj, blobs)
        except SessionError as exc:
            return exc.message
    try:
        return codec.decode_entry(obj, session_id, version)
    except SessionError as exc:
        return exc.message
    except RecursionError:
        return "nested too deeply to decode"
