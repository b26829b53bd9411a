"""One-line descriptions of entries and messages, as rich ``Text`` (never markup).

Session content is user data: it goes into ``Text`` objects verbatim, so a message that
contains ``[bold]`` is shown as typed, not interpreted by the terminal renderer.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

from sessiontree.domain.messages import ToolCall, message_text

PREVIEW_CHARS = 160

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
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def short_json(value: Any, limit: int = 80) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return one_line(text, limit)


def call_text(call: ToolCall) -> str:
    args = ", ".join(f"{k}={short_json(v, 40)}" for k, v in call.arguments.items())
    return f"{call.name}({args})"


def message_preview(message: Any) -> str:
    """The gist of a message: its text, else its tool calls, else its role."""
    role = getattr(message, "role", "?")
    text = message_text(message)
    if role == "assistant":
        calls = [call_text(b) for b in message.content if isinstance(b, ToolCall)]
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
        out.append(f"{role}", ROLE_STYLE.get(role, "bold"))
        if role == "assistant" and message.model:
            out.append(f" ({message.model})", "dim")
        if role == "tool_result":
            out.append(f" {message.tool_name}", "magenta")
            if message.is_error:
                out.append(" error", "bold red")
        out.append(": ")
        out.append(message_preview(message))
        return out
    style = TYPE_STYLE.get(kind, "dim cyan")
    out.append(kind, style)
    out.append(": ")
    out.append(_entry_gist(entry))
    return out


def _entry_gist(entry: Any) -> str:
    kind = entry.type
    if kind == "model_change":
        return f"{entry.provider}/{entry.model_id}"
    if kind == "thinking_level_change":
        return str(entry.thinking_level)
    if kind == "active_tools_change":
        return ", ".join(entry.active_tool_names) or "(none)"
    if kind == "compaction":
        return f"{entry.tokens_before:,} tokens before · " + one_line(entry.summary)
    if kind == "branch_summary":
        return one_line(entry.summary) or "(empty summary)"
    if kind == "custom":
        return f"{entry.custom_type} {short_json(entry.data)}"
    if kind == "custom_message":
        text = entry.content if isinstance(entry.content, str) else message_text(entry)
        return f"{entry.custom_type}: " + one_line(text)
    if kind == "label":
        return f"{entry.target_id} = {entry.label!r}" if entry.label else f"{entry.target_id} cleared"
    if kind == "session_info":
        return repr(entry.name) if entry.name else "(name cleared)"
    if kind == "leaf":
        return f"moved to {entry.target_id or 'before the first entry'}"
    return short_json(getattr(entry, "data", {}))
