"""pydantic-ai's messages and conversation records as sessiontree entries (the mapping of docs/integrations.md).

A pydantic-ai message becomes our messages where its parts map cleanly (a user prompt, a tool return, a response's
text, thinking and tool calls), so ``sessiontree context``, stats and pi exports see a real conversation. The last of
them (the *carrier*) keeps the whole message, serialised by pydantic-ai's own ``ModelMessagesTypeAdapter``, under
``extra["pydantic_ai"]``; a message none of whose parts map is carried by a ``custom`` entry instead. Loading reads only
that serialised form, so what is loaded equals what was saved.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs
import msgspec
import pydantic
import pydantic_core
from pydantic_ai import messages as pa
from pydantic_ai.conversation_store import ConversationRecord

from sessiontree.domain.events import CustomEntryAppended, Entry, MessageAppended
from sessiontree.domain.messages import (
    AssistantMessage,
    Content,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

PAYLOAD_KEY = "pydantic_ai"  # the carrier message's ``extra`` key, and the header metadata key of a conversation
MESSAGE_TYPE = "pydantic_ai.message"  # the custom entry that carries a message no part of which maps
RECORD_TYPE = "pydantic_ai.record"  # the custom entry each save ends with: what the record holds besides the log
_STOPS = {"tool_call": "toolUse", "length": "length", "error": "error", "content_filter": "error"}
# The record's own fields that the session itself answers: its id, the leaf and the header's scope.
_DERIVED = {"conversation_id", "head_id", "scope"}
_RECORDS: pydantic.TypeAdapter[ConversationRecord] = pydantic.TypeAdapter(ConversationRecord)


def encode(message: pa.ModelMessage) -> tuple[list[Any], dict[str, Any]]:
    """Our messages for a pydantic-ai message (none when no part maps) and its serialised form."""
    payload = msgspec.json.decode(pa.ModelMessagesTypeAdapter.dump_json([message]))[0]
    if isinstance(message, pa.ModelResponse):
        return [_assistant(message)], payload
    ms = _ms(message.timestamp)
    ours = [mapped for part in message.parts if (mapped := _request_part(part, ms)) is not None]
    return ours, payload


def decode(payload: Mapping[str, Any]) -> pa.ModelMessage:
    """The pydantic-ai message a carrier holds. Through JSON, so bytes come back from their base64 form."""
    return pa.ModelMessagesTypeAdapter.validate_json(msgspec.json.encode([payload]))[0]


def carried(message: Any, payload: dict[str, Any]) -> Any:
    """``message`` carrying a pydantic-ai message's serialised form."""
    return attrs.evolve(message, extra={**message.extra, PAYLOAD_KEY: payload})


def payload_of(entry: Entry) -> Mapping[str, Any] | None:
    """The serialised pydantic-ai message an entry carries, or None for every other entry."""
    if isinstance(entry, MessageAppended):
        payload = getattr(entry.message, "extra", {}).get(PAYLOAD_KEY)  # an UnknownMessage has no extra
    elif isinstance(entry, CustomEntryAppended) and entry.custom_type == MESSAGE_TYPE:
        payload = entry.data
    else:
        return None
    return payload if isinstance(payload, Mapping) else None


def record_entry_data(entry: Entry) -> Mapping[str, Any] | None:
    """What a record entry stores, or None for every other entry."""
    if isinstance(entry, CustomEntryAppended) and entry.custom_type == RECORD_TYPE and isinstance(entry.data, Mapping):
        return entry.data
    return None


def record_data(record: ConversationRecord) -> dict[str, Any]:
    """What a record entry stores: the record without the fields the session answers itself."""
    data: dict[str, Any] = msgspec.json.decode(_RECORDS.dump_json(record, exclude=_DERIVED))
    return data


def record_from(data: Mapping[str, Any], *, conversation_id: str, head_id: str | None, scope: str | None,
                revision: str) -> ConversationRecord:
    fields = {**data, "conversation_id": conversation_id, "head_id": head_id, "scope": scope, "revision": revision}
    return _RECORDS.validate_json(msgspec.json.encode(fields))


def _ms(moment: datetime | None) -> int:
    return int(moment.timestamp() * 1000) if moment is not None else 0


def _request_part(part: Any, ms: int) -> Any:
    """Our message for one part of a request, or None when it has no clean counterpart (a system prompt, say)."""
    if isinstance(part, pa.UserPromptPart):
        if isinstance(part.content, str):
            return UserMessage(part.content, timestamp=_ms(part.timestamp) or ms)
        blocks = [block for item in part.content if (block := _user_block(item)) is not None]
        return UserMessage(blocks, timestamp=_ms(part.timestamp) or ms) if blocks else None
    if isinstance(part, pa.BaseToolReturnPart):
        return ToolResultMessage(
            tool_call_id=part.tool_call_id, tool_name=part.tool_name, content=[TextContent(part.model_response_str())],
            is_error=part.outcome != "success", timestamp=_ms(part.timestamp) or ms,
        )
    if isinstance(part, pa.RetryFeedbackPart):
        return UserMessage(part.model_response(), timestamp=_ms(part.timestamp) or ms)
    return None


def _user_block(item: Any) -> Content | None:
    if isinstance(item, str):
        return TextContent(item)
    if isinstance(item, pa.TextContent):
        return TextContent(item.content)
    if isinstance(item, pa.BinaryContent) and item.is_image:
        return ImageContent(item.base64, item.media_type)
    return None


def _view_arguments(part: pa.ToolCallPart) -> dict[str, Any]:
    """The call's arguments as the log's readable view holds them (a load reads pydantic-ai's own stored copy): bytes
    as base64, as that copy has them, and a number JSON cannot carry (NaN, infinity) as its text."""
    arguments = _finite(pydantic_core.to_jsonable_python(part.args_as_dict(), fallback=repr, bytes_mode="base64"))
    return arguments if isinstance(arguments, dict) else {"arguments": arguments}


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def _assistant(response: pa.ModelResponse) -> AssistantMessage:
    blocks: list[Content] = []
    for part in response.parts:
        if isinstance(part, pa.TextPart):
            blocks.append(TextContent(part.content))
        elif isinstance(part, pa.ThinkingPart):
            blocks.append(ThinkingContent(part.content, signature=part.signature))
        elif isinstance(part, pa.ToolCallPart):
            blocks.append(ToolCall(id=part.tool_call_id, name=part.tool_name, arguments=_view_arguments(part)))
    usage = response.usage
    return AssistantMessage(
        blocks, provider=response.provider_name or "", model=response.model_name or "",
        usage=Usage(input=usage.input_tokens, output=usage.output_tokens, cache_read=usage.cache_read_tokens,
                    cache_write=usage.cache_write_tokens, total_tokens=usage.input_tokens + usage.output_tokens),
        stop_reason=_STOPS.get(response.finish_reason or "", "stop"), timestamp=_ms(response.timestamp),
    )


def split_ids(entry_id: str, count: int) -> Sequence[str]:
    """The ids of the messages a pydantic-ai message becomes: the carrier keeps the message's entry id."""
    return [f"{entry_id}:{index}" for index in range(1, count)] + [entry_id]
