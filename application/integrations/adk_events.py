"""Google ADK events <-> sessiontree entries (docs/integrations.md, "Google ADK").

An event is recorded as its JSON dump (``Event.model_dump(mode="json", exclude_none=True)``, or the whole dump when that
one would not read back equal). An event with content becomes a message where its parts map exactly: a user's parts a
user message, the model's an assistant message (text, thought, function call), one function response a tool result.
The message holds the parts and ``extra["adk"]`` the rest of the dump; the dump is kept whole in ``extra["adk"]`` where
the parts do not map, and an event without content is an ``adk.event`` custom entry. :func:`event_of` gives back an
``Event`` equal to the one appended.
"""

from __future__ import annotations

import json
from typing import Any

from google.adk.events import Event

from sessiontree.domain.events import CustomEntryAppended, Entry, MessageAppended
from sessiontree.domain.messages import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UserMessage,
)

KEY = "adk"  # the extra field of a message; the header metadata key of the sessions the service makes
EVENT_TYPE = "adk.event"  # a custom entry holding an event's dump whole
STATE_TYPE = "adk.state"  # a custom entry holding a state delta (the initial state; app and user state logs)
_PART = "adk.part"  # an UnknownContent holding a part we have no block for

Message = UserMessage | AssistantMessage | ToolResultMessage


def dump(event: Event) -> dict[str, Any]:
    """The event as JSON: without its None fields when that reads back equal, else whole."""
    short = event.model_dump(mode="json", exclude_none=True)
    if Event.model_validate(short) == event:
        return short
    return event.model_dump(mode="json")


def to_message(data: dict[str, Any]) -> Message | None:
    """The message standing for an event's dump, or None when the dump is kept in a custom entry (no content)."""
    content = data.get("content")
    if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
        return None
    parts = content["parts"]
    rest = {**data, "content": {k: v for k, v in content.items() if k != "parts"}}
    at = int(float(data.get("timestamp", 0)) * 1000)
    message: Message
    response = parts[0].get("function_response") if len(parts) == 1 and isinstance(parts[0], dict) else None
    if isinstance(response, dict) and set(parts[0]) == {"function_response"}:
        result = response.get("response")
        message = ToolResultMessage(
            tool_call_id=str(response.get("id") or ""), tool_name=str(response.get("name") or ""),
            content=(TextContent(json.dumps(result, ensure_ascii=False)),), details=result, timestamp=at,
            extra={KEY: {"at": "response", "event": rest}},
        )
    elif content.get("role") == "user":
        message = UserMessage(tuple(_block(p) for p in parts), timestamp=at, extra={KEY: {"at": "parts", "event": rest}})
    elif content.get("role") == "model":
        model = data.get("model_version")
        message = AssistantMessage(
            tuple(_block(p) for p in parts), provider="google", model=model if isinstance(model, str) else "",
            timestamp=at, extra={KEY: {"at": "parts", "event": rest}},
        )
    else:
        return None
    if dump_of(message) == data:
        return message
    return _whole(message, data)


def _whole(message: Message, data: dict[str, Any]) -> Message:
    import attrs

    return attrs.evolve(message, extra={KEY: {"event": data}})


def _block(part: Any) -> Any:
    if not isinstance(part, dict):
        return UnknownContent(type=_PART, data={"part": part})
    keys = set(part)
    if keys == {"text"} and isinstance(part["text"], str):
        return TextContent(part["text"])
    if part.get("thought") is True and isinstance(part.get("text"), str) and keys <= {"text", "thought", "thought_signature"}:
        signature = part.get("thought_signature")
        if signature is None or isinstance(signature, str):
            return ThinkingContent(part["text"], signature=signature)
    call: dict[str, Any] = part["function_call"] if keys == {"function_call"} and isinstance(part["function_call"], dict) else {}
    exact = set(call) == {"id", "name", "args"} and isinstance(call["args"], dict)
    if exact and isinstance(call["id"], str) and isinstance(call["name"], str):
        return ToolCall(id=call["id"], name=call["name"], arguments=call["args"])
    return UnknownContent(type=_PART, data={"part": part})


def _part(block: Any) -> Any:
    if isinstance(block, TextContent):
        return {"text": block.text}
    if isinstance(block, ThinkingContent):
        out: dict[str, Any] = {"text": block.thinking, "thought": True}
        if block.signature is not None:
            out["thought_signature"] = block.signature
        return out
    if isinstance(block, ToolCall):
        return {"function_call": {"id": block.id, "name": block.name, "args": dict(block.arguments)}}
    return block.data["part"]


def dump_of(message: Any) -> dict[str, Any]:
    """The event dump a message made by :func:`to_message` stands for."""
    note = message.extra[KEY]
    data = note["event"]
    at = note.get("at")
    if at is None:
        return dict(data)
    content = dict(data["content"])
    if at == "response":
        content["parts"] = [{"function_response": {"id": message.tool_call_id, "name": message.tool_name,
                                                   "response": message.details}}]
    else:
        content["parts"] = [_part(block) for block in message.content]
    return {**data, "content": content}


def dump_in(entry: Entry) -> dict[str, Any] | None:
    """The event dump an entry holds, or None (state entries, leaf moves, entries of other programs)."""
    if isinstance(entry, CustomEntryAppended):
        return entry.data if entry.custom_type == EVENT_TYPE else None
    if isinstance(entry, MessageAppended) and KEY in getattr(entry.message, "extra", ()):
        return dump_of(entry.message)
    return None


def event_of(data: dict[str, Any]) -> Event:
    return Event.model_validate(data)
