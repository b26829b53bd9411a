"""A branch as a document for sharing: Markdown, or a self-contained HTML page.

The document follows the branch from the root to the leaf (every turn, including those a
compaction later summarised, with the compaction shown where it happened). It is built
once as sections of parts and then written out in either format, so both say the same.
Each block is clipped (``DOC_LINES``, ``DOC_CHARS``, with a note of what was left out)
unless ``full``; session text is escaped in both formats, so it cannot add markup.
"""

from __future__ import annotations

import html
from typing import Any

import attrs

from sessiontree.cli import clip, mdescape
from sessiontree.domain.messages import ImageContent, TextContent, ThinkingContent, ToolCall, message_text
from sessiontree.wire.jsontext import pretty, spaced

DOC_LINES = 200  # a shared document shows more of a block than a terminal view does
DOC_CHARS = 20_000


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


@attrs.frozen
class _Clip:
    """Clips what a document shows (nothing when ``full``)."""

    full: bool

    def block(self, kind: str, text: str, lang: str = "") -> list[Part]:
        if self.full:
            return [Part(kind, text, lang)]
        clipped = clip.clip_block(text, DOC_LINES, DOC_CHARS)
        return [Part(kind, clipped.text, lang)] + ([Part("note", clipped.marker())] if clipped.more_chars else [])

    def field(self, text: Any) -> str:
        return str(text) if self.full else clip.clip_field(str(text))


def _content_parts(content: Any, c: _Clip) -> list[Part]:
    if isinstance(content, str):
        return c.block("text", content)
    parts = []
    for block in content:
        if isinstance(block, TextContent):
            parts += c.block("text", block.text)
        elif isinstance(block, ThinkingContent):
            parts += c.block("thinking", block.thinking)
        elif isinstance(block, ToolCall):
            args = pretty(dict(block.arguments), str).decode()
            parts.append(Part("note", f"tool call {c.field(block.name)} ({c.field(block.id)})"))
            parts += c.block("code", args, "json")
        elif isinstance(block, ImageContent):
            parts.append(Part("note", f"image ({c.field(block.mime_type)}, {len(block.data) * 3 // 4:,} bytes, not included)"))
        else:
            parts.append(Part("note", f"{c.field(getattr(block, 'type', '?'))} block"))
    return parts


def _message_section(message: Any, time: str, label: str | None, c: _Clip) -> Section:
    role = getattr(message, "role", "?")
    if role == "user":
        return Section("user", "User", time, label, tuple(_content_parts(message.content, c)))
    if role == "assistant":
        title = f"Assistant ({c.field(message.model)})" if message.model else "Assistant"
        parts = _content_parts(message.content, c)
        if message.error_message:
            parts.append(Part("note", f"error: {c.field(message.error_message)}"))
        return Section("assistant", title, time, label, tuple(parts))
    if role == "tool_result":
        title = f"Tool result: {c.field(message.tool_name)}" + (" (error)" if message.is_error else "")
        return Section("tool_result", title, time, label, tuple(c.block("code", message_text(message))))
    text = message_text(message) or spaced(getattr(message, "data", {}), str)
    return Section(c.field(role), c.field(role), time, label, tuple(c.block("text", text)))


def _setting(entry: Any, c: _Clip) -> str | None:
    """The one-line note of a settings change, or None for other entries."""
    kind = entry.type
    if kind == "model_change":
        return f"model set to {c.field(f'{entry.provider}/{entry.model_id}')}"
    if kind == "thinking_level_change":
        return f"thinking level set to {c.field(entry.thinking_level)}"
    if kind == "active_tools_change":
        return "active tools: " + (c.field(", ".join(entry.active_tool_names)) or "none")
    return None


def _section(entry: Any, label: str | None, c: _Clip) -> Section | None:
    kind = entry.type
    time = c.field(entry.timestamp)
    label = c.field(label) if label else None
    if kind == "message":
        return _message_section(entry.message, time, label, c)
    if kind == "compaction":
        note = f"Earlier turns were compacted ({entry.tokens_before:,} tokens before). The model saw this summary instead:"
        return Section(kind, "Compaction", time, label, (Part("note", note), *c.block("text", entry.summary)))
    if kind == "branch_summary":
        return Section(kind, "Summary of the branch left", time, label, tuple(c.block("text", entry.summary)))
    if kind == "custom_message":
        title = f"{c.field(entry.custom_type)} (message to the model)"
        return Section(kind, title, time, label, tuple(_content_parts(entry.content, c)))
    setting = _setting(entry, c)
    if setting is not None:
        return Section(kind, "", time, label, (Part("note", setting),))
    if kind == "custom":
        data = spaced(entry.data, str)
        title = f"{c.field(entry.custom_type)} (app data, not sent to the model)"
        return Section(kind, title, time, label, tuple(c.block("code", data, "json")))
    return None  # labels and names are shown elsewhere; leaf records are not on a branch


def branch_document(reader: Any, leaf_id: str | None = None, *, full: bool = False) -> Document:
    """The branch ending at ``leaf_id`` (default: the current leaf) as a document; ``full`` clips nothing."""
    c = _Clip(full)
    branch = reader.get_branch() if leaf_id is None else reader.get_branch(leaf_id)
    labels = reader.get_labels()
    sections = [s for s in (_section(e, labels.get(e.id), c) for e in branch) if s is not None]
    name = reader.get_session_name()
    context = reader.build_context() if leaf_id is None else reader.build_context(leaf_id=leaf_id)
    model = context.model
    meta = [
        ("session", c.field(reader.id)),
        ("cwd", c.field(reader.header.cwd or "(none)")),
        ("created", c.field(reader.header.timestamp)),
        ("branch", f"{len(branch)} entries, ending at {c.field(branch[-1].id) if branch else '(none)'}"),
        ("model", c.field(f"{model['provider']}/{model['model_id']}") if model else "(not set)"),
    ]
    return Document(c.field(name) if name else f"Session {c.field(reader.id)}", tuple(meta), tuple(sections))


def _line(text: str) -> str:
    """A field as Markdown inline text: on one line, shown as typed."""
    return mdescape.literal(" ".join(text.split()))


def to_markdown(doc: Document) -> str:
    out = [f"# {_line(doc.title)}", ""]
    out.extend(f"- **{key}**: {_line(value)}" for key, value in doc.meta)
    for section in doc.sections:
        label = " " + mdescape.code_span("[" + " ".join(section.label.split()) + "]") if section.label else ""
        if not section.title:
            out += ["", f"*{_line(section.parts[0].text)}*{label}"]
            continue
        out += ["", f"## {_line(section.title)}{label}", "", f"<sub>{_line(section.time)}</sub>", ""]
        for part in section.parts:
            if part.kind == "text":
                out += [mdescape.message(part.text), ""]
            elif part.kind == "thinking":
                out += ["<details><summary>thinking</summary>", "", mdescape.message(part.text), "", "</details>", ""]
            elif part.kind == "code":
                code = mdescape.line_feeds(part.text)
                fence = mdescape.fence_for(code)
                out += [f"{fence}{part.lang}", code, fence, ""]
            else:
                out += [f"*{_line(part.text)}*", ""]
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
