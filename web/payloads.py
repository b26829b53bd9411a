"""The JSON the viewer's pages are built from (docs/web.md): plain dicts, from the public session API only.

Every function here only reads. Entry references are resolved as the command line resolves them (an id, a unique
id prefix of 4+ characters, or a label; ``root`` where a move allows it).
"""

from __future__ import annotations

from itertools import islice
from typing import Any

import attrs

from sessiontree.cli import clip
from sessiontree.cli.cmd_inspect import context_payload
from sessiontree.cli.describe import entry_text, message_preview
from sessiontree.cli.replay_steps import common_prefix
from sessiontree.compaction import estimate_context_tokens
from sessiontree.domain.errors import SessionError
from sessiontree.domain.messages import ImageContent, TextContent, ThinkingContent, ToolCall
from sessiontree.projections.context import SessionContextBuildOptions
from sessiontree.projections.tokens import DEFAULT_ESTIMATOR
from sessiontree.projections.tool_pairs import is_synthetic, repair_tool_pairs

BLOCK_LINES = 30  # a block shows this many lines in the context page before "show all"
BLOCK_CHARS = 4_000
MAX_LISTED = 500  # entries a diff lists per side


def info_row(info: Any) -> dict[str, Any]:
    """One row of the sessions list (from ``repo.list()``: costs no replay)."""
    return {k: getattr(info, k) for k in ("id", "name", "cwd", "created", "modified", "message_count", "first_message")}


def branch_tips(reader: Any) -> list[str]:
    """The last entry of every branch (tree nodes without children), in log order; from the heads alone."""
    tree = reader.projection("tree")
    return [h.id for h in reader.iter_heads() if h.type != "leaf" and not tree.get(h.id)]


def summary(session: Any) -> dict[str, Any]:
    """A session at a glance: entries, the leaf, tokens and cost, its labels and the tips of its branches."""
    stats = session.projection("stats")  # the whole session's (read only): get_session_stats decodes the branch too
    tips = branch_tips(session)
    return {
        "id": session.id, "name": session.get_session_name(), "cwd": session.header.cwd, "created": session.header.timestamp,
        "version": session.version, "entries": len(session), "leaf_id": session.leaf_id,
        "message_count": stats.message_count, "total_tokens": stats.total_tokens, "cost_total": stats.cost_total,
        "labels": session.get_labels(), "branch_tips": tips, "location": session.storage.location,
        "read_only": bool(getattr(session.storage, "read_only", False)),
    }


def verify_payload(session: Any) -> dict[str, Any]:
    """The verify verdict of a session's log: ok, chained, the first bad line, the first problems."""
    from sessiontree import verify

    report = verify(session)
    out = report.to_dict()
    out["problems"] = out["problems"][:20]
    out["warnings"] = out["warnings"][:20]
    out["summary"] = report.summary()
    return out


def resolve(session: Any, ref: str | None) -> str | None:
    """The entry id ``ref`` names (None or empty: the current leaf)."""
    from sessiontree.cli.target import resolve_entry

    if ref is None or ref == "":
        return session.leaf_id  # type: ignore[no-any-return]  # a str or None
    return resolve_entry(session, ref)


def reader_at(session: Any, version: int | None) -> Any:
    return session if version is None or version == session.version else session.at(version)


def context_json(session: Any, ref: str | None, version: int | None = None) -> dict[str, Any]:
    """Exactly what ``sessiontree context --json`` prints: the messages in their wire form and the settings."""
    reader = reader_at(session, version)
    leaf = resolve(reader, ref)
    context = reader.build_context() if leaf == reader.leaf_id else reader.build_context(leaf_id=leaf)
    return context_payload(reader, context, leaf)


def _blocks(message: Any) -> list[Any]:
    content = getattr(message, "content", None)
    if content is None:
        text = getattr(message, "summary", None)
        return [TextContent(text=text if isinstance(text, str) else clip.one_line(str(getattr(message, "data", "")), 400))]
    return [TextContent(text=content)] if isinstance(content, str) else list(content)


def block_text(block: Any) -> tuple[str, str]:
    """A content block as (kind, text): what the page shows of it."""
    import json

    if isinstance(block, TextContent):
        return "text", block.text
    if isinstance(block, ThinkingContent):
        return "thinking", block.thinking
    if isinstance(block, ToolCall):
        arguments = json.dumps(dict(block.arguments), ensure_ascii=False, indent=2, default=str)
        return "tool_call", f"{block.name} ({block.id})\n{arguments}"
    if isinstance(block, ImageContent):
        return "image", f"[image {block.mime_type}, {len(block.data) * 3 // 4:,} bytes]"
    return "unknown", f"[{getattr(block, 'type', '?')} block]"


def _message_view(index: int, message: Any) -> dict[str, Any]:
    role = getattr(message, "role", "?")
    notes: list[str] = []
    if role == "assistant":
        notes.append(f"{message.provider}/{message.model}" if message.provider else str(message.model))
        if message.usage is not None:
            notes.append(f"usage in {message.usage.input:,} out {message.usage.output:,}")
        notes.append(f"stop: {message.stop_reason}")
    elif role == "tool_result":
        notes.append(message.tool_name + (" (error)" if message.is_error else ""))
        if is_synthetic(message):
            notes.append("added by the repair: no result was recorded")
    elif role == "custom":
        notes.append(message.custom_type)
    elif role == "compaction_summary":
        notes.append(f"{message.tokens_before:,} tokens before")
    elif role == "branch_summary":
        notes.append(f"from {message.from_id}")
    blocks = []
    for b, block in enumerate(_blocks(message)):
        kind, text = block_text(block)
        clipped = clip.clip_block(text, BLOCK_LINES, BLOCK_CHARS)
        blocks.append({"index": b, "kind": kind, "text": clipped.text, "more_chars": clipped.more_chars,
                       "more_lines": clipped.more_lines})
    return {"index": index, "role": role, "tokens": DEFAULT_ESTIMATOR(message), "notes": notes, "blocks": blocks}


REPAIR = SessionContextBuildOptions(entry_transforms=[repair_tool_pairs])


def _context_and_tokens(reader: Any, leaf: str | None, repair: bool = False) -> tuple[Any, Any]:
    """The context at ``leaf`` (``repair``: with its tool calls repaired) and its token figure; at the current leaf,
    from the context the session keeps."""
    options = REPAIR if repair else None
    if leaf == reader.leaf_id:
        return reader.build_context(options), estimate_context_tokens(reader)
    return reader.build_context(options, leaf_id=leaf), estimate_context_tokens(reader, leaf_id=leaf)


PAGE_MESSAGES = 100  # messages one context page shows (the settings and the token estimate cover them all)


def context_view(
    session: Any, ref: str | None, version: int | None = None, start: int | None = None, count: int = PAGE_MESSAGES,
    repair: bool = False,
) -> dict[str, Any]:
    """The context as the page shows it: settings, the token estimate, the tool-call problems (``repair``: the context
    with them repaired), and messages ``start..start+count-1`` (from 1; by default the last ``count``), each with its
    blocks clipped."""
    reader = reader_at(session, version)
    leaf = resolve(reader, ref)
    context, tokens = _context_and_tokens(reader, leaf, repair)
    entry = reader.entry(leaf) if leaf is not None else None
    messages = context.messages
    total = len(messages)
    count = max(1, count)
    first = max(1, total - count + 1) if start is None else min(max(1, start), max(1, total))
    return {
        "session_id": reader.id, "leaf_id": leaf, "version": reader.version, "entry": _entry_brief(entry),
        "thinking_level": context.thinking_level, "model": dict(context.model) if context.model else None,
        "active_tool_names": context.active_tool_names, "estimated_tokens": tokens.tokens,
        "reported_tokens": tokens.usage_tokens, "total_messages": total, "start": first, "repaired": repair,
        "problems": [p.to_dict() for p in reader.check_context(leaf_id=leaf)],
        "messages": [_message_view(i, messages[i - 1]) for i in range(first, min(total, first + count - 1) + 1)],
    }


def block_payload(
    session: Any, ref: str | None, message: int, block: int, version: int | None = None, repair: bool = False
) -> dict[str, Any]:
    """One whole block of the context at ``ref`` (``repair``: repaired): message ``message`` (from 1), block ``block``
    (from 0)."""
    reader = reader_at(session, version)
    messages = reader.build_context(REPAIR if repair else None, leaf_id=resolve(reader, ref)).messages
    if not 1 <= message <= len(messages):
        raise SessionError("not_found", f"the context has no message {message} (it has {len(messages)})")
    blocks = _blocks(messages[message - 1])
    if not 0 <= block < len(blocks):
        raise SessionError("not_found", f"message {message} has no block {block} (it has {len(blocks)})")
    kind, text = block_text(blocks[block])
    return {"message": message, "block": block, "kind": kind, "text": text}


def _entry_brief(entry: Any) -> dict[str, Any] | None:
    if entry is None:
        return None
    return {"id": entry.id, "parent_id": entry.parent_id, "type": entry.type, "timestamp": entry.timestamp,
            "text": clip.one_line(entry_text(entry).plain, 240)}


def _brief_message(message: Any) -> dict[str, Any]:
    return {"role": getattr(message, "role", "?"), "text": message_preview(message), "tokens": DEFAULT_ESTIMATOR(message)}


def replay_step(session: Any, version: int) -> dict[str, Any]:
    """Event ``version`` (1 is the header) and what it changed: the leaf, and the context's messages."""
    view = session.at(version)
    before = session.at(version - 1) if version > 1 else None
    event = None
    if version > 1:  # the entry this event appended: the view's last
        event = view.entry(next(islice(view.iter_heads(), len(view) - 1, None)).id)
    old = list(before.build_context().messages) if before is not None else []
    new = list(view.build_context().messages)
    keep = common_prefix(old, new)
    tokens = view.estimate_context_tokens()
    return {
        "session_id": session.id, "version": version, "versions": session.version, "entries": len(view),
        "event": {"type": "session", "id": session.id, "timestamp": view.header.timestamp, "parent_id": None,
                  "text": f"session started · cwd {view.header.cwd or '(none)'}"} if version == 1 else _entry_brief(event),
        "leaf_before": before.leaf_id if before is not None else None, "leaf_after": view.leaf_id,
        "removed": [_brief_message(m) for m in old[keep:]], "added": [_brief_message(m) for m in new[keep:]],
        "context_size": len(new), "estimated_tokens": tokens.tokens,
        "labels": view.get_labels(), "name": view.get_session_name(),
    }


def _path_ids(session: Any, leaf: str | None) -> list[str]:
    return [e.id for e in session.get_branch(leaf)] if leaf is not None else []


def _settings(context: Any, tokens: Any) -> dict[str, Any]:
    return {"model": dict(context.model) if context.model else None, "thinking_level": context.thinking_level,
            "active_tool_names": context.active_tool_names, "messages": len(context.messages), "estimated_tokens": tokens.tokens}


def diff_payload(session: Any, a_ref: str | None, b_ref: str | None) -> dict[str, Any]:
    """Two branches (by their last entries) side by side: where they diverge, the entries only one has, and how
    their contexts differ (the messages after the shared prefix, and the settings)."""
    a, b = resolve(session, a_ref), resolve(session, b_ref)
    path_a, path_b = _path_ids(session, a), _path_ids(session, b)
    shared = common_prefix(path_a, path_b)
    ctx_a, ctx_b = session.build_context(leaf_id=a), session.build_context(leaf_id=b)
    msgs_a, msgs_b = list(ctx_a.messages), list(ctx_b.messages)
    same = common_prefix(msgs_a, msgs_b)
    set_a = _settings(ctx_a, estimate_context_tokens(session, leaf_id=a))
    set_b = _settings(ctx_b, estimate_context_tokens(session, leaf_id=b))

    def side(leaf: str | None, path: list[str], messages: list[Any], settings: dict[str, Any]) -> dict[str, Any]:
        only = path[shared:]
        return {"leaf_id": leaf, "entry": _entry_brief(session.entry(leaf)) if leaf else None, "path_length": len(path),
                "only": [_entry_brief(session.entry(i)) for i in only[:MAX_LISTED]], "only_count": len(only),
                "context_rest": [_brief_message(m) for m in messages[same:same + MAX_LISTED]],
                "context_rest_count": len(messages) - same, "settings": settings}

    return {
        "session_id": session.id, "diverge_at": path_a[shared - 1] if shared else None,
        "diverge_entry": _entry_brief(session.entry(path_a[shared - 1])) if shared else None,
        "shared_entries": shared, "shared_messages": same,
        "settings_differ": sorted(k for k in set_a if set_a[k] != set_b[k]),
        "a": side(a, path_a, msgs_a, set_a), "b": side(b, path_b, msgs_b, set_b),
    }


def stats_json(session: Any) -> dict[str, Any]:
    data = attrs.asdict(session.get_session_stats(), recurse=True)
    data.pop("branch", None)
    return data
