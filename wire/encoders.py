"""Writing: a value to the wire structs of its dialect, then to JSON by msgspec.

The structs are the ones ``wire.py`` reads with (the dialect's names, tags and key order); each class's struct is
built by one call written out below, with the fields its writer leaves out when None set to ``UNSET`` (which msgspec
leaves out). A value that carries what the structs cannot say (fields its producer added, or left out where the
writer would write them: its ``extra``), an unknown role or block type, or an app's subclass is written through
:meth:`Encoders.wire`, the wire dict made from the schema field by field. ``Writers`` says how a dialect lays out
numbers and free-form values (pi lays them out as JavaScript does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import msgspec
from msgspec import UNSET

from sessiontree.domain import messages as m
from sessiontree.domain.errors import SessionError
from sessiontree.wire.schema import Schema, default_of

Encode = Callable[[Any], Any]
_NONE = m.NO_EXTRA


class Writers:
    """How a dialect hands numbers and free-form values to msgspec (pi lays out its numbers as JavaScript does)."""

    number: Encode | None = None  # a float field's value
    free: Encode | None = None  # a free-form value (details, data, arguments)
    items: Encode | None = None  # the unknown fields of an object


class _Slow(Exception):
    """A value the structs cannot say (see the module documentation): written as its wire dict."""


class Encoders:
    """The writer of one dialect: ``line(value)`` gives its JSON, ``wire(value)`` its wire dict."""

    def __init__(self, schemas: Mapping[type, Schema], structs: Callable[[type], type], writers: Writers | None = None) -> None:
        writers = writers or Writers()
        self._schemas = schemas
        self._structs = structs
        self.number: Encode = writers.number or _same
        self.free: Encode = writers.free or _same
        self._items = writers.items
        self._encode = msgspec.json.Encoder().encode
        # Entry fields this dialect's writer leaves out when None (pi's; the native writer writes them as null).
        self._omit = frozenset((c.__name__, f.name) for c, schema in schemas.items() for f in schema.fields if f.omit_none)

    def omitted(self, cls: str, name: str, value: Any) -> Any:
        """``value``, or UNSET when it is None and this dialect's writer leaves the field out then."""
        return UNSET if value is None and (cls, name) in self._omit else value

    def __getattr__(self, name: str) -> type:
        """The struct of the class ``name`` (made on first use, then an attribute: the calls below read it as one)."""
        cls = next((c for c in self._schemas if c.__name__ == name), None)
        if cls is None:
            raise AttributeError(name)
        struct = self._structs(cls)
        setattr(self, name, struct)
        return struct

    def line(self, value: Any) -> bytes:
        """The JSON of a message, block, usage, cost or entry."""
        try:
            return self._encode(self.fast(value))
        except _Slow:
            return self._encode(self.wire(value))

    def fast(self, value: Any) -> Any:
        """The struct of a value (``_Slow`` when its struct cannot say it)."""
        make = _STRUCT.get(value.__class__.__name__)
        if make is None or value.__class__ not in self._schemas:
            raise _Slow
        extra = value.extra
        if extra is not _NONE and (extra.__class__ is not dict or extra):
            raise _Slow
        return make(value, self)

    def wire(self, value: Any) -> Any:
        """The wire dict of a value, field by field from its schema."""
        cls = value.__class__
        if cls not in self._schemas:
            if isinstance(value, (m.UnknownContent, m.UnknownMessage)):
                return self.free(dict(value.data))
            cls = next((c for c in self._schemas if isinstance(value, c)), None)
            if cls is None:  # an app's subclass of a block or a message is written as its class
                raise TypeError(f"cannot write {type(value).__name__} values")
            own = sorted(attrs.fields_dict(value.__class__).keys() - attrs.fields_dict(cls).keys())
            if own:  # the line of its class has no place for them: read back, the value would have lost them
                raise SessionError("invalid_entry", f"{value.__class__.__name__} is written as {cls.__name__}, which "
                                   f"has no field {', '.join(map(repr, own))}")
        schema = self._schemas[cls]
        out: dict[str, Any] = {schema.tag_key: schema.tag} if schema.tag_key else {}
        extra = value.extra
        nulls, absent = getattr(extra, "nulls", ()), getattr(extra, "absent", ())
        for f in schema.fields:
            item = getattr(value, f.name)
            if item is None and f.omit_none and f.name not in nulls:
                continue
            if f.name in absent and not f.required and item == default_of(f):
                continue  # its producer left it out: so is it again, while it holds its default
            out[f.wire] = self._field(f.kind, item)
        if extra:
            refuse_clash(out, extra, cls.__name__)
            out.update(extra if self._items is None else self._items(extra))
        return out

    def _field(self, kind: str, item: Any) -> Any:
        if item is None:
            return None
        if kind in ("value", "opt_value", "message"):
            return self.wire(item)
        if kind in ("blocks", "messages") or (kind == "content" and item.__class__ is not str):
            return [self.wire(x) for x in item]
        if kind == "names":
            return list(item)
        if kind == "number":
            return self.number(item)
        if kind in ("free", "object"):
            return self.free(item)
        return item


def refuse_clash(known: Any, extra: Any, what: str) -> None:
    """Refuse unknown fields named like a known one (of ``known``, the keys the writer wrote): written after them, one
    would replace that field's value in the line. Reading never makes such an ``extra``; only a value built so can."""
    clash = next((key for key in extra if key in known), None)
    if clash is not None:
        raise SessionError("invalid_entry", f"{what}: the unknown field {clash!r} names a known field")


def _same(value: Any) -> Any:
    return value


def _unset(value: Any) -> Any:  # a field its writer leaves out when None
    return UNSET if value is None else value


def _blocks(items: Any, k: Encoders) -> list[Any]:
    return [k.fast(x) for x in items]


def _content(value: Any, k: Encoders) -> Any:
    return value if value.__class__ is str else [k.fast(x) for x in value]


def _cost(o: Any, k: Encoders) -> Any:
    n = k.number
    return k.Cost(input=n(o.input), output=n(o.output), cache_read=n(o.cache_read),
                            cache_write=n(o.cache_write), total=n(o.total))


def _usage(o: Any, k: Encoders) -> Any:
    return k.Usage(input=o.input, output=o.output, cache_read=o.cache_read, cache_write=o.cache_write,
                             total_tokens=o.total_tokens, cost=k.fast(o.cost))


def _or_none(o: Any, k: Encoders) -> Any:
    return None if o is None else k.fast(o)


def _tail(o: Any, k: Encoders) -> Any:
    return None if o is None else [k.fast(x) for x in o]


def _opt_usage(o: Any, k: Encoders) -> Any:
    return UNSET if o is None else k.fast(o)


# One struct per class, made by a call written out once (the inverse of wire.py's makers).
_STRUCT: dict[str, Callable[[Any, Encoders], Any]] = {
    "TextContent": lambda o, k: k.TextContent(text=o.text),
    "ImageContent": lambda o, k: k.ImageContent(data=o.data, mime_type=o.mime_type),
    "ThinkingContent": lambda o, k: k.ThinkingContent(thinking=o.thinking, signature=_unset(o.signature)),
    "ToolCall": lambda o, k: k.ToolCall(id=o.id, name=o.name, arguments=k.free(o.arguments)),
    "Cost": _cost,
    "Usage": _usage,
    "UserMessage": lambda o, k: k.UserMessage(content=_content(o.content, k), timestamp=o.timestamp),
    "AssistantMessage": lambda o, k: k.AssistantMessage(
        content=_blocks(o.content, k), provider=o.provider, model=o.model, api=_unset(o.api),
        usage=_opt_usage(o.usage, k), stop_reason=o.stop_reason, error_message=_unset(o.error_message),
        timestamp=o.timestamp,
    ),
    "ToolResultMessage": lambda o, k: k.ToolResultMessage(
        tool_call_id=o.tool_call_id, tool_name=o.tool_name, content=_blocks(o.content, k), is_error=o.is_error,
        details=_unset(k.free(o.details)), timestamp=o.timestamp,
    ),
    "CustomMessage": lambda o, k: k.CustomMessage(
        custom_type=o.custom_type, content=_content(o.content, k), display=o.display,
        details=_unset(k.free(o.details)), timestamp=o.timestamp,
    ),
    "CompactionSummaryMessage": lambda o, k: k.CompactionSummaryMessage(
        summary=o.summary, tokens_before=k.number(o.tokens_before), timestamp=o.timestamp
    ),
    "BranchSummaryMessage": lambda o, k: k.BranchSummaryMessage(
        summary=o.summary, from_id=o.from_id, timestamp=o.timestamp
    ),
    "MessageAppended": lambda o, k: k.MessageAppended(
        id=o.id, parent_id=o.parent_id, timestamp=o.timestamp, message=k.fast(o.message)
    ),
    "ThinkingLevelChanged": lambda o, k: k.ThinkingLevelChanged(
        id=o.id, parent_id=o.parent_id, timestamp=o.timestamp, thinking_level=o.thinking_level
    ),
    "ModelChanged": lambda o, k: k.ModelChanged(
        id=o.id, parent_id=o.parent_id, timestamp=o.timestamp, provider=o.provider, model_id=o.model_id
    ),
    "ActiveToolsChanged": lambda o, k: k.ActiveToolsChanged(
        id=o.id, parent_id=o.parent_id, timestamp=o.timestamp, active_tool_names=list(o.active_tool_names)
    ),
    "ContextCompacted": lambda o, k: k.ContextCompacted(
        id=o.id, parent_id=o.parent_id, timestamp=o.timestamp, summary=o.summary,
        first_kept_entry_id=o.first_kept_entry_id, tokens_before=k.number(o.tokens_before),
        retained_tail=k.omitted("ContextCompacted", "retained_tail", _tail(o.retained_tail, k)),
        details=k.omitted("ContextCompacted", "details", k.free(o.details)),
        usage=k.omitted("ContextCompacted", "usage", _or_none(o.usage, k)), from_hook=o.from_hook,
    ),
    "BranchSummarized": lambda o, k: k.BranchSummarized(
        id=o.id, parent_id=o.parent_id, timestamp=o.timestamp, from_id=o.from_id, summary=o.summary,
        details=k.omitted("BranchSummarized", "details", k.free(o.details)),
        usage=k.omitted("BranchSummarized", "usage", _or_none(o.usage, k)), from_hook=o.from_hook,
    ),
    "CustomEntryAppended": lambda o, k: k.CustomEntryAppended(
        id=o.id, parent_id=o.parent_id, timestamp=o.timestamp, custom_type=o.custom_type,
        data=k.omitted("CustomEntryAppended", "data", k.free(o.data)),
    ),
    "CustomMessageAppended": lambda o, k: k.CustomMessageAppended(
        id=o.id, parent_id=o.parent_id, timestamp=o.timestamp, custom_type=o.custom_type,
        content=_content(o.content, k), details=k.omitted("CustomMessageAppended", "details", k.free(o.details)),
        display=o.display,
    ),
    "LabelChanged": lambda o, k: k.LabelChanged(
        id=o.id, parent_id=o.parent_id, timestamp=o.timestamp, target_id=o.target_id,
        label=k.omitted("LabelChanged", "label", o.label),
    ),
    "SessionRenamed": lambda o, k: k.SessionRenamed(
        id=o.id, parent_id=o.parent_id, timestamp=o.timestamp, name=k.omitted("SessionRenamed", "name", o.name)
    ),
    "LeafMoved": lambda o, k: k.LeafMoved(id=o.id, parent_id=o.parent_id, timestamp=o.timestamp, target_id=o.target_id),
}
