"""One-line descriptions of entries and messages, as rich ``Text`` (never markup).

Session content is user data: it goes into ``Text`` objects verbatim, so a message that
contains ``[bold]`` is shown as typed, not interpreted by the terminal renderer. Every gist
reads only a bounded head of the text it summarises (``clip.py``), however long the text.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from rich.text import Text

from sessiontree.cli import clip
from sessiontree.domain.messages import TextContent, ToolCall
from sessiontree.wire.jsontext import dumps, spaced

PREVIEW_CHARS = 160
CALL_ARGUMENTS = 8  # a tool call's gist names at most this many arguments

ROLE_STYLE = {
    "user": "bold cyan",
    "assistant": "green",
    "tool_result": "magenta",
    "custom": "blue",
    "compaction_summary": "yellow",
    "branch_summary": "yellow",
}
TYPE_STYLE = {
    "compaction": "bold yellow",
    "branch_summary": "yellow",
    "custom": "blue",
    "custom_message": "blue",
    "label": "dim",
    "session_info": "dim",
}


def one_line(text: str, limit: int = PREVIEW_CHARS) -> str:
    """Whitespace collapsed to single spaces, cut at ``limit`` characters with an ellipsis."""
    return clip.one_line(text, limit)


def short_json(value: Any, limit: int = 80) -> str:
    if isinstance(value, str) and len(value) > limit * 4:  # a long string needs only its head encoded
        return one_line(dumps(value[: limit * 4]).decode()[:-1] + "…", limit)
    try:
        text = spaced(value, str)
    except (TypeError, ValueError):
        text = repr(value)
    return one_line(text, limit)


def call_text(call: ToolCall) -> str:
    items = list(call.arguments.items())
    args = [f"{clip.clip_field(str(k), 40)}={short_json(v, 40)}" for k, v in items[:CALL_ARGUMENTS]]
    if len(items) > CALL_ARGUMENTS:
        args.append(f"… {len(items) - CALL_ARGUMENTS} more")
    return f"{clip.clip_field(call.name, 60)}({', '.join(args)})"


def text_head(message: Any, chars: int = PREVIEW_CHARS * 4) -> str:
    """The start of a message's text (its text blocks joined), at most ``chars`` characters plus one, so a caller can
    tell it was cut: the same as ``message_text`` for short messages, without copying a long one."""
    content = getattr(message, "content", None)
    if content is None:
        content = getattr(message, "summary", None)
        content = content if isinstance(content, str) else ""
    if isinstance(content, str):
        return content[: chars + 1]
    out: list[str] = []
    size = 0
    for block in content:
        if isinstance(block, TextContent):
            out.append(block.text[: chars + 1 - size])
            size += len(out[-1])
            if size > chars:
                break
    return "".join(out)


def message_preview(message: Any) -> str:
    """The gist of a message: its text, else its tool calls, else its role."""
    role = getattr(message, "role", "?")
    text = text_head(message)
    if role == "assistant":
        calls = [call_text(b) for b in islice((b for b in message.content if isinstance(b, ToolCall)), CALL_ARGUMENTS)]
        if calls:
            text = (text + " → " if text else "→ ") + ", ".join(calls)
    if role == "tool_result" and not text:
        text = "(no text)"
    if not text and hasattr(message, "data"):
        text = short_json(message.data)
    return one_line(text)


def entry_text(entry: Any) -> Text:
    """``<type>: <gist>`` for one entry, styled by type or role."""
    kind = entry.type
    out = Text()
    if kind == "message":
        message = entry.message
        role = getattr(message, "role", "?")
        out.append(clip.clip_field(str(role), 40), ROLE_STYLE.get(role, "bold"))
        if role == "assistant" and message.model:
            out.append(f" ({clip.clip_field(message.model, 60)})", "dim")
        if role == "tool_result":
            out.append(f" {clip.clip_field(message.tool_name, 60)}", "magenta")
            if message.is_error:
                out.append(" error", "bold red")
        out.append(": ")
        out.append(message_preview(message))
        return out
    style = TYPE_STYLE.get(kind, "dim cyan")
    out.append(clip.clip_field(kind, 40), style)
    out.append(": ")
    out.append(_entry_gist(entry))
    return out


def _entry_gist(entry: Any) -> str:
    kind = entry.type
    if kind == "model_change":
        return one_line(f"{entry.provider}/{entry.model_id}")
    if kind == "thinking_level_change":
        return one_line(str(entry.thinking_level))
    if kind == "active_tools_change":
        return one_line(", ".join(entry.active_tool_names[:100])) or "(none)"
    if kind == "compaction":
        return f"{entry.tokens_before:,} tokens before · " + one_line(entry.summary)
    if kind == "branch_summary":
        return one_line(entry.summary) or "(empty summary)"
    if kind == "custom":
        return f"{clip.clip_field(entry.custom_type, 60)} {short_json(entry.data)}"
    if kind == "custom_message":
        return f"{clip.clip_field(entry.custom_type, 60)}: " + one_line(text_head(entry))
    if kind == "label":
        target = clip.clip_field(str(entry.target_id), 60)
        return f"{target} = {_quoted(entry.label)}" if entry.label else f"{target} cleared"
    if kind == "session_info":
        return _quoted(entry.name) if entry.name else "(name cleared)"
    if kind == "leaf":
        return f"moved to {clip.clip_field(entry.target_id or 'before the first entry', 60)}"
    return short_json(getattr(entry, "data", {}))


def _quoted(text: str) -> str:
    return repr(text) if len(text) <= PREVIEW_CHARS else repr(text[:PREVIEW_CHARS]) + "…"


def fork_note(parent_session: str | None, forked_at: str | None) -> str | None:
    """``fork of 01a2274b at 25318bf2`` for a fork (its source by short id, and the source's entry its branch was copied
    up to, when the header records it); None for a session that is not a fork. A source recorded as a file path (pi's
    way) is named by the session id in its file name."""
    if not parent_session:
        return None
    name = parent_session.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".jsonl")
    source = name.rsplit("_", 1)[-1] if "/" in parent_session or parent_session.endswith(".jsonl") else name
    note = f"fork of {source[:8] if len(source) == 36 else one_line(source, 60)}"  # a UUID by its first 8
    return note + (f" at {one_line(forked_at, 40)}" if forked_at else "")
