"""The wire codec: one private cattrs converter per dialect, at the edge (SPEC 2.2).

``encode_event`` turns a header or entry event into one JSON line (bytes, no newline);
``decode_event`` turns a decoded JSON object back into an event. Field names are
snake_case in the native dialect; a dialect maps them (pi's camelCase lives in
``adapters/pi.py``). Unknown fields go to ``extra`` and unknown roles, block types and
entry types become the ``Unknown*`` classes, so what was read is written back unchanged.
Every failure to decode is a ``SessionError("corrupt")``: nothing read from a file can
import or run code, because classes come only from the registries below.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import cattrs
import msgspec
import orjson
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from sessiontree.domain import messages as m
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import (
    ENTRY_CLASS_BY_TYPE,
    CustomMessageAppended,
    Entry,
    SessionStarted,
    UnknownEntryAppended,
)

MAX_LINE_BYTES = 64 * 1024 * 1024
# Keys and array items a line may hold: parsed, each costs ~150 bytes of Python objects, so a
# 54 MB line of 5M keys would take ~750 MB. Only lines longer than this can reach it.
MAX_VALUES = 1_000_000
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)

# Fields never written when they are None (optional extras of a message or block).
_OMIT_NONE = {
    m.ThinkingContent: {"signature"},
    m.AssistantMessage: {"api", "usage", "error_message"},
    m.ToolResultMessage: {"details"},
    m.CustomMessage: {"details"},
}
_BLOCK_CLASSES = (m.TextContent, m.ImageContent, m.ThinkingContent, m.ToolCall)
_MESSAGE_CLASSES = (
    m.UserMessage,
    m.AssistantMessage,
    m.ToolResultMessage,
    m.CustomMessage,
    m.CompactionSummaryMessage,
    m.BranchSummaryMessage,
)
_VALUE_CLASSES = (m.Cost, m.Usage)
_ENTRY_BASE_FIELDS = ("originator_id", "originator_version", "timestamp", "id", "parent_id", "extra")


def ordered_keys(data: Mapping[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """``data`` with the keys of ``order`` first, in that order, then the others as they were."""
    out = {key: data[key] for key in order if key in data}
    if len(out) != len(data):
        out.update((key, value) for key, value in data.items() if key not in out)
    return out


class Dialect:
    """Names on the wire. The native dialect is the identity (SPEC 2.2, snake_case)."""

    name = "native"
    parent_key = "parent_id"

    def field_name(self, cls: type, name: str) -> str:
        return name

    def block_type(self, tag: str) -> str:
        return tag

    def role(self, tag: str) -> str:
        return tag

    def entry_type(self, tag: str) -> str:
        return tag

    def header_fields(self) -> tuple[str, ...]:
        return ("version", "id", "timestamp", "cwd", "parent_session", "metadata")

    def omit_none(self, cls: type) -> set[str]:
        return _OMIT_NONE.get(cls, set())

    def key_order(self, cls: type) -> tuple[str, ...] | None:
        """The order of the wire keys of a ``cls`` object, when the dialect fixes one (keys
        it does not name follow, as they come); None: the class's field order."""
        return None

    def order_value(self, value: Any, data: Any) -> Any:
        """``data``, the reference wire form of ``value`` (a message, block, usage or cost),
        in the dialect's key order (see :meth:`key_order`) and number layout (below)."""
        return data

    def order_entry(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        """An entry's wire dict in the dialect's key order, nested values included."""
        return data

    # Does the dialect put keys in an order of its own (key_order, order_value, order_entry)?
    orders_keys = False

    # How the generated encoders hand values to orjson (None: as they are): a ``float``
    # field's value, a free-form value (``Any``, ``Mapping[str, Any]``), unknown fields.
    float_writer: Callable[[float], Any] | None = None
    value_writer: Callable[[Any], Any] | None = None
    items_writer: Callable[[Any], Any] | None = None
    # (lo, hi): the float and value writers give back as it is any value that is not, and
    # does not hold, a float f with f != 0 and not lo <= |f| < hi; compiled encoders call
    # them only for the others (None: for every value).
    plain_floats: tuple[float, float] | None = None


NATIVE = Dialect()


def _corrupt(message: str) -> SessionError:
    return SessionError("corrupt", message)


def parse(line: bytes | str) -> Any:
    """One JSON value, integers of any size kept exact (orjson reads those above 64 bits as
    floats); ``ValueError`` (``msgspec.DecodeError``) or ``RecursionError`` if it is not JSON."""
    return _parse(line)


_parse = msgspec.json.Decoder().decode


def line_problem(line: bytes, *, duplicates: bool = True) -> str | None:
    """What makes a line unsafe or ambiguous to parse, checked before it is used, or None:
    over the size limit, more than ``MAX_VALUES`` keys and items, or (``duplicates``) a key
    twice in one object (parsers disagree on which value counts)."""
    if len(line) > MAX_LINE_BYTES:
        return f"line of {len(line)} bytes is over the {MAX_LINE_BYTES}-byte limit"
    if len(line) > MAX_VALUES and _values(line) > MAX_VALUES:
        return f"line holds more than {MAX_VALUES:,} keys and items (the limit that bounds a parse)"
    if duplicates:
        key = duplicate_key(line)
        if key is not None:
            return f"key {key!r} appears twice in one object (which value counts is ambiguous)"
    return None


def _values(line: bytes) -> int:
    """An upper bound on the values a parse of ``line`` makes: its commas and opening
    brackets, less those inside strings (counted in place: nothing is copied)."""
    count = line.count(b",") + line.count(b"{") + line.count(b"[")
    if count <= MAX_VALUES:
        return count
    for match in _STRING.finditer(line):
        start, end = match.span()
        count -= line.count(b",", start, end) + line.count(b"{", start, end) + line.count(b"[", start, end)
    return count


def duplicate_key(line: bytes) -> str | None:
    """A key that appears twice in one object of the JSON line, or None (also for lines that
    are not JSON: parsing reports those)."""
    try:  # the common case in one C pass: a line that re-encodes as itself has no repeats
        if orjson.dumps(orjson.loads(line)) == line:
            return None
    except (orjson.JSONDecodeError, TypeError):
        pass
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)
        if len(out) != len(items) and not found:
            seen: set[str] = set()
            found.append(next(k for k, _ in items if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
        return out

    try:
        json.loads(line, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None
    return found[0] if found else None


def loads(line: bytes | str) -> Any:
    """Parse one JSON line, mapping every failure (and :func:`line_problem`) to ``corrupt``."""
    raw = line.encode() if isinstance(line, str) else bytes(line)
    problem = line_problem(raw)
    if problem is not None:
        raise _corrupt(problem)
    try:
        return _parse(line)
    except (ValueError, RecursionError) as exc:
        raise _corrupt(f"invalid JSON ({exc})") from None


def dumps(obj: Any) -> bytes:
    """orjson's bytes for ``obj``; integers beyond 64 bits (which orjson refuses) are
    written as their exact digits."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        return orjson.dumps(exact_ints(obj))


def exact_ints(value: Any) -> Any:
    """``value`` with every int orjson cannot write replaced by its digits as raw JSON."""
    kind = type(value)
    if kind is int or (isinstance(value, int) and not isinstance(value, bool)):
        return value if -(1 << 63) <= value < (1 << 64) else orjson.Fragment(str(int(value)).encode())
    if isinstance(value, dict):
        return {key: exact_ints(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [exact_ints(item) for item in value]
    return value


class Codec:
    """Encode and decode events and messages for one dialect."""

    def __init__(self, dialect: Dialect = NATIVE) -> None:
        self.dialect = dialect
        self._conv = cattrs.Converter()
        self._wire: dict[type, dict[str, str]] = {}
        self._block_by_tag = {dialect.block_type(c.type): c for c in _BLOCK_CLASSES}
        self._message_by_role = {dialect.role(c.role): c for c in _MESSAGE_CLASSES}
        self._entry_by_type = {dialect.entry_type(t): c for t, c in ENTRY_CLASS_BY_TYPE.items()}
        self._unstructure: dict[type, Callable[[Any], dict[str, Any]]] = {}
        self._structure: dict[type, Callable[[Mapping[str, Any]], Any]] = {}
        conv = self._conv
        conv.register_structure_hook(Any, lambda v, _: v)
        # Strict scalars: cattrs would coerce ("text": 5 -> "5"), silently changing history.
        conv.register_structure_hook(str, _strict(str))
        conv.register_structure_hook(int, _strict(int))
        conv.register_structure_hook(bool, _strict(bool))
        conv.register_structure_hook(float, _strict_number)
        conv.register_structure_hook_func(lambda t: t == m.Content, lambda v, _: self.structure_block(v))
        conv.register_structure_hook_func(
            lambda t: t == (str | tuple[m.Content, ...]),
            lambda v, _: self.structure_content(v),
        )
        for cls in (*_VALUE_CLASSES, *_BLOCK_CLASSES, *_MESSAGE_CLASSES):
            self._register_value(cls)
        conv.register_unstructure_hook_func(
            lambda t: t in (m.UnknownContent, m.UnknownMessage), self._unstructure_unknown
        )
        for cls in ENTRY_CLASS_BY_TYPE.values():
            self._register_entry(cls)

    # -- generated per-class functions ----------------------------------------------

    def _names(self, cls: type) -> dict[str, str]:
        names = {
            a.name: self.dialect.field_name(cls, a.name)
            for a in attrs.fields(cls)
            if a.name not in ("extra",)
        }
        self._wire[cls] = names
        return names

    def _register_value(self, cls: type) -> None:
        conv = self._conv
        names = self._names(cls)
        overrides = {k: override(rename=v) for k, v in names.items() if k != v}
        overrides["extra"] = override(omit=True)
        # cattrs generates these on first use: building all of them costs a first open ~5 ms,
        # and the fast path (fastcodec.py) leaves most of them unused.
        made: dict[str, Callable[..., Any]] = {}

        def base_unstructure(obj: Any) -> dict[str, Any]:
            fn = made.get("u")
            if fn is None:
                fn = made["u"] = make_dict_unstructure_fn(cls, conv, **overrides)
            return fn(obj)  # type: ignore[no-any-return]

        def base_structure(data: Any, target: Any) -> Any:
            fn = made.get("s")
            if fn is None:
                fn = made["s"] = make_dict_structure_fn(cls, conv, **overrides)
            return fn(data, target)
        known = set(names.values())
        omit = {names[k] for k in self.dialect.omit_none(cls)}
        tag_key, tag = None, None
        if hasattr(cls, "role"):
            tag_key, tag = "role", self.dialect.role(cls.role)
        elif cls in _BLOCK_CLASSES:
            tag_key, tag = "type", self.dialect.block_type(cls.type)
        if tag_key:
            known.add(tag_key)

        optional = {
            wire for name, wire in names.items() if attrs.fields_dict(cls)[name].default is not attrs.NOTHING
        }

        def unstructure(obj: Any) -> dict[str, Any]:
            body = base_unstructure(obj)
            out = {tag_key: tag} if tag_key else {}
            extra = obj.extra
            absent = m.absent_fields(extra)
            for key, value in body.items():
                if (value is None and key in omit) or key in absent:
                    continue
                out[key] = value
            if extra:
                out.update(extra)
            return out

        def structure(data: Any, _: Any = None) -> Any:
            if not isinstance(data, Mapping):
                raise _corrupt(f"expected an object for {cls.__name__}, got {data!r:.80}")
            obj = base_structure(data, cls)
            unknown = data.keys() - known
            missing = optional - data.keys()
            if unknown or missing:
                extra = m.Extra({k: data[k] for k in data if k in unknown}, frozenset(missing))
                object.__setattr__(obj, "extra", extra)
            return obj

        self._unstructure[cls] = unstructure
        self._structure[cls] = structure
        # By predicate: registering by class makes cattrs resolve the class's annotations
        # (typing.get_type_hints) now, ~1 ms of a first open for hooks it rarely calls.
        # (Subclasses too, as class registration would: an app's subclass of a block or a
        # message is written as its class.)
        conv.register_unstructure_hook_func(lambda t, c=cls: isinstance(t, type) and issubclass(t, c), unstructure)
        conv.register_structure_hook_func(lambda t, c=cls: isinstance(t, type) and issubclass(t, c), structure)

    def _unstructure_unknown(self, obj: Any) -> dict[str, Any]:
        return dict(obj.data)  # it holds every wire field, its tag included (domain/messages.py)

    def _register_entry(self, cls: type[Entry]) -> None:
        conv = self._conv
        names = {
            a.name: self.dialect.field_name(cls, a.name)
            for a in attrs.fields(cls)
            if a.name not in _ENTRY_BASE_FIELDS
        }
        self._wire[cls] = names

        def unstructure(event: Any) -> dict[str, Any]:
            out: dict[str, Any] = {
                "type": self.dialect.entry_type(cls.type),
                "id": event.id,
                self.dialect.parent_key: event.parent_id,
                "timestamp": event.timestamp,
            }
            extra = event.extra
            absent = m.absent_fields(extra)
            for name, wire in names.items():
                if wire in absent:
                    continue
                out[wire] = self.unstructure_value(getattr(event, name))
            if extra:
                out.update(extra)
            return out

        self._unstructure[cls] = unstructure
        del conv  # entries are assembled by hand around cattrs-made values

    # -- values -----------------------------------------------------------------------

    def unstructure_value(self, value: Any) -> Any:
        if value is None or isinstance(value, (str, int, float, bool)):
            return value
        if isinstance(value, tuple):
            return [self.unstructure_value(v) for v in value]
        fn = self._unstructure.get(type(value))
        if fn is not None:
            return fn(value)
        if isinstance(value, (m.UnknownContent, m.UnknownMessage)):
            return self._unstructure_unknown(value)
        return self._conv.unstructure(value)

    def structure_block(self, data: Any) -> Any:
        if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
            raise _corrupt(f"content block must be an object with a string 'type': {data!r:.80}")
        cls = self._block_by_tag.get(data["type"])
        if cls is None:
            return m.UnknownContent(type=data["type"], data=dict(data))
        return self._structure[cls](data)

    def structure_content(self, data: Any, *, allow_str: bool = True) -> Any:
        if isinstance(data, str) and allow_str:
            return data
        if not isinstance(data, list):
            raise _corrupt(f"content must be {'a string or ' if allow_str else ''}a list: {data!r:.80}")
        return tuple(self.structure_block(b) for b in data)

    def structure_message(self, data: Any) -> Any:
        if not isinstance(data, Mapping) or not isinstance(data.get("role"), str):
            raise _corrupt(f"message must be an object with a string 'role': {data!r:.80}")
        cls = self._message_by_role.get(data["role"])
        if cls is None:
            return m.UnknownMessage(role=data["role"], data=dict(data))
        return self._structure[cls](data)

    def structure_usage(self, data: Any) -> m.Usage | None:
        if data is None:
            return None
        return self._structure[m.Usage](data)  # type: ignore[no-any-return]

    # -- events -----------------------------------------------------------------------

    def unstructure_event(self, event: Any) -> dict[str, Any]:
        if isinstance(event, SessionStarted):
            return self.unstructure_header(event)
        if isinstance(event, UnknownEntryAppended):
            return dict(event.data)
        return self._unstructure[type(event)](event)

    def unstructure_header(self, header: SessionStarted) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "session"}
        for name in self.dialect.header_fields():
            value = header.originator_id if name == "id" else getattr(header, name)
            wire = self.dialect.field_name(SessionStarted, name)
            if value is None and wire in getattr(self.dialect, "omit_header_none", ()):
                continue
            out[wire] = value
        if header.extra:
            out.update(header.extra)
        return out

    def encode_event(self, event: Any) -> bytes:
        """One JSON line (no newline) for an event (the generated fast path for entries)."""
        if isinstance(event, SessionStarted):
            return self.reference_encode(event)
        fast = self.__dict__.get("_fast") or self.fast
        return fast.encode_entry(event)  # type: ignore[no-any-return]

    def decode(self, data: Any, session_id: str, version: int) -> Any:
        """An event from a parsed JSON object: the header at version 1, else an entry.

        Uses the generated fast path; its results and errors equal :meth:`decode_entry`'s.
        """
        if version == 1:
            return self.decode_header(data)
        fast = self.__dict__.get("_fast") or self.fast
        return fast.decode_entry(data, session_id, version)

    @property
    def fast(self) -> Any:
        """The generated fast path (``adapters/fastcodec.py``), built on first use."""
        fast = self.__dict__.get("_fast")
        if fast is None:
            from sessiontree.adapters.fastcodec import fast_codec

            fast = fast_codec(self)
        return fast

    def reference_encode(self, event: Any) -> bytes:
        """The cattrs reference encoder (the fast path must give the same bytes)."""
        try:
            return dumps(self.unstructure_event(event))
        except TypeError as exc:
            raise SessionError(
                "invalid_entry", f"entry {getattr(event, 'id', '?')!r} is not JSON-serialisable: {exc}"
            ) from None

    def decode_header(self, data: Any) -> SessionStarted:
        if not isinstance(data, dict) or data.get("type") != "session":
            raise _corrupt("the first line is not a session header")
        sid = data.get("id")
        if not isinstance(sid, str) or not sid:  # a damaged header is corrupt before it is unsupported
            raise _corrupt("session header has no string 'id'")
        version = data.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool):
            raise _corrupt(f"session header version {version!r} is not a number")
        if version != 3:
            raise SessionError("unsupported_version", f"session format version {version} is not supported")
        return self.header_from(data, version, lambda extra: extra)

    def header_from(self, data: dict[str, Any], version: int, extra: Callable[[dict[str, Any]], Any]) -> SessionStarted:
        """The header event of a header line whose type and version were checked: its id,
        timestamp, cwd, parent session and metadata checked, the fields this dialect does not
        know passed to ``extra`` (which makes the event's ``extra``)."""
        f = self.dialect.field_name
        sid = data.get("id")
        if not isinstance(sid, str) or not sid:
            raise _corrupt("session header has no string 'id'")
        parent_key = f(SessionStarted, "parent_session")
        timestamp = data.get("timestamp")
        cwd = data.get(f(SessionStarted, "cwd"), "")
        parent = data.get(parent_key)
        metadata = data.get(f(SessionStarted, "metadata"), {})
        if not isinstance(timestamp, str):
            raise _corrupt("session header has no string 'timestamp'")
        if not isinstance(cwd, str) or (parent is not None and not isinstance(parent, str)):
            raise _corrupt(f"session header 'cwd' / '{parent_key}' must be strings")
        if not isinstance(metadata, dict):
            raise _corrupt("session header 'metadata' must be an object")
        known = {"type", "version", *(f(SessionStarted, n) for n in self.dialect.header_fields())}
        return SessionStarted(
            originator_id=sid,
            originator_version=1,
            timestamp=timestamp,
            cwd=cwd,
            version=version,
            parent_session=parent,
            metadata=metadata,
            extra=extra({k: v for k, v in data.items() if k not in known}),
        )

    def decode_entry(self, data: Any, session_id: str, version: int) -> Entry:
        """An entry event from a parsed JSON object (``version``: its place in the log)."""
        if not isinstance(data, dict):
            raise _corrupt("an entry line must be a JSON object")
        tag = data.get("type")
        entry_id = data.get("id")
        parent = data.get(self.dialect.parent_key)
        timestamp = data.get("timestamp")
        if not isinstance(tag, str):
            raise _corrupt("entry has no string 'type'")
        if not isinstance(entry_id, str) or not entry_id:
            raise _corrupt(f"{tag} entry has no string 'id'")
        if self.dialect.parent_key not in data or (parent is not None and not isinstance(parent, str)):
            raise _corrupt(f"entry {entry_id!r} has no '{self.dialect.parent_key}' (string or null)")
        if not isinstance(timestamp, str):
            raise _corrupt(f"entry {entry_id!r} has no string 'timestamp'")
        base = {
            "originator_id": session_id,
            "originator_version": version,
            "timestamp": timestamp,
            "id": entry_id,
            "parent_id": parent,
        }
        cls = self._entry_by_type.get(tag)
        if cls is None:
            return UnknownEntryAppended(type=tag, data=data, **base)
        names = self._wire[cls]
        known = {"type", "id", self.dialect.parent_key, "timestamp", *names.values()}
        try:
            fields = self._entry_fields(cls, names, data, entry_id)
            unknown = data.keys() - known
            missing = frozenset(wire for wire in names.values() if wire not in data)
            extra = m.Extra({k: data[k] for k in data if k in unknown}, missing) if unknown or missing else {}
            return cls(extra=extra, **base, **fields)
        except (SessionError, TypeError, ValueError, KeyError, cattrs.BaseValidationError) as exc:
            raise _corrupt(f"{tag} entry {entry_id!r} is malformed: {_first_error(exc)}") from None

    def _entry_fields(
        self, cls: type[Entry], names: dict[str, str], data: dict[str, Any], entry_id: str
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for attr in attrs.fields(cls):
            name = attr.name
            if name not in names:
                continue
            wire = names[name]
            if wire not in data:
                if attr.default is attrs.NOTHING:
                    raise _corrupt(f"{cls.type} entry {entry_id!r} has no '{wire}'")
                continue
            fields[name] = self._entry_value(cls, name, data[wire], entry_id)
        return fields

    def _entry_value(self, cls: type, name: str, value: Any, entry_id: str) -> Any:
        if name == "message":
            return self.structure_message(value)
        if name == "usage":
            return self.structure_usage(value)
        if name == "retained_tail":
            if value is None:
                return None
            if not isinstance(value, list):
                raise _corrupt(f"entry {entry_id!r}: retained_tail must be a list or null")
            return tuple(self.structure_message(v) for v in value)
        if name == "content" and cls is CustomMessageAppended:
            return self.structure_content(value)
        if name == "active_tool_names":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise _corrupt(f"entry {entry_id!r}: active_tool_names must be a list of strings")
            return tuple(value)
        annotation = field_annotation(cls, name)
        if annotation == "str":
            if not isinstance(value, str):
                raise _corrupt(f"entry {entry_id!r}: '{name}' must be a string, not {value!r:.40}")
        elif annotation == "str | None":
            if value is not None and not isinstance(value, str):
                raise _corrupt(f"entry {entry_id!r}: '{name}' must be a string or null")
        elif name == "tokens_before":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _corrupt(f"entry {entry_id!r}: tokens_before must be a number")
        elif name in ("from_hook", "display"):
            if not isinstance(value, bool):
                raise _corrupt(f"entry {entry_id!r}: '{name}' must be a boolean")
        return value

    def decode_line(self, line: bytes | str, session_id: str, version: int) -> Any:
        return self.decode(loads(line), session_id, version)

    def message_to_dict(self, message: Any) -> dict[str, Any]:
        """A message as its wire dict (used for ``--json`` context output)."""
        return self.unstructure_value(message)  # type: ignore[no-any-return]

    def message_from_dict(self, data: Any) -> Any:
        return self.structure_message(data)


def _strict(kind: type) -> Callable[[Any, Any], Any]:
    def check(value: Any, _: Any) -> Any:
        if type(value) is not kind:
            raise _corrupt(f"expected {kind.__name__}, got {value!r:.40}")
        return value

    return check


def _strict_number(value: Any, _: Any) -> Any:
    """A JSON number for a float field, kept as written (0 stays 0, so bytes round-trip)."""
    if type(value) not in (int, float):
        raise _corrupt(f"expected a number, got {value!r:.40}")
    return value


def field_annotation(cls: type, name: str) -> str:
    """A field's annotation as written in the domain class (``"str | None"``, ...)."""
    for klass in cls.__mro__:
        annotations = klass.__dict__.get("__annotations__", {})
        if name in annotations:
            value = annotations[name]
            return value if isinstance(value, str) else getattr(value, "__name__", str(value))
    raise TypeError(f"{cls.__name__}.{name} has no annotation")


def _first_error(exc: BaseException) -> str:
    if isinstance(exc, cattrs.BaseValidationError) and exc.exceptions:
        return _first_error(exc.exceptions[0])
    if isinstance(exc, SessionError):
        return exc.message
    if isinstance(exc, KeyError):
        return f"missing field {exc}"
    return str(exc) or type(exc).__name__


_NATIVE_CODEC: Codec | None = None


def native_codec() -> Codec:
    """The shared codec of the native dialect."""
    global _NATIVE_CODEC
    if _NATIVE_CODEC is None:
        _NATIVE_CODEC = Codec(NATIVE)
    return _NATIVE_CODEC
