"""Erasure's stubs (docs/audit.md, *Erasure*): what an erased entry becomes, as a pure function of the entry.

A stub keeps what places the entry in the tree and shapes the context (type, id, parent, timestamp, roles, tool-call
ids and names, model settings, token counts) and replaces every piece of content with ``[redacted]``. Erasing a stub
gives the same stub, which is how verify tells a stub that holds nothing but the placeholder from a line that was
changed; :func:`stub_problem` bounds what the kept fields can carry, so no text fits in a stub's names or numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import (
    BranchSummarized,
    ContextCompacted,
    CustomEntryAppended,
    CustomMessageAppended,
    Entry,
    MessageAppended,
)
from sessiontree.domain.messages import (
    INT_LIMIT,  # the widest integer a stub holds: what the append command takes
    NO_EXTRA,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)

RECORD_TYPE = "sessiontree.redaction"  # a value in the logs (never renamed with a module)
PLACEHOLDER = "[redacted]"
STUB_KEY = "redacted"

# What a stub's kept fields may hold: names (ids, tool names, model settings) of printable ASCII without spaces, at most
# NAME_LIMIT characters; timestamps of at most TIMESTAMP_LIMIT; integers a 64-bit integer holds (nanosecond times do).
NAME_LIMIT = 128
TIMESTAMP_LIMIT = 40
_NAME = re.compile(r"[!-~]*")


def _name(value: Any) -> Any:
    """A kept name, or the placeholder when it is not one a stub may carry (long text, spaces)."""
    if isinstance(value, str) and (len(value) > NAME_LIMIT or not _NAME.fullmatch(value)):
        return PLACEHOLDER
    return value


def _usage(usage: Any) -> Any:
    """Token counts and cost without their unknown fields (which may hold anything)."""
    if usage is None:
        return None
    return attrs.evolve(usage, cost=attrs.evolve(usage.cost, extra=NO_EXTRA), extra=NO_EXTRA)


def erased_message(message: Any) -> Any:
    """The placeholder of a message: its role, and for tool use the ids that pair calls with results."""
    text = (TextContent(PLACEHOLDER),)
    if isinstance(message, UserMessage):
        return UserMessage(PLACEHOLDER, timestamp=message.timestamp)
    if isinstance(message, AssistantMessage):
        calls = tuple(ToolCall(id=_name(b.id), name=_name(b.name)) for b in message.content if isinstance(b, ToolCall))
        return attrs.evolve(message, content=text + calls, error_message=None, extra=NO_EXTRA, provider=_name(message.provider),
                            model=_name(message.model), api=_name(message.api), stop_reason=_name(message.stop_reason),
                            usage=_usage(message.usage))
    if isinstance(message, ToolResultMessage):
        return attrs.evolve(message, content=text, details=None, extra=NO_EXTRA, tool_call_id=_name(message.tool_call_id),
                            tool_name=_name(message.tool_name))
    if isinstance(message, UnknownMessage):
        role = _name(message.role)
        return UnknownMessage(role=role, data={"role": role, "content": PLACEHOLDER})
    if attrs.has(type(message)):  # the summaries and custom messages of a retained tail
        fields = attrs.fields_dict(type(message))
        changes: dict[str, Any] = {name: PLACEHOLDER for name in ("summary", "content") if name in fields}
        changes.update({name: None for name in ("details",) if name in fields})
        return attrs.evolve(message, **changes, **({"extra": NO_EXTRA} if "extra" in fields else {}))
    raise SessionError("invalid_entry", f"cannot erase a message of type {type(message).__name__}")


def erased(entry: Entry) -> Entry:
    """The stub of ``entry``: the same entry with its content replaced (``invalid_entry`` for entries that hold none)."""
    marked = {STUB_KEY: True}
    if isinstance(entry, MessageAppended):
        return attrs.evolve(entry, message=erased_message(entry.message), extra=marked)
    if isinstance(entry, CustomEntryAppended):
        if entry.custom_type == RECORD_TYPE:
            raise SessionError("invalid_entry", f"entry {entry.id} is a redaction record; records cannot be erased")
        return attrs.evolve(entry, data=None, extra=marked, custom_type=_name(entry.custom_type))
    if isinstance(entry, CustomMessageAppended):
        return attrs.evolve(entry, content=PLACEHOLDER, details=None, extra=marked, custom_type=_name(entry.custom_type))
    if isinstance(entry, ContextCompacted):
        tail = entry.retained_tail
        return attrs.evolve(entry, summary=PLACEHOLDER, details=None, extra=marked,
                            retained_tail=None if tail is None else tuple(erased_message(m) for m in tail))
    if isinstance(entry, BranchSummarized):
        return attrs.evolve(entry, summary=PLACEHOLDER, details=None, extra=marked, usage=_usage(entry.usage))
    raise SessionError(
        "invalid_entry", f"entry {entry.id} is a {entry.type} entry, which holds no content to erase (messages, custom "
        "entries, custom messages, compactions and branch summaries do)",
    )


def is_stub(entry: Any) -> bool:
    return bool(entry.extra) and entry.extra.get(STUB_KEY) is True


def stub_problem(entry: Entry) -> str | None:
    """Why ``entry`` is not a stub that carries nothing but names, times and counts (None: it is one). Every string
    it holds is the placeholder or a name (:data:`NAME_LIMIT` printable ASCII characters, no spaces), its timestamp at
    most :data:`TIMESTAMP_LIMIT` characters, every integer at most :data:`INT_LIMIT`, and no mapping but the stub mark."""
    if not isinstance(entry.timestamp, str) or len(entry.timestamp) > TIMESTAMP_LIMIT or not _NAME.fullmatch(entry.timestamp):
        return f"its timestamp is not a time (over {TIMESTAMP_LIMIT} characters, or with spaces)"
    if dict(entry.extra) != {STUB_KEY: True}:
        return "it holds fields beside the stub's mark"
    return _carries(entry, f"entry {entry.id}", top=True)


def _carries(value: Any, where: str, top: bool = False) -> str | None:
    if value is None or isinstance(value, (bool, float)):
        return None
    if isinstance(value, int):
        return None if -INT_LIMIT <= value <= INT_LIMIT else f"{where} holds a number beyond 64 bits ({len(str(value))} digits)"
    if isinstance(value, str):
        if value == PLACEHOLDER or (len(value) <= NAME_LIMIT and _NAME.fullmatch(value)):
            return None
        return f"{where} holds text ({len(value)} characters) where a stub keeps only names"
    if isinstance(value, (tuple, list)):
        for item in value:
            found = _carries(item, where)
            if found:
                return found
        return None
    if isinstance(value, UnknownMessage):
        return _carries(value.role, where) or (None if value.data == {"role": value.role, "content": PLACEHOLDER}
                                                else f"{where} holds data in an unknown message")
    if attrs.has(type(value)):
        for field in attrs.fields(type(value)):
            item = getattr(value, field.name)
            if field.name == "extra" and (top or not item):
                continue
            if isinstance(item, Mapping):
                if item:
                    return f"{where} holds data in {field.name}"
                continue
            found = _carries(item, f"{where} ({field.name})")
            if found:
                return found
        return None
    return f"{where} holds a {type(value).__name__}"


__all__ = ["PLACEHOLDER", "RECORD_TYPE", "STUB_KEY", "erased", "erased_message", "is_stub", "stub_problem"]
