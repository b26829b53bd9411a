"""A branch as a document for sharing: Markdown, or a self-contained HTML page.

The document follows the branch from the root to the leaf (every turn, including those a
compaction later summarised, with the compaction shown where it happened). It is built
once as sections of parts and then written out in either format, so both say the same.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

import attrs

from sessiontree.domain.messages import ImageContent, TextContent, ThinkingContent, ToolCall, message_text


@attrs.frozen
class Part:
    kind: str  # "text", "thinking", "code", "note"
    text: str
    lang: str = ""


@attrs.frozen
class Section:
    kind: str  # a role, or an entry type
    title: str  # empty for a settings change: shown as a one-line note
    time: str
    label: str | None
    parts: tuple[Part, ...]


@attrs.frozen
class Document:
    title: str
    meta: tuple[tuple[str, str], ...]
    sections: tuple[Section, ...]


def _content_parts(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [Part("text", content)]
    parts = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(Part("text", block.text))
        elif isinstance(block, ThinkingContent):
            parts.append(Part("thinking", block.thinking))
        elif isinstance(block, ToolCall):
            args = json.dumps(dict(block.arguments), indent=2, ensure_ascii=False, default=str)
            parts.append(Part("note", f"tool call {block.name} ({block.id})"))
            parts.append(Part("code", args, "json"))
        elif isinstance(block, ImageContent):
            parts.append(Part("note", f"image ({block.mime_type}, {len(block.data) * 3 // 4:,} bytes, not included)"))
        else:
            parts.append(Part("note", f"{getattr(block, 'type', '?')} block"))
    return parts


def _section(entry: Any, label: str | None) -> Section | None:
    kind = entry.type
    time = entry.timestamp
    if kind == "message":
        message = entry.message
        role = getattr(message, "role", "?")
        if role == "user":
            return Section("user", "User", time, label, tuple(_content_parts(message.content)))
        if role == "assistant":
            title = f"Assistant ({message.model})" if message.model else "Assistant"
            parts = _content_parts(message.content)
            if message.error_message:
                parts.append(Part("note", f"error: {message.error_message}"))
            return Section("assistant", title, time, label, tuple(parts))
        if role == "tool_result":
            text = message_text(message)
            title = f"Tool result: {message.tool_name}" + (" (error)" if message.is_error else "")
            return Section("tool_result", title, time, label, (Part("code", text),))
        text = message_text(message) or json.dumps(getattr(message, "data", {}), default=str)
        return Section(role, role, time, label, (Part("text", text),))
    if kind == "compaction":
        note = f"Earlier turns were compacted ({entry.tokens_before:,} tokens before). The model saw this summary instead:"
        return Section(kind, "Compaction", time, label, (Part("note", note), Part("text", entry.summary)))
    if kind == "branch_summary":
        return Section(kind, "Summary of the branch left", time, label, (Part("text", entry.summary),))
    if kind == "custom_message":
        return Section(kind, f"{entry.custom_type} (message to the model)", time, label, tuple(_content_parts(entry.content)))
    if kind == "model_change":
        return Section(kind, "", time, label, (Part("note", f"model set to {entry.provider}/{entry.model_id}"),))
    if kind == "thinking_level_change":
        return Section(kind, "", time, label, (Part("note", f"thinking level set to {entry.thinking_level}"),))
    if kind == "active_tools_change":
        return Section(kind, "", time, label, (Part("note", "active tools: " + (", ".join(entry.active_tool_names) or "none")),))
    if kind == "custom":
        data = json.dumps(entry.data, ensure_ascii=False, default=str)
        return Section(kind, f"{entry.custom_type} (app data, not sent to the model)", time, label, (Part("code", data, "json"),))
    return None  # labels and names are shown elsewhere; leaf records are not on a branch


def branch_document(reader: Any, leaf_id: str | None = None) -> Document:
    """The branch ending at ``leaf_id`` (default: the current leaf) as a document."""
    branch = reader.get_branch() if leaf_id is None else reader.get_branch(leaf_id)
    labels = reader.get_labels()
    sections = [s for s in (_section(e, labels.get(e.id)) for e in branch) if s is not None]
    name = reader.get_session_name()
    context = reader.build_context() if leaf_id is None else reader.build_context(leaf_id=leaf_id)
    model = context.model
    meta = [
        ("session", reader.id),
        ("cwd", reader.header.cwd or "(none)"),
        ("created", reader.header.timestamp),
        ("branch", f"{len(branch)} entries, ending at {branch[-1].id if branch else '(none)'}"),
        ("model", f"{model['provider']}/{model['model_id']}" if model else "(not set)"),
    ]
    return Document(name or f"Session {reader.id}", tuple(meta), tuple(sections))


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def to_markdown(doc: Document) -> str:
    out = [f"# {doc.title}", ""]
    out.extend(f"- **{key}**: {value}" for key, value in doc.meta)
    for section in doc.sections:
        label = f" `[{section.label}]`" if section.label else ""
        if not section.title:
            out += ["", f"*{section.parts[0].text}*{label}"]
            continue
        out += ["", f"## {section.title}{label}", "", f"<sub>{section.time}</sub>", ""]
        for part in section.parts:
            if part.kind == "text":
                out += [part.text, ""]
            elif part.kind == "thinking":
                out += ["<details><summary>thinking</summary>", "", part.text, "", "</details>", ""]
            elif part.kind == "code":
                fence = _fence(part.text)
                out += [f"{fence}{part.lang}", part.text, fence, ""]
            else:
                out += [f"*{part.text}*", ""]
    return "\n".join(out).rstrip() + "\n"


_CSS = (
    "body{font:15px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}"
    "section{border-left:4px solid #ccc;padding:.2rem 1rem;margin:1rem 0}"
    "section.user{border-color:#1f77b4}section.assistant{border-color:#2ca02c}"
    "section.tool_result{border-color:#9467bd}section.compaction,section.branch_summary{border-color:#e6a700}"
    "h2{font-size:1rem;margin:.3rem 0}time,.note{color:#777;font-size:.85rem}"
    "pre{background:#f6f6f6;padding:.6rem;overflow-x:auto;white-space:pre-wrap}"
    ".label{background:#fff3b0;border-radius:3px;padding:0 .3rem;font-size:.85rem}"
    "p{white-space:pre-wrap}details{color:#555}"
)


def to_html(doc: Document) -> str:
    e = html.escape
    out = [
        "<!doctype html>",
        '<html><head><meta charset="utf-8">',
        f"<title>{e(doc.title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{e(doc.title)}</h1><ul>",
    ]
    out.extend(f"<li><b>{e(k)}</b>: {e(v)}</li>" for k, v in doc.meta)
    out.append("</ul>")
    for section in doc.sections:
        label = f' <span class="label">{e(section.label)}</span>' if section.label else ""
        if not section.title:
            out.append(f'<p class="note">{e(section.parts[0].text)}{label}</p>')
            continue
        out.append(f'<section class="{e(section.kind)}"><h2>{e(section.title)}{label}</h2><time>{e(section.time)}</time>')
        for part in section.parts:
            if part.kind == "text":
                out.append(f"<p>{e(part.text)}</p>")
            elif part.kind == "thinking":
                out.append(f"<details><summary>thinking</summary><p>{e(part.text)}</p></details>")
            elif part.kind == "code":
                out.append(f"<pre><code>{e(part.text)}</code></pre>")
            else:
                out.append(f'<p class="note">{e(part.text)}</p>')
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
