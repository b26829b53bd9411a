"""Claude Code transcript entries <-> sessiontree entries (docs/integrations.md, "Claude Agent SDK").

A transcript line of type ``user`` or ``assistant`` becomes a message (user, tool result or assistant), so ``sessiontree
show``, ``context`` and the web viewer read a mirrored Claude Code session as a conversation. The message holds the
content blocks, and its ``extra["claude_code"]`` the *skeleton*: the line without the content the message holds, so
:func:`entry_of` puts the line back together exactly. A line whose rebuild would differ in the least keeps itself whole
in the skeleton (the message then only renders it), and any other line is a ``claude_code.entry`` custom entry. A line's
``uuid`` is its entry id and its ``parentUuid`` its parent. Needs no SDK import (the CLI's ``import --format
claude-code`` uses it too).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import CustomEntryAppended, Entry, MessageAppended
from sessiontree.domain.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    Usage,
    UserMessage,
)

KEY = "claude_code"  # the extra field of a message (and a block) holding what the message does not; the header's key
CUSTOM_TYPE = "claude_code.entry"  # a custom entry holding a line whole
PREFIX = "cc"  # the first part of every session id this mapping makes

Message = UserMessage | AssistantMessage | ToolResultMessage
_NOT_A_LINE = object()
_OURS = frozenset({TextContent.type, ImageContent.type, ThinkingContent.type, ToolCall.type})


# -- session keys -------------------------------------------------------------------------------------------------

_PLAIN = re.compile(r"[A-Za-z0-9-]")
_PART = 60  # an encoded part longer than this is stored as a digest (the header metadata keeps the key whole)


def encode_part(text: str) -> str:
    """``text`` in the characters a session id allows, without ``.``: letters, digits and ``-`` stay, ``_`` is ``__``,
    anything else ``_<hex code point>_``; a long result is ``_h`` and a digest (``h`` is no hex digit: unambiguous)."""
    out = "".join(c if _PLAIN.fullmatch(c) else "__" if c == "_" else f"_{ord(c):x}_" for c in text)
    if len(out) <= _PART and out:
        return out
    return "_h" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def decode_part(part: str) -> str | None:
    """The text :func:`encode_part` encoded, or None for a digest."""
    if part.startswith("_h"):
        return None
    return re.sub(r"_(_|[0-9a-f]+_)", lambda m: "_" if m.group(1) == "_" else chr(int(m.group(1)[:-1], 16)), part)


def check_key(key: Any) -> dict[str, str]:
    """A ``SessionKey`` as a plain dict, or ``TypeError``/``ValueError`` for one that is not."""
    if not isinstance(key, Mapping):
        raise TypeError(f"a session key must be a mapping with project_key and session_id, not {key!r:.80}")
    out: dict[str, str] = {}
    for name in ("project_key", "session_id", "subpath"):
        value = key.get(name)
        if value is None and name == "subpath":
            continue
        if not isinstance(value, str) or not value:
            raise ValueError(f"session key field {name} must be a non-empty str, not {value!r:.80}")
        out[name] = value
    return out


def session_id_for(key: Mapping[str, str]) -> str:
    """The sessiontree session id of a ``SessionKey``: ``cc.<project>.<session>[.<subpath>]``, each part encoded."""
    parts = [PREFIX, encode_part(key["project_key"]), encode_part(key["session_id"])]
    if key.get("subpath"):
        parts.append(encode_part(key["subpath"]))
    return ".".join(parts)


def project_prefix(project_key: str) -> str:
    return f"{PREFIX}.{encode_part(project_key)}."


def split_id(session_id: str) -> list[str | None] | None:
    """The decoded parts after ``cc`` (None for a digest part), or None for an id this mapping did not make."""
    parts = session_id.split(".")
    if parts[0] != PREFIX or len(parts) not in (3, 4):
        return None
    return [decode_part(part) for part in parts[1:]]


# -- lines <-> entries --------------------------------------------------------------------------------------------


def uuid_of(line: Mapping[str, Any]) -> str | None:
    value = line.get("uuid")
    return value if isinstance(value, str) and value else None


def to_message(line: dict[str, Any], tool_names: Mapping[str, str]) -> Message | None:
    """The message standing for a transcript line (a JSON object), or None when the line is kept in a custom entry."""
    body = line.get("message")
    kind = line.get("type")
    if not isinstance(body, dict) or kind not in ("user", "assistant") or body.get("role") != kind:
        return None
    try:
        message = _user(line, body, tool_names) if kind == "user" else _assistant(line, body)
    except (TypeError, ValueError, KeyError, AttributeError):
        return None
    try:
        if entry_of_message(message) == line:
            return message
    except (TypeError, ValueError, KeyError, AttributeError):
        pass
    return _with_extra(message, {"line": line})  # renders the line; the line itself is kept whole


def _timestamp(line: Mapping[str, Any]) -> int:
    value = line.get("timestamp")
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value).timestamp() * 1000)
        except (ValueError, OverflowError):
            pass
    return time.time_ns() // 1_000_000


def _skeleton(line: dict[str, Any], body: dict[str, Any], content: Any = _NOT_A_LINE) -> dict[str, Any]:
    rest = {k: v for k, v in body.items() if k != "content"}
    if content is not _NOT_A_LINE:
        rest["content"] = content
    return {**line, "message": rest}


def _user(line: dict[str, Any], body: dict[str, Any], tool_names: Mapping[str, str]) -> Message:
    content = body["content"]
    at = _timestamp(line)
    block = content[0] if isinstance(content, list) and len(content) == 1 else None
    if isinstance(block, dict) and block.get("type") == "tool_result":
        inner = block.get("content", _NOT_A_LINE)
        call_id = block["tool_use_id"]
        shape = "absent" if inner is _NOT_A_LINE else "str" if isinstance(inner, str) else "list"
        blocks = () if inner is _NOT_A_LINE else (TextContent(inner),) if isinstance(inner, str) else _ours(inner)
        kept = {k: v for k, v in block.items() if k != "content"}
        note = {"at": "tool_result", "shape": shape, "line": _skeleton(line, body, [kept])}
        return ToolResultMessage(
            tool_call_id=call_id, tool_name=tool_names.get(call_id, ""), content=blocks, is_error=block.get("is_error") is True,
            timestamp=at, extra={KEY: note},
        )
    note = {"at": "message", "line": _skeleton(line, body)}
    return UserMessage(content if isinstance(content, str) else _ours(content), timestamp=at, extra={KEY: note})


def _assistant(line: dict[str, Any], body: dict[str, Any]) -> Message:
    usage = body.get("usage")
    ours = None
    if isinstance(usage, dict):
        names = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        counts: list[int] = [c if isinstance(c := usage.get(k), int) and not isinstance(c, bool) and c >= 0 else 0
                             for k in names]
        ours = Usage(input=counts[0], output=counts[1], cache_read=counts[2], cache_write=counts[3], total_tokens=sum(counts))
    stop = body.get("stop_reason")
    model = body.get("model")
    return AssistantMessage(
        _ours(body["content"]), provider="anthropic", model=model if isinstance(model, str) else "", usage=ours,
        stop_reason=stop if isinstance(stop, str) else "stop", timestamp=_timestamp(line),
        extra={KEY: {"at": "message", "line": _skeleton(line, body)}},
    )


def _with_extra(message: Message, note: dict[str, Any]) -> Message:
    import attrs

    return attrs.evolve(message, extra={**message.extra, KEY: note})


def _ours(blocks: Any) -> tuple[Any, ...]:
    """Claude content blocks as ours; the keys a block of ours has no field for go in its ``extra``."""
    if not isinstance(blocks, list):
        raise TypeError("content is not a list")
    return tuple(_block(block) for block in blocks)


def _block(block: Any) -> Any:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text" and isinstance(block.get("text"), str):
        return TextContent(block["text"], extra=_rest(block, "type", "text"))
    if kind == "thinking" and isinstance(block.get("thinking"), str) and isinstance(block.get("signature"), str):
        rest = _rest(block, "type", "thinking", "signature")
        return ThinkingContent(block["thinking"], signature=block["signature"], extra=rest)
    if kind == "tool_use" and isinstance(block.get("input"), dict):
        rest = _rest(block, "type", "id", "name", "input")
        return ToolCall(id=block["id"], name=block["name"], arguments=block["input"], extra=rest)
    source: dict[str, Any] = block.get("source") if kind == "image" and isinstance(block.get("source"), dict) else {}
    exact = set(source) == {"type", "media_type", "data"} and source["type"] == "base64"
    if exact and all(isinstance(source[k], str) for k in ("data", "media_type")):
        return ImageContent(source["data"], source["media_type"], extra=_rest(block, "type", "source"))
    if not isinstance(kind, str):
        raise TypeError("a content block without a type")
    if kind in _OURS:  # a block of a type we know, in a shape we do not: the log wants it under another name
        return UnknownContent(type=f"{KEY}.{kind}", data={k: v for k, v in block.items() if k != "type"})
    return UnknownContent(type=kind, data={k: v for k, v in block.items() if k != "type"})


def _rest(block: dict[str, Any], *known: str) -> dict[str, Any]:
    rest = {k: v for k, v in block.items() if k not in known}
    return {KEY: rest} if rest else {}


def _theirs(blocks: Any) -> list[dict[str, Any]]:
    out = []
    for block in blocks:
        rest = dict(block.extra.get(KEY, {})) if hasattr(block, "extra") else {}
        if isinstance(block, TextContent):
            out.append({"type": "text", "text": block.text, **rest})
        elif isinstance(block, ThinkingContent):
            out.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature, **rest})
        elif isinstance(block, ToolCall):
            out.append({"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.arguments), **rest})
        elif isinstance(block, ImageContent):
            out.append({"type": "image", "source": {"type": "base64", "media_type": block.mime_type, "data": block.data}, **rest})
        else:
            kind = block.type[len(KEY) + 1 :] if block.type.startswith(KEY + ".") else block.type
            out.append({**block.data, "type": kind})
    return out


def entry_of_message(message: Any) -> dict[str, Any]:
    """The line a message made by :func:`to_message` stands for (``KeyError`` for one it did not make)."""
    note = message.extra[KEY]
    at, line = note.get("at"), note["line"]
    if at == "message":
        content = message.content if isinstance(message.content, str) else _theirs(message.content)
        return {**line, "message": {**line["message"], "content": content}}
    if at == "tool_result":
        block = dict(line["message"]["content"][0])
        shape = note["shape"]
        if shape == "str":
            if len(message.content) != 1 or not isinstance(message.content[0], TextContent) or message.content[0].extra:
                raise ValueError("not a single text block")
            block["content"] = message.content[0].text
        elif shape == "list":
            block["content"] = _theirs(message.content)
        return {**line, "message": {**line["message"], "content": [block]}}
    return dict(line)


def line_of(entry: Entry) -> Any:
    """The transcript line an entry holds, or ``NOT_A_LINE`` (leaf moves, labels, entries of other programs)."""
    if isinstance(entry, CustomEntryAppended):
        return entry.data if entry.custom_type == CUSTOM_TYPE else NOT_A_LINE
    if isinstance(entry, MessageAppended) and KEY in getattr(entry.message, "extra", ()):
        return entry_of_message(entry.message)
    return NOT_A_LINE


NOT_A_LINE = _NOT_A_LINE


def note_tool_names(names: dict[str, str], line: Any) -> None:
    """Remember the tool name of each ``tool_use`` block of an assistant line (a tool result names only the call)."""
    body = line.get("message") if isinstance(line, dict) and line.get("type") == "assistant" else None
    content = body.get("content") if isinstance(body, dict) else None
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            if isinstance(call_id, str) and isinstance(name, str):
                names[call_id] = name


def append_lines(session: Any, entries: list[dict[str, Any]], done: list[int] | None = None) -> int:
    """Append transcript lines (JSON objects) to a session: each with a ``uuid`` the session lacks, under its
    ``parentUuid`` when the session holds that entry (``null``: a new root), and each without a ``uuid``. Returns how
    many were written. ``done[0]``, if given, is where to start and is advanced past each line handled."""
    names: dict[str, str] = {}
    done = [0] if done is None else done
    written = 0
    for line in entries[: done[0]]:
        note_tool_names(names, line)
    while done[0] < len(entries):
        line = entries[done[0]]
        uuid = uuid_of(line)
        if uuid is not None and session.has_entry(uuid):
            done[0] += 1
            continue
        if uuid is not None and "parentUuid" in line:
            _place(session, line["parentUuid"])
        if line.get("type") == "user":
            _note_parent_tools(session, names, line)
        note_tool_names(names, line)
        message = to_message(line, names)
        try:
            if message is not None:
                session.append_message(message, entry_id=uuid)
        except SessionError as exc:  # a message the log refuses (checked before anything is written): keep the line whole
            if exc.code != "invalid_entry":
                raise
            message = None
        if message is None:
            session.append_custom_entry(CUSTOM_TYPE, line, entry_id=uuid)
        written += 1
        done[0] += 1
    return written


def _place(session: Any, parent: Any) -> None:
    """Move the leaf to the line's parent, unless the nearest line at or above the leaf is that parent already. A
    ``parentUuid`` the session does not hold (a line of another file) leaves the leaf where it is."""
    if parent is not None and (not isinstance(parent, str) or not session.has_entry(parent)):
        return
    if _nearest(session) != parent:
        session.move_to(parent)


def _nearest(session: Any) -> str | None:
    """The entry id of the nearest line with a ``uuid`` at or above the leaf (lines without one sit between)."""
    entry_id: str | None = session.leaf_id
    while entry_id is not None:
        entry = session.entry(entry_id)
        line = line_of(entry)
        if line is not NOT_A_LINE and uuid_of(line) == entry_id:
            return entry_id
        if line is NOT_A_LINE and entry.type not in ("custom", "label", "session_info"):
            return entry_id  # an entry of another program: the transcript continues from it
        entry_id = entry.parent_id
    return None


def _note_parent_tools(session: Any, names: dict[str, str], line: dict[str, Any]) -> None:
    parent = line.get("parentUuid")
    if isinstance(parent, str) and session.has_entry(parent):
        held = line_of(session.entry(parent))
        if held is not NOT_A_LINE:
            note_tool_names(names, held)


def read_lines(session: Any) -> list[Any]:
    """Every transcript line the session holds, in log order."""
    out = []
    for entry in session.get_entries():
        line = line_of(entry)
        if line is not NOT_A_LINE:
            out.append(line)
    return out
