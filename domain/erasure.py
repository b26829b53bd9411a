"""Erasure's stubs (docs/audit.md, *Erasure*): what an erased entry becomes, as a pure function of the entry.

A stub keeps what places the entry in the tree and shapes the context (type, id, parent, timestamp, roles, tool-call
ids and names, model settings) and replaces every piece of content with ``[redacted]``. Erasing a stub gives the same
stub, which is how verify tells a stub that holds nothing but the placeholder from a line that was changed.
"""

from __future__ import annotations

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
    NO_EXTRA,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)

RECORD_TYPE = "sessiontree.redaction"
PLACEHOLDER = "[redacted]"
STUB_KEY = "redacted"


def erased_message(message: Any) -> Any:
    """The placeholder of a message: its role, and for tool use the ids that pair calls with results."""
    text = (TextContent(PLACEHOLDER),)
    if isinstance(message, UserMessage):
        return UserMessage(PLACEHOLDER, timestamp=message.timestamp)
    if isinstance(message, AssistantMessage):
        calls = tuple(ToolCall(id=b.id, name=b.name) for b in message.content if isinstance(b, ToolCall))
        return attrs.evolve(message, content=text + calls, error_message=None, extra=NO_EXTRA)
    if isinstance(message, ToolResultMessage):
        return attrs.evolve(message, content=text, details=None, extra=NO_EXTRA)
    if isinstance(message, UnknownMessage):
        return UnknownMessage(role=message.role, data={"role": message.role, "content": PLACEHOLDER})
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
        return attrs.evolve(entry, data=None, extra=marked)
    if isinstance(entry, CustomMessageAppended):
        return attrs.evolve(entry, content=PLACEHOLDER, details=None, extra=marked)
    if isinstance(entry, ContextCompacted):
        tail = entry.retained_tail
        return attrs.evolve(entry, summary=PLACEHOLDER, details=None, extra=marked,
                            retained_tail=None if tail is None else tuple(erased_message(m) for m in tail))
    if isinstance(entry, BranchSummarized):
        return attrs.evolve(entry, summary=PLACEHOLDER, details=None, extra=marked)
    raise SessionError(
        "invalid_entry", f"entry {entry.id} is a {entry.type} entry, which holds no content to erase (messages, custom "
        "entries, custom messages, compactions and branch summaries do)",
    )


def is_stub(entry: Any) -> bool:
    return bool(entry.extra) and entry.extra.get(STUB_KEY) is True


__all__ = ["PLACEHOLDER", "RECORD_TYPE", "STUB_KEY", "erased", "erased_message", "is_stub"]
