"""Rich renderables for a context (the messages the model sees), statistics and listings."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group
from rich.constrain import Constrain
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from sessiontree.cli import clip
from sessiontree.cli.describe import ROLE_STYLE, fork_note, message_preview, one_line
from sessiontree.domain.events import parse_timestamp
from sessiontree.domain.messages import (
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    UnknownContent,
)
from sessiontree.projections.compaction import DEFAULT_ESTIMATOR
from sessiontree.wire.jsontext import spaced

MAX_BLOCKS = 40  # content blocks shown per message unless --full


def local_time(timestamp: str) -> str:
    """An entry timestamp in the local time zone, to the second."""
    try:
        return parse_timestamp(timestamp).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, TypeError):
        return clip.clip_field(str(timestamp), 40)


def cut(text: str | Text) -> Text:
    """A cell that is cut with an ellipsis rather than wrapped. Put it in the one column
    declared without ``no_wrap``: rich narrows that column first on a narrow terminal."""
    cell = Text(text) if isinstance(text, str) else text
    cell.no_wrap = True
    cell.overflow = "ellipsis"
    return cell


def _shown(text: str, full: bool, style: str = "", prefix: Text | None = None) -> list[Text]:
    """A block's text, clipped with a marker of what was left out, or whole (``full``) in pieces that rich lays out in
    linear time (one long ``Text`` costs time quadratic in its size)."""
    if full:
        parts = [Text(piece, style) for piece in clip.pieces(text)]
    else:
        clipped = clip.clip_block(text)
        parts = [Text(clipped.text, style)]
        if clipped.more_chars:
            parts[0].append("\n" + clipped.marker(), "dim italic")
    if prefix is not None:
        parts[0] = Text.assemble(prefix, parts[0])
    return parts


def _block(block: Any, full: bool) -> list[Text]:
    if isinstance(block, TextContent):
        return _shown(block.text, full)
    if isinstance(block, ThinkingContent):
        return _shown(block.thinking, full, "dim italic", Text("thinking: ", "dim bold"))
    if isinstance(block, ToolCall):
        name = clip.visible(block.name) if full else clip.clip_field(block.name, 60)
        arguments = spaced(dict(block.arguments), str)
        return _shown(arguments, full, "magenta", Text.assemble(("→ ", "bold"), (name, "bold magenta"), " "))
    if isinstance(block, ImageContent):
        return [Text(f"[image {clip.clip_field(block.mime_type, 40)}, {len(block.data) * 3 // 4:,} bytes]", "dim")]
    if isinstance(block, UnknownContent):
        return [Text(f"[{clip.clip_field(str(block.type), 40)} block]", "dim")]
    return []


def _body(message: Any, full: bool) -> Group:
    content = getattr(message, "content", None)
    if content is None:
        content = getattr(message, "summary", None) or one_line(str(getattr(message, "data", "")))
    if isinstance(content, str):
        return Group(*_shown(content, full))
    blocks = content if full else content[:MAX_BLOCKS]
    parts = [part for block in blocks for part in _block(block, full)] or [Text()]
    if len(content) > len(blocks):
        parts.append(Text(f"… {len(content) - len(blocks):,} more blocks ({clip.FULL_HINT})", "dim italic"))
    return Group(*parts)


def _field(text: Any, full: bool = False, chars: int = 60) -> str:
    return clip.visible(str(text)) if full else clip.clip_field(str(text), chars)


def message_panel(index: int, message: Any, full: bool = False) -> Panel:
    role = getattr(message, "role", "?")
    title = Text(f"#{index} {_field(role)}", ROLE_STYLE.get(role, "bold"))
    notes = [f"≈{DEFAULT_ESTIMATOR(message):,} tokens"]
    if role == "assistant":
        model = f"{message.provider}/{message.model}" if message.provider else message.model
        notes.insert(0, _field(model, full))
        if message.usage is not None:
            notes.append(f"usage in {message.usage.input:,} out {message.usage.output:,}")
        if message.stop_reason not in ("stop", "tool_use", "toolUse"):
            notes.append(f"stop: {_field(message.stop_reason, full)}")
    elif role == "tool_result":
        notes.insert(0, _field(message.tool_name, full) + (" (error)" if message.is_error else ""))
    elif role == "custom":
        notes.insert(0, _field(message.custom_type, full))
    elif role == "compaction_summary":
        notes.insert(0, f"{message.tokens_before:,} tokens before")
    elif role == "branch_summary":
        notes.insert(0, f"from {_field(message.from_id, full)}")
    return Panel(
        _body(message, full), title=title, title_align="left", subtitle=" · ".join(notes), subtitle_align="right", box=box.ROUNDED
    )


TOOL_NAMES = 50  # tool names the context heading lists unless --full


def _tools(tools: list[str] | None, full: bool) -> str:
    if tools is None:
        return "(all)"
    if not tools:
        return "(none)"
    shown = [_field(t, full, 40) for t in (tools if full else tools[:TOOL_NAMES])]
    return ", ".join(shown) + (f" … {len(tools) - len(shown):,} more" if len(tools) > len(shown) else "")


def token_source(tokens: Any) -> str:
    """Where a context's token figure comes from (a ``ContextTokens``), in a few words."""
    if tokens.usage_tokens is None:
        return "estimated, chars/4"
    return f"{tokens.usage_tokens:,} reported by the last reply + ≈{tokens.estimated_tokens:,} after it"


def context_heading(session_id: str, leaf: str | None, context: Any, tokens: Any, full: bool = False) -> Text:
    """The context's heading; ``tokens`` is the ``ContextTokens`` compaction uses too, so the two never disagree."""
    model = context.model
    out = Text()
    out.append(f"context of {_field(session_id, full)} at leaf {_field(leaf or '(none)', full)}: ", "bold")
    out.append(f"{len(context.messages)} messages, ≈{tokens.tokens:,} tokens ({token_source(tokens)})", "bold")
    model_name = _field(f"{model['provider']}/{model['model_id']}", full, 120) if model else "(not set)"
    out.append(f"\nmodel {model_name}", "dim")
    out.append(f" · thinking {_field(context.thinking_level, full)}", "dim")
    out.append(f" · tools {_tools(context.active_tool_names, full)}", "dim")
    return out


PANEL_WIDTH = 120  # boxes past this are hard to read; piped output (no width limit) keeps them at this too


def context_view(
    session_id: str, leaf: str | None, context: Any, tokens: Any, full: bool = False, last: int | None = None
) -> Constrain:
    """The context as a heading and one box per message; ``tokens``: its ``ContextTokens``."""
    parts: list[Any] = [context_heading(session_id, leaf, context, tokens, full)]
    messages = context.messages
    start = 0 if last is None else max(0, len(messages) - last)
    if start:
        parts.append(Text(f"… {start} earlier messages (raise --last to see)", "dim italic"))
    parts.extend(message_panel(i, m, full) for i, m in enumerate(messages[start:], start + 1))
    return Constrain(Group(*parts), width=PANEL_WIDTH)


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
        table.add_row(str(i), Text(_field(role), ROLE_STYLE.get(role, "")), tokens, cut(message_preview(message)))
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
        counts.add_row(_field(kind), f"{n:,}")
    counts.add_row(Text("total", "bold"), Text(f"{stats.entry_count:,}", "bold"))
    roles = Table(title="messages by role", box=box.SIMPLE_HEAD, title_justify="left")
    roles.add_column("role")
    roles.add_column("count", justify="right")
    for role, n in sorted(stats.messages_by_role.items(), key=lambda kv: -kv[1]):
        roles.add_row(Text(_field(role), ROLE_STYLE.get(role, "")), f"{n:,}")
    roles.add_row("tool calls", f"{stats.tool_calls:,}")
    title = "tokens and cost: whole session, and each branch by its last entry (◀ current)"
    usage = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    usage.add_column("scope", no_wrap=True)
    _usage_columns(usage)
    usage.add_row(Text("session", "bold"), *_usage_cells(stats))
    for tip, current, branch in branches:
        usage.add_row(Text(f"→{_field(tip)}" + (" ◀" if current else ""), "cyan" if current else ""), *_usage_cells(branch))
    models = Table(title="per model (assistant replies)", box=box.SIMPLE_HEAD, title_justify="left")
    models.add_column("model", no_wrap=True)
    for name in ("replies", "input", "output", "total", "cost $"):
        models.add_column(name, justify="right", no_wrap=True)
    for key, per in sorted(stats.by_model.items()):
        counts_cells = (per.messages, per.input, per.output, per.total_tokens)
        models.add_row(_field(key, chars=120), *(f"{n:,}" for n in counts_cells), f"{per.cost_total:.4f}")
    return Group(counts, roles, usage, models)


def _name_cell(info: Any) -> Text:
    """The session's name, and under it what it is a fork of."""
    cell = Text(clip.clip_field(info.name or ""))
    fork = fork_note(info.parent_session, info.forked_at)
    if fork:
        cell.append(("\n" if info.name else "") + fork, "magenta")
    return cell


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
                _field(info.id),
                f"{info.message_count:,}",
                _name_cell(info),
                Text(one_line(info.first_message or "(no messages)")),
                Text(clip.clip_field(info.cwd)),
            )
        return table
    table.add_column("sessions, newest first", no_wrap=True, overflow="ellipsis")
    for info in infos:
        card = Text(no_wrap=True, overflow="ellipsis")
        card.append(_field(info.id), "cyan")
        card.append(f"  {local_time(info.modified)}  {info.message_count:,} msgs", "dim")
        if info.name:
            card.append("\n")
            card.append(clip.clip_field(info.name), "bold yellow")
        fork = fork_note(info.parent_session, info.forked_at)
        if fork:
            card.append("\n")
            card.append(fork, "magenta")
        card.append("\n")
        card.append(one_line(info.first_message or "(no messages)"))
        if info.cwd:
            card.append("\n")
            card.append(clip.clip_field(info.cwd), "dim")
        table.add_row(card, end_section=True)
    return table
