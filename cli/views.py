"""Rich renderables for a context (the messages the model sees), statistics and listings."""

from __future__ import annotations

import json
from typing import Any

from rich import box
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from sessiontree.cli.describe import ROLE_STYLE, message_preview, one_line
from sessiontree.domain.events import parse_timestamp
from sessiontree.domain.messages import (
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    UnknownContent,
)
from sessiontree.projections.tokens import DEFAULT_ESTIMATOR

MAX_LINES = 12


def local_time(timestamp: str) -> str:
    """An entry timestamp in the local time zone, to the second."""
    try:
        return parse_timestamp(timestamp).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, TypeError):
        return timestamp


def cut(text: str | Text) -> Text:
    """A cell that is cut with an ellipsis rather than wrapped. Put it in the one column
    declared without ``no_wrap``: rich narrows that column first on a narrow terminal."""
    cell = Text(text) if isinstance(text, str) else text
    cell.no_wrap = True
    cell.overflow = "ellipsis"
    return cell


def _clip(text: str, full: bool) -> str:
    lines = text.splitlines() or [""]
    if full or len(lines) <= MAX_LINES:
        return text
    return "\n".join(lines[:MAX_LINES]) + f"\n… {len(lines) - MAX_LINES} more lines (--full shows all)"


def _body(message: Any, full: bool) -> Text:
    out = Text()
    content = getattr(message, "content", None)
    if content is None:
        content = getattr(message, "summary", None) or one_line(str(getattr(message, "data", "")))
    if isinstance(content, str):
        out.append(_clip(content, full))
        return out
    for i, block in enumerate(content):
        if i:
            out.append("\n")
        if isinstance(block, TextContent):
            out.append(_clip(block.text, full))
        elif isinstance(block, ThinkingContent):
            out.append("thinking: ", "dim bold")
            out.append(_clip(block.thinking, full), "dim italic")
        elif isinstance(block, ToolCall):
            out.append("→ ", "bold")
            out.append(block.name, "bold magenta")
            arguments = json.dumps(dict(block.arguments), ensure_ascii=False, indent=None, default=str)
            out.append(" " + _clip(arguments, full), "magenta")
        elif isinstance(block, ImageContent):
            out.append(f"[image {block.mime_type}, {len(block.data) * 3 // 4:,} bytes]", "dim")
        elif isinstance(block, UnknownContent):
            out.append(f"[{block.type} block]", "dim")
    return out


def message_panel(index: int, message: Any, full: bool = False) -> Panel:
    role = getattr(message, "role", "?")
    title = Text(f"#{index} {role}", ROLE_STYLE.get(role, "bold"))
    notes = [f"≈{DEFAULT_ESTIMATOR(message):,} tokens"]
    if role == "assistant":
        notes.insert(0, f"{message.provider}/{message.model}" if message.provider else message.model)
        if message.usage is not None:
            notes.append(f"usage in {message.usage.input:,} out {message.usage.output:,}")
        if message.stop_reason not in ("stop", "tool_use", "toolUse"):
            notes.append(f"stop: {message.stop_reason}")
    elif role == "tool_result":
        notes.insert(0, message.tool_name + (" (error)" if message.is_error else ""))
    elif role == "custom":
        notes.insert(0, message.custom_type)
    elif role == "compaction_summary":
        notes.insert(0, f"{message.tokens_before:,} tokens before")
    elif role == "branch_summary":
        notes.insert(0, f"from {message.from_id}")
    return Panel(
        _body(message, full), title=title, title_align="left", subtitle=" · ".join(notes), subtitle_align="right", box=box.ROUNDED
    )


def context_heading(session_id: str, leaf: str | None, context: Any, tokens: int) -> Text:
    model = context.model
    out = Text()
    out.append(f"context of {session_id} at leaf {leaf or '(none)'}: ", "bold")
    out.append(f"{len(context.messages)} messages, ≈{tokens:,} tokens (chars/4)", "bold")
    out.append(f"\nmodel {model['provider']}/{model['model_id']}" if model else "\nmodel (not set)", "dim")
    out.append(f" · thinking {context.thinking_level}", "dim")
    tools = context.active_tool_names
    out.append(f" · tools {', '.join(tools) if tools else '(all)' if tools is None else '(none)'}", "dim")
    return out


def context_view(session_id: str, leaf: str | None, context: Any, full: bool = False, last: int | None = None) -> Group:
    tokens = sum(DEFAULT_ESTIMATOR(m) for m in context.messages)
    parts: list[Any] = [context_heading(session_id, leaf, context, tokens)]
    messages = context.messages
    start = 0 if last is None else max(0, len(messages) - last)
    if start:
        parts.append(Text(f"… {start} earlier messages (raise --last to see)", "dim italic"))
    parts.extend(message_panel(i, m, full) for i, m in enumerate(messages[start:], start + 1))
    return Group(*parts)


def context_table(context: Any) -> Table:
    """One row per message (the compact form the demo prints)."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("#", justify="right", style="dim", no_wrap=True)
    table.add_column("role", no_wrap=True)
    table.add_column("≈tokens", justify="right", style="dim", no_wrap=True)
    table.add_column("message")
    for i, message in enumerate(context.messages, 1):
        role = getattr(message, "role", "?")
        tokens = f"{DEFAULT_ESTIMATOR(message):,}"
        table.add_row(str(i), Text(role, ROLE_STYLE.get(role, "")), tokens, cut(message_preview(message)))
    return table


def _usage_columns(table: Table) -> None:
    for name in ("input", "output", "cache rd", "cache wr", "total", "cost $"):
        table.add_column(name, justify="right", no_wrap=True)


def _usage_cells(s: Any) -> list[str]:
    counts = (s.input, s.output, s.cache_read, s.cache_write, s.total_tokens)
    return [*(f"{n:,}" for n in counts), f"{s.cost_total:.4f}"]


def stats_view(stats: Any, branches: list[tuple[str, bool, Any]]) -> Group:
    counts = Table(title="entries by type", box=box.SIMPLE_HEAD, title_justify="left")
    counts.add_column("type")
    counts.add_column("count", justify="right")
    for kind, n in sorted(stats.entries_by_type.items(), key=lambda kv: -kv[1]):
        counts.add_row(kind, f"{n:,}")
    counts.add_row(Text("total", "bold"), Text(f"{stats.entry_count:,}", "bold"))
    roles = Table(title="messages by role", box=box.SIMPLE_HEAD, title_justify="left")
    roles.add_column("role")
    roles.add_column("count", justify="right")
    for role, n in sorted(stats.messages_by_role.items(), key=lambda kv: -kv[1]):
        roles.add_row(Text(role, ROLE_STYLE.get(role, "")), f"{n:,}")
    roles.add_row("tool calls", f"{stats.tool_calls:,}")
    title = "tokens and cost: whole session, and each branch by its last entry (◀ current)"
    usage = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    usage.add_column("scope", no_wrap=True)
    _usage_columns(usage)
    usage.add_row(Text("session", "bold"), *_usage_cells(stats))
    for tip, current, branch in branches:
        usage.add_row(Text(f"→{tip}" + (" ◀" if current else ""), "cyan" if current else ""), *_usage_cells(branch))
    models = Table(title="per model (assistant replies)", box=box.SIMPLE_HEAD, title_justify="left")
    models.add_column("model", no_wrap=True)
    for name in ("replies", "input", "output", "total", "cost $"):
        models.add_column(name, justify="right", no_wrap=True)
    for key, per in sorted(stats.by_model.items()):
        models.add_row(
            key, f"{per.messages:,}", f"{per.input:,}", f"{per.output:,}", f"{per.total_tokens:,}", f"{per.cost_total:.4f}"
        )
    return Group(counts, roles, usage, models)


def sessions_table(infos: list[Any], width: int) -> Table:
    """The ``ls`` listing: one row per session, or one card per session on narrow terminals."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    if width >= 120:
        table.add_column("modified", no_wrap=True)
        table.add_column("id", no_wrap=True, style="cyan")
        table.add_column("msgs", justify="right", no_wrap=True)
        table.add_column("name", style="bold yellow", overflow="fold", max_width=30)
        table.add_column("first message", no_wrap=True, overflow="ellipsis", max_width=60)
        table.add_column("cwd", style="dim", overflow="fold")
        for info in infos:
            table.add_row(
                local_time(info.modified),
                info.id,
                f"{info.message_count:,}",
                Text(info.name or ""),
                Text(one_line(info.first_message or "(no messages)")),
                Text(info.cwd),
            )
        return table
    table.add_column("sessions, newest first", no_wrap=True, overflow="ellipsis")
    for info in infos:
        card = Text(no_wrap=True, overflow="ellipsis")
        card.append(info.id, "cyan")
        card.append(f"  {local_time(info.modified)}  {info.message_count:,} msgs", "dim")
        if info.name:
            card.append("\n")
            card.append(info.name, "bold yellow")
        card.append("\n")
        card.append(one_line(info.first_message or "(no messages)"))
        if info.cwd:
            card.append("\n")
            card.append(info.cwd, "dim")
        table.add_row(card, end_section=True)
    return table
