"""The JSON the viewer's pages are built from (docs/web.md): plain dicts, from the public session API only.

Every function here only reads. Entry references are resolved as the command line resolves them (an id, a unique
id prefix of 4+ characters, or a label; ``root`` where a move allows it).
"""

from __future__ import annotations

from itertools import islice
from typing import Any

import attrs
import msgspec

from sessiontree.cli import clip
from sessiontree.cli.cmd_inspect import context_payload
from sessiontree.cli.describe import entry_text, message_preview
from sessiontree.cli.replay_steps import common_prefix
from sessiontree.compaction import estimate_context_tokens
from sessiontree.domain.errors import SessionError
from sessiontree.domain.messages import ImageContent, TextContent, ThinkingContent, ToolCall
from sessiontree.projections.compaction import DEFAULT_ESTIMATOR
from sessiontree.projections.context import SessionContextBuildOptions
from sessiontree.projections.tool_pairs import is_synthetic, repair_tool_pairs
from sessiontree.wire.jsontext import pretty

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
    if isinstance(block, TextContent):
        return "text", block.text
    if isinstance(block, ThinkingContent):
        return "thinking", block.thinking
    if isinstance(block, ToolCall):
        arguments = pretty(dict(block.arguments), str).decode()
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


def entry_brief_text(entry: Any) -> str:
    return clip.one_line(entry_text(entry).plain, 80)


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


SETTINGS = ("model", "thinking_level", "active_tool_names")  # what "settings that differ" compares


def default_pair(session: Any, a_ref: str | None, b_ref: str | None) -> tuple[str | None, str | None]:
    """The two branch ends a diff compares: A the current leaf unless named; B, unless named, the most recently
    written branch tip other than A (never A itself while another exists)."""
    a = resolve(session, a_ref)
    if b_ref:
        return a, resolve(session, b_ref)
    others = [t for t in branch_tips(session) if t != a]
    return a, (others[-1] if others else a)


def _word_diff(old: str, new: str) -> tuple[list[list[str]], list[list[str]]]:
    """Two texts as segments ``[kind, text]`` (``same``, ``del`` on A's side, ``ins`` on B's), word by word."""
    import difflib
    import re

    a, b = re.findall(r"\s+|\S+", old), re.findall(r"\s+|\S+", new)
    left: list[list[str]] = []
    right: list[list[str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            left.append(["same", "".join(a[i1:i2])])
            right.append(["same", "".join(b[j1:j2])])
        else:
            if i2 > i1:
                left.append(["del", "".join(a[i1:i2])])
            if j2 > j1:
                right.append(["ins", "".join(b[j1:j2])])
    return left, right


def _aligned(rest_a: list[dict[str, Any]], rest_b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages after the shared ones, paired side by side: equal ones level, changed ones paired (with their
    words marked), the rest on one side only."""
    import difflib

    keys_a = [(m["role"], m["text"]) for m in rest_a]
    keys_b = [(m["role"], m["text"]) for m in rest_b]
    rows: list[dict[str, Any]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False).get_opcodes():
        if op == "equal":
            rows += [{"op": "same", "a": rest_a[i], "b": rest_b[j]} for i, j in zip(range(i1, i2), range(j1, j2), strict=True)]
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            ma = rest_a[i1 + k] if i1 + k < i2 else None
            mb = rest_b[j1 + k] if j1 + k < j2 else None
            if ma and mb and _alike(ma, mb):  # one message changed: paired, its words marked
                a_marks, b_marks = _word_diff(ma["text"], mb["text"])
                rows.append({"op": "changed", "a": ma, "b": mb, "a_marks": a_marks, "b_marks": b_marks})
                continue
            rows += [{"op": "only_a", "a": ma, "b": None}] if ma else []
            rows += [{"op": "only_b", "a": None, "b": mb}] if mb else []
    return rows


def _alike(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two messages in the same place are one message changed (same role, much of the text shared), not two."""
    import difflib

    return bool(a["role"] == b["role"] and difflib.SequenceMatcher(None, a["text"], b["text"]).ratio() >= 0.4)


def diff_payload(session: Any, a_ref: str | None, b_ref: str | None) -> dict[str, Any]:
    """Two branches (by their last entries) side by side: where they diverge, the entries only one has, and how
    their contexts differ (the messages after the shared prefix, paired, and the settings). Left out, A is the
    current leaf and B the most recent other branch tip (``default_pair``)."""
    a, b = default_pair(session, a_ref, b_ref)
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

    side_a, side_b = side(a, path_a, msgs_a, set_a), side(b, path_b, msgs_b, set_b)
    current = set(path_ids(session))
    tips = [{"id": t, "text": clip.one_line(entry_text(session.entry(t)).plain, 80),
             "timestamp": session.entry(t).timestamp, "current": t in current} for t in branch_tips(session)]
    return {
        "session_id": session.id, "diverge_at": path_a[shared - 1] if shared else None,
        "diverge_entry": _entry_brief(session.entry(path_a[shared - 1])) if shared else None,
        "shared_entries": shared, "shared_messages": same, "same_branch": a == b,
        "settings_differ": [k for k in SETTINGS if set_a[k] != set_b[k]],
        "a": side_a, "b": side_b, "rows": _aligned(side_a["context_rest"], side_b["context_rest"]), "tips": tips[::-1],
    }


def path_ids(session: Any) -> list[str]:
    """The ids on the current branch (root first)."""
    return _path_ids(session, session.leaf_id)


def stats_json(session: Any) -> dict[str, Any]:
    data = attrs.asdict(session.get_session_stats(), recurse=True)
    data.pop("branch", None)
    return data


ENTRY_LINES = 40  # a part of the entry panel shows this many lines before "show all"
ENTRY_CHARS = 6_000


def _usage(usage: Any) -> dict[str, Any] | None:
    if usage is None:
        return None
    cost = usage.cost
    return {"input": usage.input, "output": usage.output, "cache_read": usage.cache_read, "cache_write": usage.cache_write,
            "total_tokens": usage.total_tokens or usage.input + usage.output + usage.cache_read + usage.cache_write,
            "cost": {k: getattr(cost, k) for k in ("input", "output", "cache_read", "cache_write", "total")}}


def _entry_parts(session: Any, entry: Any) -> list[tuple[str, str]]:
    """The entry as the panel shows it, in parts (kind, whole text): its message's blocks, then the whole entry as
    it is stored (pretty-printed JSON)."""
    from sessiontree.wire.codec import native_codec

    parts = []
    message = getattr(entry, "message", None)
    if message is not None:
        parts = [block_text(block) for block in _blocks(message)]
        details = getattr(message, "details", None)
        if details is not None:
            parts.append(("details", pretty(details, str).decode()))
    parts.append(("stored", pretty(msgspec.Raw(native_codec().encode_event(entry))).decode()))  # its numbers as stored
    return parts


def entry_payload(session: Any, ref: str | None, part: int | None = None) -> dict[str, Any]:
    """One entry whole, for the tree's entry panel: its fields, its message's blocks (tool arguments, results,
    thinking), usage and cost, and the entry as stored; each part clipped (``part=N``: part N whole)."""
    entry_id = resolve(session, ref)
    if entry_id is None:
        raise SessionError("not_found", "the session has no entries yet")
    entry = session.entry(entry_id)
    parts = _entry_parts(session, entry)
    if part is not None:
        if not 0 <= part < len(parts):
            raise SessionError("not_found", f"entry {entry_id} has no part {part} (it has {len(parts)})")
        return {"id": entry_id, "part": part, "kind": parts[part][0], "text": parts[part][1]}
    message: Any = getattr(entry, "message", None)
    role = getattr(message, "role", None)
    facts: list[tuple[str, str]] = []
    if role == "assistant":
        facts += [("model", f"{message.provider}/{message.model}" if message.provider else str(message.model)),
                  ("stop", str(message.stop_reason))]
        if message.error_message:
            facts.append(("error", message.error_message))
    elif role == "tool_result":
        facts += [("tool", message.tool_name), ("call", message.tool_call_id), ("error", "yes" if message.is_error else "no")]
    elif role == "custom":
        facts.append(("custom type", message.custom_type))
    clipped = []
    for n, (kind, text) in enumerate(parts):
        c = clip.clip_block(text, ENTRY_LINES, ENTRY_CHARS)
        clipped.append({"index": n, "kind": kind, "text": c.text, "more_chars": c.more_chars, "more_lines": c.more_lines})
    usage = _usage(getattr(message, "usage", None) or getattr(entry, "usage", None))
    return {"id": entry_id, "parent_id": entry.parent_id, "type": entry.type, "role": role, "timestamp": entry.timestamp,
            "label": session.get_labels().get(entry_id), "facts": facts, "usage": usage, "parts": clipped,
            "children": len(session.projection("tree").get(entry_id) or ()), "leaf": entry_id == session.leaf_id}


def usage_payload(session: Any, max_tips: int = 40) -> dict[str, Any]:
    """Tokens and cost along the current branch (each model call in order, with the compactions on the way) and each
    branch's totals (the ``max_tips`` most recent branch tips): what the usage chart draws."""
    calls: list[dict[str, Any]] = []
    compactions: list[dict[str, Any]] = []
    for position, entry in enumerate(session.get_branch()):
        message = getattr(entry, "message", None)
        usage = _usage(getattr(message, "usage", None) or getattr(entry, "usage", None))  # a summary's call too
        if entry.type == "compaction":
            compactions.append({"id": entry.id, "position": position, "after_call": len(calls),
                                "tokens_before": getattr(entry, "tokens_before", None)})
        if usage is not None:
            model = getattr(message, "model", None) or f"({entry.type})"
            calls.append({"id": entry.id, "position": position, "timestamp": entry.timestamp, "model": model,
                          "input": usage["input"], "output": usage["output"],
                          "cache": usage["cache_read"] + usage["cache_write"], "tokens": usage["total_tokens"],
                          "cost": usage["cost"]["total"]})
    per_entry: dict[str, tuple[int, float]] = {}
    for kind in ("message", "compaction", "branch_summary"):
        for entry in session.find_entries(kind):
            usage = _usage(getattr(getattr(entry, "message", None), "usage", None) or getattr(entry, "usage", None))
            if usage is None:
                continue
            per_entry[entry.id] = (usage["total_tokens"], usage["cost"]["total"])
    parents = {h.id: h.parent_id for h in session.iter_heads() if h.type != "leaf"}
    current = {e.id for e in session.get_branch()}
    tips = branch_tips(session)[-max_tips:]
    branches = []
    for tip in tips:
        own_tokens = shared_tokens = 0
        own_cost = shared_cost = 0.0
        node: str | None = tip
        seen: set[str] = set()
        while node is not None and node in parents and node not in seen:
            seen.add(node)
            tokens, cost = per_entry.get(node, (0, 0.0))
            if node in current:
                shared_tokens, shared_cost = shared_tokens + tokens, shared_cost + cost
            else:
                own_tokens, own_cost = own_tokens + tokens, own_cost + cost
            node = parents[node]
        entry = session.entry(tip)
        branches.append({"tip": tip, "text": clip.one_line(entry_text(entry).plain, 80), "timestamp": entry.timestamp,
                         "current": tip in current, "tokens": own_tokens + shared_tokens, "cost": own_cost + shared_cost,
                         "own_tokens": own_tokens, "own_cost": own_cost})
    return {"session_id": session.id, "leaf_id": session.leaf_id, "calls": calls, "compactions": compactions,
            "branches": branches, "tokens": sum(c["tokens"] for c in calls), "cost": sum(c["cost"] for c in calls)}
