"""Reading a session file: the header, then every entry line checked cheaply and held lazily.

Opening a 100k-entry file must not decode 100k entries. Each line is checked once:
``msgspec`` validates its JSON and builds only the envelope (``type``, ``id``, the parent key
and ``timestamp``), and a UTF-8 decode checks the bytes msgspec skipped. Any line that fails
goes through ``orjson`` again so the error names exactly what is wrong. The tree is checked too (a parent must appear on an
earlier line, ids are unique, a ``leaf`` entry targets an earlier entry). The line's bytes
are kept in a :class:`JsonlEntry`, which the aggregate's log decodes with the codec the
first time anything else is needed; a line whose body does not decode raises
``SessionError("corrupt")`` naming the file and line at that moment.
"""

from __future__ import annotations

import ctypes
import sys
import warnings
from collections.abc import Callable, Container, Sequence
from operator import ge
from typing import Any, Optional

import msgspec
import orjson

from sessiontree.adapters.chain import CHAIN_KEY, is_sealed
from sessiontree.adapters.chain import strip as strip_chain
from sessiontree.adapters.codec import Codec, duplicate_key, line_problem, native_codec, parse
from sessiontree.domain.errors import SessionError
from sessiontree.domain.gcpause import building_many
from sessiontree.domain.events import Entry, SessionStarted
from sessiontree.domain.log import LazyBlock


class DuplicateKeyWarning(UserWarning):
    """A pi line repeats a key in one object; its last value is read, as pi's reader does."""


def corrupt(path: Any, line: int | None, message: str, code: str = "corrupt") -> SessionError:
    return SessionError(code, message, path=str(path), line=line)


def choose_codec(header: dict[str, Any], path: Any, codec: Codec | None = None) -> Codec:
    """The codec for a file, from its parsed header line (the one place dialects are told apart).

    An explicit ``codec`` wins. Otherwise the file is in the native dialect; a dialect
    with its own header shape (pi's) adds its test here.
    """
    if codec is not None:
        return codec
    from sessiontree.adapters.pi import is_pi_header, pi_codec

    if is_pi_header(header):
        return pi_codec()
    return native_codec()


def read_header(first: bytes, path: Any, codec: Codec | None = None) -> tuple[SessionStarted, Codec]:
    """Decode a file's first line (without its newline) into the header event and its codec."""
    try:
        obj = orjson.loads(strip_chain(first))
    except orjson.JSONDecodeError as exc:
        raise corrupt(path, 1, f"the header line is not valid JSON ({exc})") from None
    if not isinstance(obj, dict) or obj.get("type") != "session":
        raise corrupt(path, 1, "the first line is not a session header (type 'session')")
    chosen = choose_codec(obj, path, codec)
    try:
        header = chosen.decode_header(obj)
    except SessionError as exc:
        raise corrupt(path, 1, exc.message, exc.code) from None
    return header, chosen


class ScanContext:
    """What every lazy entry of one file shares: where it came from and how to decode it.

    A line is decoded by the codec's typed wire decoder (``wiredecode.py``) when it can,
    else parsed into dicts and decoded by the codec (whose errors name what is wrong).
    """

    __slots__ = ("path", "session_id", "codec", "_decode", "_wire", "_strict_keys", "warnings")

    def __init__(self, path: Any, session_id: str, codec: Codec, warnings: list[str] | None = None) -> None:
        self.path = path
        self.session_id = session_id
        self.codec = codec
        self._decode = codec.decode
        self._wire: Any = None
        # Native lines are ours: a repeated key is damage. pi's files come from another
        # writer: a repeated key there is warned about and its last value read, as pi does.
        self._strict_keys = codec.dialect.name == "native"
        self.warnings = warnings if warnings is not None else []

    def check(self, line: bytes, lineno: int) -> None:
        """Refuse a line that is unsafe to parse (``corrupt``); warn of a repeated key in a pi line."""
        problem = line_problem(line, duplicates=self._strict_keys)
        if problem is None and not self._strict_keys:
            key = duplicate_key(line)
            if key is not None:
                message = f"{self.path}:{lineno}: key {key!r} appears twice in one object; its last value is read, as pi does"
                self.warnings.append(message)
                warnings.warn(message, DuplicateKeyWarning, stacklevel=4)
        if problem is not None:
            raise corrupt(self.path, lineno, f"session {self.session_id}: {problem}")

    def _wire_decode(self) -> Any:
        wire = self._wire
        if wire is None:
            wire = self._wire = codec_wire_decoder(self.codec).decode
        return wire

    def decode(self, line: bytes, version: int, lineno: int) -> Entry:
        self.check(line, lineno)
        entry = self._wire_decode()(line, self.session_id, version)
        if entry is not None:
            return entry  # type: ignore[no-any-return]
        return self._decode_dict(line, version, lineno)

    def _decode_dict(self, line: bytes, version: int, lineno: int) -> Entry:
        try:
            data = parse(line)
            if is_sealed(line) and type(data) is dict:
                data.pop(CHAIN_KEY, None)  # cheaper than copying the line without the field
            return self._decode(data, self.session_id, version)  # type: ignore[no-any-return]
        except (ValueError, RecursionError) as exc:
            raise corrupt(self.path, lineno, f"invalid JSON ({exc})") from None
        except SessionError as exc:
            raise corrupt(self.path, lineno, f"session {self.session_id}: {exc.message}", exc.code) from None

    def decode_many(self, lines: list[Any], items: list[Any], indices: Sequence[int], offset: int) -> list[Entry]:
        """The entries ``i`` of ``indices``, from ``lines[i]`` (line and version ``i + offset``),
        in one loop: the hot path of building a context.

        Each entry is stored in ``items[i]`` and only then its line dropped from ``lines``
        (set to None): a context's lines would otherwise stay in memory beside their entries.
        An entry already in ``items`` is not decoded again; a dropped line means its entry is
        there (also when another thread decoded it meanwhile), so an error on a later line
        loses nothing decoded before it.
        """
        wire = self._wire_decode()
        sid = self.session_id
        out: list[Entry] = []
        append = out.append
        dropped = 0
        for i in indices:
            entry = items[i]
            if entry is None:
                line = lines[i]
                if line is None:  # decoded by another thread since items[i] was read
                    entry = items[i]
                else:
                    self.check(line, i + offset)
                    entry = wire(line, sid, i + offset)
                    if entry is None:
                        entry = self._decode_dict(line, i + offset, i + offset)
                    items[i] = entry
                    lines[i] = None
                    dropped += 1
                    if dropped == RELEASE_EVERY:
                        release_free_memory()
                        dropped = 0
            append(entry)
        if dropped >= RELEASE_EVERY // 2:
            release_free_memory()
        return out


# Lines are larger than Python's small-object allocator serves, so they come from the C
# allocator, which keeps the memory of dropped lines for its own later use: new Python
# objects do not reuse it, and the process would hold both. Every RELEASE_EVERY dropped
# lines (~1.5 MB) the free memory is handed back to the system (glibc's malloc_trim, ~2 ms at
# 100k entries; a no-op where there is none). Measured in docs/performance.md.
RELEASE_EVERY = 2048


def _find_malloc_trim() -> Callable[[], Any]:
    if sys.platform != "linux":
        return lambda: None
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own C library (glibc has it; musl not)
    except (OSError, AttributeError):
        return lambda: None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


release_free_memory = _find_malloc_trim()


def codec_wire_decoder(codec: Codec) -> Any:
    """The typed wire decoder of ``codec`` (built once per codec, on first use)."""
    wire = codec.__dict__.get("_wire_decoder")
    if wire is None:
        from sessiontree.adapters.wiredecode import WireDecoder

        wire = codec.__dict__["_wire_decoder"] = WireDecoder(codec, getattr(codec, "wire_skip_entry_types", frozenset()))
    return wire


class JsonlEntry:
    """A lazy entry (see ``sessiontree.domain.log.LazyEntry``): envelope now, body on demand."""

    __slots__ = ("type", "id", "parent_id", "line", "version", "lineno", "_ctx", "_entry")

    def __init__(
        self, type: str, id: str, parent_id: str | None, line: bytes, version: int, lineno: int, ctx: ScanContext
    ) -> None:
        self.type = type
        self.id = id
        self.parent_id = parent_id
        self.line = line
        self.version = version
        self.lineno = lineno
        self._ctx = ctx
        self._entry: Entry | None = None

    def load(self) -> Entry:
        entry = self._entry
        if entry is None:
            entry = self._entry = self._ctx.decode(self.line, self.version, self.lineno)
        return entry

    def __repr__(self) -> str:
        return f"<JsonlEntry {self.type} {self.id} line {self.lineno}>"


def envelope_problem(obj: Any, parent_key: str) -> str | None:
    """What is wrong with an entry's envelope, or None."""
    if not isinstance(obj, dict):
        return "an entry line must be a JSON object"
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        return "entry has no string 'type'"
    if kind == "session":
        return "a second session header"
    entry_id = obj.get("id")
    if not isinstance(entry_id, str) or not entry_id:
        return f"{kind} entry has no string 'id'"
    if parent_key not in obj:
        return f"entry {entry_id!r} has no '{parent_key}'"
    parent = obj[parent_key]
    if parent is not None and not isinstance(parent, str):
        return f"entry {entry_id!r}: '{parent_key}' must be a string or null"
    if not isinstance(obj.get("timestamp"), str):
        return f"entry {entry_id!r} has no string 'timestamp'"
    return None


def tree_problem(obj: dict[str, Any], parent_key: str, ids: Container[str]) -> str | None:
    """What is wrong with an entry's place in the tree (given the ids before it), or None."""
    entry_id = obj["id"]
    if entry_id in ids:
        return f"duplicate entry id {entry_id!r}"
    parent = obj[parent_key]
    if parent is not None and parent not in ids:
        return f"entry {entry_id!r} has unknown parent {parent!r} (not on an earlier line)"
    if obj["type"] == "leaf":
        target = obj.get("target_id")
        if target is not None and target not in ids:
            return f"leaf entry {entry_id!r} targets unknown entry {target!r}"
    return None


def scan_entries(lines: Sequence[bytes], ctx: ScanContext, first: int = 1) -> LazyBlock:
    """Lazy entries for ``lines[first:]`` (line ``k``, 1-based, is version ``k``); strict.

    Raises ``SessionError("corrupt")`` naming the file and line for bad JSON, a bad
    envelope, an unknown parent, a duplicate id or a dangling leaf target. Every line is
    checked in bulk first; a file with anything unusual in it (a line msgspec refuses, a
    broken tree, leaf records) is scanned again line by line, which names the problem.
    """
    with building_many():
        block = _scan_bulk(lines, ctx, first)
        if block is None:
            block = block_of(_scan(lines, ctx, first))
        return block


def block_of(entries: list[Any]) -> LazyBlock:
    """A :class:`LazyBlock` of lazy entries (``JsonlEntry``) and decoded entries."""
    items: list[Any] = [e if isinstance(e, Entry) else None for e in entries]

    def load(i: int) -> Entry:
        return entries[i].load()  # type: ignore[no-any-return]

    return LazyBlock(
        [e.type for e in entries], [e.id for e in entries], [e.parent_id for e in entries], items, load
    )


class BulkScan:
    """The envelopes of many lines, checked in bulk: ``body[i]`` is line and version
    ``i + offset``; ``ppos[i]`` is the index of entry ``i``'s parent, or -1."""

    __slots__ = ("body", "offset", "types", "ids", "ppos", "index")

    def __init__(self, body: list[bytes], offset: int, types: list[str], ids: list[str], ppos: list[int], index: dict[str, int]) -> None:
        self.body = body
        self.offset = offset
        self.types = types
        self.ids = ids
        self.ppos = ppos
        self.index = index

    def block(self, ctx: ScanContext, items: list[Any] | None = None) -> LazyBlock:
        """The lazy block of these lines, decoded through ``ctx`` on demand."""
        body, offset = self.body, self.offset
        decode_many = ctx.decode_many

        items = items if items is not None else [None] * len(body)

        def load(i: int) -> Entry:
            return decode_many(body, items, (i,), offset)[0]

        def load_many(indices: Sequence[int]) -> list[Entry]:
            return decode_many(body, items, indices, offset)

        return LazyBlock(self.types, self.ids, None, items, load, load_many, checked=(self.index, self.ppos))


def bulk_envelopes(lines: Sequence[bytes], ctx: ScanContext, first: int) -> BulkScan | None:
    """Every line's envelope and place in the tree checked with bulk operations, or None
    when anything is unusual (then a line-by-line scan finds and names it). Entry types are
    not checked beyond being strings: a dialect checks the types it treats specially."""
    envelope = envelope_decoder(ctx.codec.dialect.parent_key).decode
    body = list(lines[first:])
    try:
        heads = [envelope(line) for line in body]
    except (msgspec.DecodeError, RecursionError):
        return None
    if not all(map(bytes.isascii, body)):  # msgspec does not check UTF-8 inside strings it skips
        try:
            for line in body:
                if not line.isascii():
                    line.decode()
        except UnicodeDecodeError:
            return None
    count = len(heads)
    ids = [h.id for h in heads]
    parents = [h.parent for h in heads]
    kinds: dict[str, str] = {}
    types = [kinds.setdefault(h.type, h.type) for h in heads]  # one string per entry type
    del heads
    if "session" in kinds or not all(ids):
        return None
    index = dict(zip(ids, range(count)))
    if len(index) != count:
        return None
    get = index.get
    ppos = [get(p, -1) for p in parents]  # None is never an id
    if ppos.count(-1) != parents.count(None) or any(map(ge, ppos, range(count))):
        return None  # a parent that is unknown, or not on an earlier line
    return BulkScan(body, first + 1, types, ids, ppos, index)


def _scan_bulk(lines: Sequence[bytes], ctx: ScanContext, first: int) -> LazyBlock | None:
    """The native dialect's bulk scan (see :func:`bulk_envelopes`), or None."""
    scan = bulk_envelopes(lines, ctx, first)
    if scan is None:
        return None
    if "leaf" in scan.types:
        get, body = scan.index.get, scan.body
        for pos, kind in enumerate(scan.types):
            if kind == "leaf":
                try:
                    target = orjson.loads(body[pos]).get("target_id")
                except (orjson.JSONDecodeError, AttributeError):
                    return None
                if target is not None and (type(target) is not str or get(target, pos) >= pos):
                    return None
    return scan.block(ctx)


_ENVELOPES: dict[str, msgspec.json.Decoder[Any]] = {}


def envelope_decoder(parent_key: str) -> msgspec.json.Decoder[Any]:
    """A decoder that checks a whole line is valid JSON but builds only its envelope.

    msgspec validates every byte of the line and skips the fields it is not asked for,
    which is about five times faster than building the full object with orjson.
    """
    decoder = _ENVELOPES.get(parent_key)
    if decoder is None:
        envelope = msgspec.defstruct(
            "Envelope",
            [("type", str), ("id", str), ("parent", Optional[str], msgspec.field(name=parent_key)), ("timestamp", str)],
        )
        decoder = _ENVELOPES[parent_key] = msgspec.json.Decoder(envelope)
    return decoder


def _scan(lines: Sequence[bytes], ctx: ScanContext, first: int) -> list[JsonlEntry]:
    loads = orjson.loads
    envelope = envelope_decoder(ctx.codec.dialect.parent_key).decode
    pk = ctx.codec.dialect.parent_key
    path = ctx.path
    # id -> the same str object: a child's parent id reuses its parent's string, and entry
    # types share one string each (100k lines would otherwise hold 200k duplicate strings).
    ids: dict[str, str] = {}
    kinds: dict[str, str] = {}
    out: list[JsonlEntry] = []
    append = out.append
    for index in range(first, len(lines)):
        line = lines[index]
        try:
            head = envelope(line)
            line.decode()  # msgspec does not check UTF-8 inside strings it skips; this does, cheaply
            kind = head.type
            entry_id = head.id
            parent = head.parent
            if (
                kind == "session"
                or not entry_id
                or entry_id in ids
                or (parent is not None and parent not in ids)
                or kind == "leaf"
            ):
                raise LookupError
        except (LookupError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):  # deep nesting: orjson decides
            try:
                obj = loads(line)
            except orjson.JSONDecodeError as exc:
                raise corrupt(path, index + 1, f"invalid JSON ({exc})") from None
            problem = envelope_problem(obj, pk) or tree_problem(obj, pk, ids)
            if problem is not None:
                raise corrupt(path, index + 1, problem) from None
            kind, entry_id, parent = obj["type"], obj["id"], obj[pk]
        ids[entry_id] = entry_id
        if parent is not None:
            parent = ids[parent]
        kind = kinds.setdefault(kind, kind)
        append(JsonlEntry(kind, entry_id, parent, line, index + 1, index + 1, ctx))
    return out
