"""OpenAI Agents SDK items <-> sessiontree messages (docs/integrations.md, "OpenAI Agents SDK").

An item of a kind we know (a user or assistant message, a function call or its output, reasoning) becomes one message:
the message holds the item's text, and its ``extra["openai_agents"]`` the *skeleton*, the item without the values the
message holds (its role and texts), so :func:`to_item` puts the item back together exactly. Any other item, or one whose
rebuild would differ in the least, is kept whole in a ``custom`` entry (:data:`CUSTOM_TYPE`). Needs no SDK import.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from sessiontree.domain.errors import SessionError
from sessiontree.domain.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UserMessage,
    check_fields,
)
from sessiontree.domain.values import check_value

KEY = "openai_agents"  # the extra field holding an item's skeleton (and a block's formatting note)
CUSTOM_TYPE = "openai_agents.item"  # a custom entry holding an item whole
TEXT_BLOCKS = ("input_text", "output_text")
REASONING_PARTS = ("summary", "content")  # the lists of a reasoning item whose texts become thinking blocks
OUR_BLOCKS = frozenset({TextContent.type, ImageContent.type, ThinkingContent.type, ToolCall.type})

# How an arguments string was written, so the parsed object is written back the same: the first is OpenAI's API
# (no note needed), the second Python's json.dumps defaults; any other spelling stays in the skeleton as it is.
_ARGUMENT_STYLES: dict[str, Callable[[Any], str]] = {
    "compact": lambda value: msgspec.json.encode(value).decode(),
    "json.dumps": json.dumps,
}
_decode = msgspec.json.Decoder().decode  # strict JSON (no NaN), integers of any size exact

Message = UserMessage | AssistantMessage | ToolResultMessage


def to_message(item: Any, tool_names: Mapping[str, str], timestamp: int) -> Message | None:
    """The message that stands for ``item`` (a JSON value: ``json_value`` checked), or None when it is to be kept whole
    in a custom entry.

    ``tool_names`` maps call ids to tool names (an output item need not name its tool); ``timestamp`` is in ms."""
    if not isinstance(item, dict):
        return None
    kind = _MAPPERS.get(_kind(item))
    if kind is None:
        return None
    try:  # the item is a JSON value already (the store checked it whole), so the message is one the log accepts
        message = kind(item, tool_names, timestamp)
        check_fields(message)  # a field of the wrong type (a call named None): the append would refuse it, kept whole
        return message if to_item(message) == item else None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):
        return None


def to_item(message: Any) -> dict[str, Any]:
    """The item a message made by :func:`to_message` stands for (``KeyError`` for a message it did not make)."""
    skeleton = dict(message.extra[KEY])
    if isinstance(message, UserMessage):
        return {"role": "user", **skeleton, **_content(skeleton, message.content)}
    if isinstance(message, ToolResultMessage):
        output = _content(skeleton, message.content, "output")
        return {**skeleton, "call_id": message.tool_call_id, **output}
    kind = skeleton.get("type", "message")
    if kind == "function_call":
        return {**_call_fields(message.content[0]), **skeleton}  # a raw arguments string in the skeleton wins
    if kind == "reasoning":
        return _reasoning_item(skeleton, message.content)
    return {"role": "assistant", **skeleton, **_content(skeleton, message.content)}


def _kind(item: dict[str, Any]) -> str | None:
    kind = item.get("type", "message")
    if kind == "message":
        return item.get("role") if item.get("role") in ("user", "assistant") else None
    return kind if isinstance(kind, str) else None


# -- item -> message ----------------------------------------------------------------------------------------------


def _user(item: dict[str, Any], tool_names: Mapping[str, str], timestamp: int) -> Message:
    skeleton, content = _split_content(item, "content")
    return UserMessage(content=content, timestamp=timestamp, extra={KEY: _without(skeleton, "role")})


def _assistant(item: dict[str, Any], tool_names: Mapping[str, str], timestamp: int) -> Message:
    skeleton, content = _split_content(item, "content")
    blocks = [TextContent(content)] if isinstance(content, str) else content
    return AssistantMessage(content=blocks, timestamp=timestamp, extra={KEY: _without(skeleton, "role")})


def _function_call(item: dict[str, Any], tool_names: Mapping[str, str], timestamp: int) -> Message:
    text = item["arguments"]
    skeleton = _without(item, "call_id", "name", "arguments")
    arguments = _json_object(text)
    style = None if arguments is None else next((name for name, dump in _ARGUMENT_STYLES.items() if dump(arguments) == text),
                                                None)
    if arguments is None or style is None:  # not a JSON object, or spelt some other way: the string itself is kept
        arguments, skeleton["arguments"] = {}, text
    note = {KEY: {"arguments": style}} if style not in (None, "compact") else {}
    call = ToolCall(id=item["call_id"], name=item["name"], arguments=arguments, extra=note)
    return AssistantMessage(content=[call], stop_reason="toolUse", timestamp=timestamp, extra={KEY: skeleton})


def _json_object(text: Any) -> dict[str, Any] | None:
    """The JSON object ``text`` spells, if it is one the log can hold; else None (the text is then kept as it is)."""
    try:
        value = _decode(text) if isinstance(text, str) else None
        check_value("arguments", value)
        if "\\u" in text:
            msgspec.json.encode(value)  # a lone surrogate, spelt as an escape, cannot be written
    except (ValueError, RecursionError, SessionError):
        return None
    return value if isinstance(value, dict) else None


def _function_call_output(item: dict[str, Any], tool_names: Mapping[str, str], timestamp: int) -> Message:
    skeleton, output = _split_content(item, "output")
    call_id = item["call_id"]
    name = item.get("name")
    if not isinstance(name, str):  # the output need not name its tool; its call does
        name = tool_names.get(call_id, "")
    blocks = [TextContent(output)] if isinstance(output, str) else output
    return ToolResultMessage(tool_call_id=call_id, tool_name=name, content=blocks, timestamp=timestamp,
                             extra={KEY: _without(skeleton, "call_id")})


def _reasoning(item: dict[str, Any], tool_names: Mapping[str, str], timestamp: int) -> Message:
    skeleton = dict(item)
    blocks = []
    for part in REASONING_PARTS:
        if isinstance(item.get(part), list):
            skeleton[part] = [_without(piece, "text") for piece in item[part]]
            blocks += [ThinkingContent(piece["text"]) for piece in item[part]]
    return AssistantMessage(content=blocks, timestamp=timestamp, extra={KEY: skeleton})


_MAPPERS: dict[str | None, Callable[[dict[str, Any], Mapping[str, str], int], Message]] = {
    "user": _user, "assistant": _assistant, "function_call": _function_call,
    "function_call_output": _function_call_output, "reasoning": _reasoning,
}


def _split_content(item: dict[str, Any], key: str) -> tuple[dict[str, Any], Any]:
    """The item without ``key``'s texts, and the message content for them: a string, or blocks. A list keeps a
    skeleton per block in the item's place (None for a block kept whole, as an unknown block)."""
    content = item[key]
    if isinstance(content, str):
        return _without(item, key), content
    blocks, skeletons = [], []
    for block in content:
        typed, skeleton = _block(block)
        blocks.append(typed)
        skeletons.append(skeleton)
    return {**item, key: skeletons}, blocks


def _block(block: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
    kind = block["type"]
    if kind in TEXT_BLOCKS and isinstance(block.get("text"), str):
        return TextContent(block["text"]), _without(block, "text")
    url = block.get("image_url")
    if kind == "input_image" and isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        mime_type, data = url[len("data:"):].split(";base64,", 1)
        return ImageContent(data, mime_type), _without(block, "image_url")
    if kind in OUR_BLOCKS:  # the log refuses an unknown block named like one of its own
        raise ValueError(f"block type {kind!r}")
    return UnknownContent(type=kind, data=block), None


def _without(item: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in keys}


# -- message -> item ----------------------------------------------------------------------------------------------


def _content(skeleton: dict[str, Any], content: Any, key: str = "content") -> dict[str, Any]:
    """``{key: ...}``: the message's text, or its blocks put back into the skeleton's list."""
    if key not in skeleton:
        return {key: content if isinstance(content, str) else content[0].text}
    return {key: [_block_item(skeleton_block, block) for skeleton_block, block in zip(skeleton[key], content, strict=True)]}


def _block_item(skeleton: dict[str, Any] | None, block: Any) -> dict[str, Any]:
    if skeleton is None:
        return dict(block.data)
    if isinstance(block, ImageContent):
        return {**skeleton, "image_url": f"data:{block.mime_type};base64,{block.data}"}
    return {**skeleton, "text": block.text}


def _call_fields(call: ToolCall) -> dict[str, Any]:
    style = call.extra.get(KEY, {}).get("arguments", "compact")
    return {"call_id": call.id, "name": call.name, "arguments": _ARGUMENT_STYLES[style](call.arguments)}


def _reasoning_item(skeleton: dict[str, Any], blocks: Any) -> dict[str, Any]:
    texts = iter(block.thinking for block in blocks)
    item = dict(skeleton)
    for part in REASONING_PARTS:
        if isinstance(skeleton.get(part), list):
            item[part] = [{**piece, "text": next(texts)} for piece in skeleton[part]]
    return item
