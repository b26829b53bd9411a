"""The tool-call rule (``repair_tool_pairs``, docs/concepts.md) on a pydantic-ai message history.

Each part that takes part in the rule stands as one message: a response as an assistant message with its tool calls,
a tool return (or a retry prompt for a tool) as a tool result, a user prompt (or another retry prompt) as a user
message; other parts (a system prompt, say) are neither. The rule repairs those stand-ins, and the history is put back
together from what it kept, moved or made: a message it did not touch is the same object.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pydantic_ai import messages as pa

from sessiontree.domain.events import MessageAppended
from sessiontree.domain.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from sessiontree.projections import tool_pairs

SYNTHETIC_METADATA = {"sessiontree_synthetic_tool_return": True}


def repair_history(messages: Sequence[pa.ModelMessage]) -> list[pa.ModelMessage]:
    """``messages`` repaired by the rule; the list as it is (same objects) when nothing breaks it."""
    views: list[MessageAppended] = []
    for index, message in enumerate(messages):
        if isinstance(message, pa.ModelResponse):
            calls = [ToolCall(id=p.tool_call_id, name=p.tool_name) for p in message.parts if type(p) is pa.ToolCallPart]
            views.append(_view(f"{index}", AssistantMessage(calls)))
        else:
            views.extend(_view(f"{index}.{j}", _stand_in(part)) for j, part in enumerate(message.parts))
    repaired = tool_pairs.repair(views)
    if len(repaired) == len(views) and all(a is b for a, b in zip(repaired, views, strict=True)):
        return list(messages)
    out: list[pa.ModelMessage] = []
    group: list[Any] = []  # the parts of the request being put together
    group_of: int | None = None  # the message they come from (None: parts the repair made)
    part: Any
    for view in repaired:
        if view.id.startswith(tool_pairs.SYNTHETIC_ID_PREFIX):
            source, part = None, _synthetic(view.message)
        elif "." not in view.id:
            _flush(out, messages, group_of, group)
            group, group_of = [], None
            out.append(_response(messages[int(view.id)], view.message))
            continue
        else:
            i, j = map(int, view.id.split("."))
            source, part = i, messages[i].parts[j]
            if isinstance(view.message, ToolResultMessage) and view.message.tool_call_id != part.tool_call_id:
                part = dataclasses.replace(part, tool_call_id=view.message.tool_call_id)
        if group and source != group_of:
            _flush(out, messages, group_of, group)
            group = []
        group_of = source
        group.append(part)
    _flush(out, messages, group_of, group)
    return out


def _stand_in(part: Any) -> Any:
    if type(part) is pa.ToolReturnPart or (isinstance(part, pa.RetryPromptPart) and part.tool_name):
        return ToolResultMessage(tool_call_id=part.tool_call_id, tool_name=part.tool_name or "")
    if isinstance(part, (pa.UserPromptPart, pa.RetryPromptPart)):
        return UserMessage("")
    return None  # no part of the rule


def _view(view_id: str, message: Any) -> MessageAppended:
    return MessageAppended(originator_id="", originator_version=0, timestamp="", id=view_id, parent_id=None,
                           message=message)


def _synthetic(message: ToolResultMessage) -> pa.ToolReturnPart:
    return pa.ToolReturnPart(tool_name=message.tool_name, content=tool_pairs.SYNTHETIC_TEXT,
                             tool_call_id=message.tool_call_id, outcome="interrupted", metadata=dict(SYNTHETIC_METADATA))


def _response(response: Any, view: AssistantMessage) -> Any:
    """The response, with the call ids the rule renamed (a repeated id)."""
    ids = iter(block.id for block in view.content if isinstance(block, ToolCall))
    parts = [dataclasses.replace(p, tool_call_id=next(ids)) if type(p) is pa.ToolCallPart else p for p in response.parts]
    if all(a is b or a == b for a, b in zip(parts, response.parts, strict=True)):
        return response
    return dataclasses.replace(response, parts=parts)


def _flush(out: list[Any], messages: Sequence[Any], source: int | None, parts: list[Any]) -> None:
    """A request of ``parts``: the source request itself when they are all of its parts, unchanged."""
    if not parts:
        return
    if source is None:  # made by the repair: with the tool returns just before them, as one request
        last = out[-1] if out else None
        if isinstance(last, pa.ModelRequest) and all(isinstance(_stand_in(p), ToolResultMessage) for p in last.parts):
            out[-1] = dataclasses.replace(last, parts=[*last.parts, *parts])
        else:
            out.append(pa.ModelRequest(parts=parts))
        return
    original = messages[source]
    same = len(parts) == len(original.parts) and all(a is b for a, b in zip(parts, original.parts, strict=True))
    out.append(original if same else dataclasses.replace(original, parts=parts))
