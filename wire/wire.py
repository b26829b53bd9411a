"""Reading a line: msgspec's typed path for the common case, and the complete path for any other line.

The typed path (:class:`WireDecoder`): the structs are derived from the schemas (wire names, tags, unknown fields
forbidden). A field the dialect's writer always writes is required, and a field it leaves out when None may be left out
but not be ``null``, so that a struct is exactly a line as its writer lays it out: msgspec checks the JSON and every
type, and each struct becomes its domain object through the class's own constructor, written out once per class below
(the constructors check nothing twice).

The complete path (:class:`Structurer`): a parsed line (dicts and lists) into domain objects, driven by the same
schemas. It reads what the typed path refuses (a field left out or ``null`` where the writer would not do that):
unknown fields (kept in ``extra``), unknown roles, block and entry types (kept whole in the Unknown* classes), and
values of the wrong type, for which it raises ``SessionError("corrupt")`` naming the entry and the field. Known fields
the line leaves out are remembered (``absent``) and so are ``null``s the dialect's writer would have left out
(``nulls``), so that writing the value back gives the line again (``tests/wire/test_codec_paths.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Union

import msgspec
from msgspec import UNSET

from sessiontree.domain import events as ev
from sessiontree.domain import messages as m
from sessiontree.domain.errors import SessionError
from sessiontree.wire.schema import BLOCK_CLASSES, MESSAGE_CLASSES, Field, Schema, default_of

_PLAIN: dict[str, Any] = {
    "str": str, "int": int, "number": Union[int, float], "bool": bool, "opt_str": Union[str, None],  # noqa: UP007
    "free": Any, "object": dict[str, Any], "names": list[str], "envelope_parent": Union[str, None],  # noqa: UP007
}
# A field its writer leaves out when None, as the typed path takes it: any value but null.
_NOT_NULL: dict[str, Any] = {
    "opt_str": str, "free": Union[dict[str, Any], list[Any], str, int, float, bool],  # noqa: UP007
}


class WireDecoder:
    """Typed decoding of one dialect's entry lines (see the module documentation)."""

    def __init__(self, schemas: Mapping[type, Schema], chain_key: str | None) -> None:
        self._schemas = schemas
        self._structs: dict[type, type] = {}
        self._convert: dict[type, Callable[..., Any]] = {}
        self._chain_key = chain_key
        self._blocks = Union[tuple(self._struct(c) for c in BLOCK_CLASSES)]  # noqa: UP007 - a union built at run time
        self._messages = Union[tuple(self._struct(c) for c in MESSAGE_CLASSES)]  # noqa: UP007 - a union built at run time
        entries = [self._struct(cls) for cls in schemas if issubclass(cls, ev.Entry)]
        # the two halves of ``decode``, which the codec calls itself (one Python call fewer per line): the struct a line
        # holds (msgspec.DecodeError outside the typed shape), and by struct type the call that makes its entry
        self.decode_struct = self._decode = msgspec.json.Decoder(Union[tuple(entries)]).decode  # noqa: UP007 - a union
        self.makers = self._convert

    def struct_of(self, cls: type) -> type:
        """The wire struct of a class (the writer builds the same structs: ``encoders.py``)."""
        return self._struct(cls)

    def decode(self, line: bytes, session_id: str, version: int) -> tuple[Any, Any] | None:
        """The entry a line holds and its struct, or None when it is outside the typed shape."""
        try:
            struct = self._decode(line)
        except (msgspec.DecodeError, RecursionError):
            return None
        if not struct.id:  # an empty id is corrupt: the complete reading says so
            return None
        return self._convert[type(struct)](struct, self._convert, session_id, version), struct

    def _type(self, field: Field) -> Any:
        kind = field.kind
        if field.omit_none and kind in _NOT_NULL:
            return _NOT_NULL[kind]
        if kind in _PLAIN:
            return _PLAIN[kind]
        if kind in ("value", "opt_value"):
            # the ignore below: value fields always name their nested class
            struct = self._struct(field.nested)  # type: ignore[arg-type]
            return struct if kind == "value" or field.omit_none else Union[struct, None]  # noqa: UP007
        if kind == "blocks":
            # the ignore below: a type made at run time, which msgspec reads
            return list[self._blocks]  # type: ignore[name-defined]
        if kind == "content":
            return Union[str, list[self._blocks]]  # type: ignore[name-defined]  # noqa: UP007
        if kind == "message":
            return self._messages
        messages = list[self._messages]  # type: ignore[name-defined]  # "messages"
        return messages if field.omit_none else Union[messages, None]  # noqa: UP007

    def _struct(self, cls: type) -> type:
        found = self._structs.get(cls)
        if found is not None:
            return found
        schema = self._schemas[cls]
        fields: list[Any] = [(f.name, self._type(f), UNSET) if f.omit_none else (f.name, self._type(f)) for f in schema.fields]
        rename = {f.name: f.wire for f in schema.fields}
        if issubclass(cls, ev.Entry) and self._chain_key:
            fields.append(("chain_", str, UNSET))  # the hash chain's field, read past here
            rename["chain_"] = self._chain_key
        options: dict[str, Any] = {"tag_field": schema.tag_key, "tag": schema.tag} if schema.tag_key else {}
        struct = msgspec.defstruct(
            cls.__name__, fields, rename=rename, forbid_unknown_fields=True, kw_only=True, **options
        )
        self._structs[cls] = struct
        self._convert[struct] = _MAKE[cls.__name__]
        return struct


# Each class's constructor, called with its struct's fields. A field a dialect's writer leaves out when None is UNSET
# when the line left it out (``_none``); a nested struct goes through its own class's maker (``c``, by struct class).
Convert = Mapping[type, Callable[..., Any]]


def _none(value: Any) -> Any:
    return None if value is UNSET else value


def _each(items: Any, c: Convert) -> tuple[Any, ...]:
    return tuple([c[x.__class__](x, c) for x in items])


def _content(value: Any, c: Convert) -> Any:
    return value if value.__class__ is str else tuple([c[x.__class__](x, c) for x in value])


def _usage(value: Any, c: Convert) -> Any:
    return None if value is UNSET or value is None else c[value.__class__](value, c)


def _tail(value: Any, c: Convert) -> Any:
    return None if value is UNSET or value is None else tuple([c[x.__class__](x, c) for x in value])


_MAKE: dict[str, Callable[..., Any]] = {  # values: (struct, c); entries: (struct, c, session id, version)
    "TextContent": lambda s, c: m.TextContent(s.text),
    "ImageContent": lambda s, c: m.ImageContent(s.data, s.mime_type),
    "ThinkingContent": lambda s, c: m.ThinkingContent(s.thinking, signature=_none(s.signature)),
    "ToolCall": lambda s, c: m.ToolCall(id=s.id, name=s.name, arguments=s.arguments),
    "Cost": lambda s, c: m.Cost(
        input=s.input, output=s.output, cache_read=s.cache_read, cache_write=s.cache_write, total=s.total
    ),
    "Usage": lambda s, c: m.Usage(
        input=s.input, output=s.output, cache_read=s.cache_read, cache_write=s.cache_write,
        total_tokens=s.total_tokens, cost=c[s.cost.__class__](s.cost, c),
    ),
    "UserMessage": lambda s, c: m.UserMessage(_content(s.content, c), timestamp=s.timestamp),
    "AssistantMessage": lambda s, c: m.AssistantMessage(
        _each(s.content, c), provider=s.provider, model=s.model, api=_none(s.api), usage=_usage(s.usage, c),
        stop_reason=s.stop_reason, error_message=_none(s.error_message), timestamp=s.timestamp,
    ),
    "ToolResultMessage": lambda s, c: m.ToolResultMessage(
        _each(s.content, c), tool_call_id=s.tool_call_id, tool_name=s.tool_name, is_error=s.is_error,
        details=_none(s.details), timestamp=s.timestamp,
    ),
    "CustomMessage": lambda s, c: m.CustomMessage(
        _content(s.content, c), custom_type=s.custom_type, display=s.display, details=_none(s.details),
        timestamp=s.timestamp,
    ),
    "CompactionSummaryMessage": lambda s, c: m.CompactionSummaryMessage(
        summary=s.summary, tokens_before=s.tokens_before, timestamp=s.timestamp
    ),
    "BranchSummaryMessage": lambda s, c: m.BranchSummaryMessage(
        summary=s.summary, from_id=s.from_id, timestamp=s.timestamp
    ),
    "MessageAppended": lambda s, c, sid, v: ev.MessageAppended(
        originator_id=sid, originator_version=v, timestamp=s.timestamp, id=s.id, parent_id=s.parent_id,
        message=c[s.message.__class__](s.message, c),
    ),
    "ThinkingLevelChanged": lambda s, c, sid, v: ev.ThinkingLevelChanged(
        originator_id=sid, originator_version=v, timestamp=s.timestamp, id=s.id, parent_id=s.parent_id,
        thinking_level=s.thinking_level,
    ),
    "ModelChanged": lambda s, c, sid, v: ev.ModelChanged(
        originator_id=sid, originator_version=v, timestamp=s.timestamp, id=s.id, parent_id=s.parent_id,
        provider=s.provider, model_id=s.model_id,
    ),
    "ActiveToolsChanged": lambda s, c, sid, v: ev.ActiveToolsChanged(
        originator_id=sid, originator_version=v, timestamp=s.timestamp, id=s.id, parent_id=s.parent_id,
        active_tool_names=tuple(s.active_tool_names),
    ),
    "ContextCompacted": lambda s, c, sid, v: ev.ContextCompacted(
        originator_id=sid, originator_version=v, timestamp=s.timestamp, id=s.id, parent_id=s.parent_id,
        summary=s.summary, first_kept_entry_id=s.first_kept_entry_id, tokens_before=s.tokens_before,
        retained_tail=_tail(s.retained_tail, c), details=_none(s.details), usage=_usage(s.usage, c),
        from_hook=s.from_hook,
    ),
    "BranchSummarized": lambda s, c, sid, v: ev.BranchSummarized(
        originator_id=sid, originator_version=v, timestamp=s.timestamp, id=s.id, parent_id=s.parent_id,
        from_id=s.from_id, summary=s.summary, details=_none(s.details), usage=_usage(s.usage, c), from_hook=s.from_hook,
    ),
    "CustomEntryAppended": lambda s, c, sid, v: ev.CustomEntryAppended(
        originator_id=sid, originator_version=v, timestamp=s.timestamp, id=s.id, parent_id=s.parent_id,
        custom_type=s.custom_type, data=_none(s.data),
    ),
    "CustomMessageAppended": lambda s, c, sid, v: ev.CustomMessageAppended(
        originator_id=sid, originator_version=v, timestamp=s.timestamp, id=s.id, parent_id=s.parent_id,
        custom_type=s.custom_type, content=_content(s.content, c), details=_none(s.details), display=s.display,
    ),
    "LabelChanged": lambda s, c, sid, v: ev.LabelChanged(
        originator_id=sid, originator_version=v, timestamp=s.timestamp, id=s.id, parent_id=s.parent_id,
        target_id=s.target_id, label=_none(s.label),
    ),
    "SessionRenamed": lambda s, c, sid, v: ev.SessionRenamed(
        originator_id=sid, originator_version=v, timestamp=s.timestamp, id=s.id, parent_id=s.parent_id,
        name=_none(s.name),
    ),
    "LeafMoved": lambda s, c, sid, v: ev.LeafMoved(
        originator_id=sid, originator_version=v, timestamp=s.timestamp, id=s.id, parent_id=s.parent_id,
        target_id=s.target_id,
    ),
}


class Malformed(Exception):
    """A value of the wrong type, or a missing field (turned into ``corrupt`` by the caller)."""


_SCALARS = {"str": (str,), "int": (int,), "bool": (bool,), "number": (int, float), "opt_str": (str, type(None))}
_WHAT = {"str": "a string", "int": "an integer", "bool": "a boolean", "number": "a number", "opt_str": "a string or null",
         "object": "an object", "names": "a list of strings"}


class Structurer:
    """Dicts to domain objects for one dialect (see the module documentation)."""

    def __init__(self, schemas: Mapping[type, Schema], parent_key: str) -> None:
        self._schemas = schemas
        self._parent_key = parent_key
        self._blocks = {schemas[c].tag: schemas[c] for c in BLOCK_CLASSES}
        self._messages = {schemas[c].tag: schemas[c] for c in MESSAGE_CLASSES}
        self._entries = {schemas[c].tag: schemas[c] for c in ev.ENTRY_CLASSES}

    def entry(self, data: Any, session_id: str, version: int) -> ev.Entry:
        """An entry event from a parsed line (``version``: its place in the log)."""
        tag, entry_id = self._envelope(data)
        schema = self._entries.get(tag)
        if schema is None:
            return ev.UnknownEntryAppended(
                originator_id=session_id, originator_version=version, timestamp=data["timestamp"], id=entry_id,
                parent_id=data[self._parent_key], type=tag, data=data,
            )
        try:
            fields, extra = self._fields(schema, data)
        except Malformed as exc:
            raise SessionError("corrupt", f"{tag} entry {entry_id!r} is malformed: {exc}") from None
        # the ignore below: schema.cls is a plain type; it makes an Entry
        return schema.cls(originator_id=session_id, originator_version=version, extra=extra, **fields)  # type: ignore[no-any-return]

    def _envelope(self, data: Any) -> tuple[str, str]:
        if not isinstance(data, dict):
            raise SessionError("corrupt", "an entry line must be a JSON object")
        tag, entry_id, pk = data.get("type"), data.get("id"), self._parent_key
        if not isinstance(tag, str):
            raise SessionError("corrupt", "entry has no string 'type'")
        if not isinstance(entry_id, str) or not entry_id:
            raise SessionError("corrupt", f"{tag} entry has no string 'id'")
        if pk not in data or (data[pk] is not None and not isinstance(data[pk], str)):
            raise SessionError("corrupt", f"entry {entry_id!r} has no '{pk}' (string or null)")
        if not isinstance(data.get("timestamp"), str):
            raise SessionError("corrupt", f"entry {entry_id!r} has no string 'timestamp'")
        return tag, entry_id

    def value(self, cls: type, data: Any) -> Any:
        schema = self._schemas[cls]
        if not isinstance(data, dict):
            raise Malformed(f"expected an object for {cls.__name__}, got {data!r:.80}")
        fields, extra = self._fields(schema, data)
        try:
            return cls(**fields, extra=extra)
        except (TypeError, ValueError) as exc:
            raise Malformed(str(exc)) from None

    def block(self, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise Malformed(f"content block must be an object with a string 'type': {data!r:.80}")
        schema = self._blocks.get(data["type"])
        return m.UnknownContent(type=data["type"], data=dict(data)) if schema is None else self.value(schema.cls, data)

    def message(self, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("role"), str):
            raise Malformed(f"message must be an object with a string 'role': {data!r:.80}")
        schema = self._messages.get(data["role"])
        return m.UnknownMessage(role=data["role"], data=dict(data)) if schema is None else self.value(schema.cls, data)

    def content(self, data: Any, *, allow_str: bool = True) -> Any:
        if isinstance(data, str) and allow_str:
            return data
        if not isinstance(data, list):
            raise Malformed(f"content must be {'a string or ' if allow_str else ''}a list: {data!r:.80}")
        return tuple(self.block(b) for b in data)

    def _fields(self, schema: Schema, data: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        out: dict[str, Any] = {}
        absent, nulls = [], []
        for f in schema.fields:
            if f.wire not in data:
                if f.required:
                    raise Malformed(f"no '{f.wire}'")
                if not f.omit_none:  # left out is how its writer writes None: nothing to remember
                    absent.append(f.name)
                out[f.name] = default_of(f)
                continue
            value = data[f.wire]
            if value is None and f.omit_none:
                nulls.append(f.name)
            out[f.name] = self._field(f, value)
        unknown = data.keys() - schema.known
        if not (unknown or absent or nulls):
            return out, m.NO_EXTRA
        return out, m.Extra({k: data[k] for k in data if k in unknown}, frozenset(absent), frozenset(nulls))

    def _field(self, f: Field, value: Any) -> Any:
        kind = f.kind
        if kind in _SCALARS or kind == "envelope_parent":
            number = kind == "number" and type(value) in (int, float)
            if value.__class__ not in _SCALARS.get(kind, (str, type(None))) and not number:
                raise Malformed(f"'{f.wire}' must be {_WHAT.get(kind, 'a string or null')}, not {value!r:.40}")
            return value
        if kind == "free":
            return value
        if kind == "object":
            if not isinstance(value, dict):
                raise Malformed(f"'{f.wire}' must be an object, not {value!r:.40}")
            return value
        if kind == "names":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise Malformed(f"'{f.wire}' must be a list of strings")
            return tuple(value)
        if kind == "value" or (kind == "opt_value" and value is not None):
            # the ignore below: value fields always name their nested class (schema.py)
            return self.value(f.nested, value)  # type: ignore[arg-type]
        if kind in ("blocks", "content"):
            return self.content(value, allow_str=kind == "content")
        if kind == "message":
            return self.message(value)
        if kind == "messages" and value is not None:
            if not isinstance(value, list):
                raise Malformed(f"'{f.wire}' must be a list or null")
            return tuple(self.message(v) for v in value)
        return value  # a None opt_value or messages
