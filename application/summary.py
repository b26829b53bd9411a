"""Summarisers: the protocol the compaction workflow calls, its result type, and a stand-in.

A summariser is a plain or async callable ``summarize(messages, previous_summary) -> str | Summary``: the messages to
summarise, oldest first, and the previous compaction's summary (None for a first compaction and for branch summaries).
The library never calls a model; :func:`extractive_summary` stands in for one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs

from sessiontree.domain.errors import SessionError
from sessiontree.domain.messages import AssistantMessage, Cost, ToolCall, Usage, UserMessage, message_text


@attrs.frozen(kw_only=True)
class Summary:
    """What a summariser returns: the text, and optionally the call's usage and details."""

    summary: str = attrs.field(validator=attrs.validators.instance_of(str))
    usage: Usage | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.instance_of(Usage)))
    details: Any = None


SummaryResult = str | Summary
Summarizer = Callable[[list[Any], str | None], SummaryResult]
AsyncSummarizer = Callable[[list[Any], str | None], Awaitable[SummaryResult]]


def as_summary(result: Any) -> Summary:
    """A summariser's return value as a :class:`Summary` (a str or a Summary is accepted)."""
    if isinstance(result, Summary):
        return result
    if isinstance(result, str):
        return Summary(summary=result)
    raise TypeError(f"a summariser must return a str or a Summary, not {result!r}")


MAX_REQUESTS = 40
MAX_FILES = 50
MAX_PREVIOUS_CHARS = 4000
_PATH_KEYS = ("path", "file_path", "filepath", "file", "filename")
_READ_TOOLS = frozenset({"read", "read_file", "view", "cat", "ls", "grep", "find", "glob"})


def _first_line(text: str, width: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 3] + "..."


def _capped(items: list[str], limit: int) -> list[str]:
    if len(items) <= limit:
        return items
    head = limit // 4
    tail = limit - head
    return [*items[:head], f"... {len(items) - limit} more ...", *items[-tail:]]


def extractive_summary(messages: Sequence[Any], previous_summary: str | None = None) -> Summary:
    """A stand-in summariser that needs no model: the user's requests and the files touched.

    It copies the first line of every user message and collects the ``path``-like arguments of tool calls (read-only
    tools as read, the others as modified), after the previous summary. Its size is bounded whatever the input: at most
    ``MAX_REQUESTS`` requests and ``MAX_FILES`` files of each kind (the oldest and newest are kept), and the previous
    summary cut to ``MAX_PREVIOUS_CHARS``. It does not understand the conversation; use a real model for real sessions.
    """
    requests = [_first_line(message_text(m)) for m in messages if isinstance(m, UserMessage)]
    requests = [r for r in requests if r]
    read, modified = _files_touched(messages)
    lines: list[str] = []
    if previous_summary:
        previous = previous_summary
        if len(previous) > MAX_PREVIOUS_CHARS:
            previous = previous[:MAX_PREVIOUS_CHARS] + " [...]"
        lines += ["Earlier summary:", previous, ""]
    lines.append(f"Summary of {len(messages)} earlier messages (extractive, no model).")
    if requests:
        lines.append("User requests:")
        lines += [f"- {r}" for r in _capped(requests, MAX_REQUESTS)]
    if read:
        lines.append("Files read: " + ", ".join(_capped(read, MAX_FILES)))
    if modified:
        lines.append("Files modified: " + ", ".join(_capped(modified, MAX_FILES)))
    return Summary(summary="\n".join(lines), details={"read_files": read, "modified_files": modified})


def _files_touched(messages: Sequence[Any]) -> tuple[list[str], list[str]]:
    """The ``path``-like arguments of tool calls, in order: (read-only tools, the others)."""
    read: list[str] = []
    modified: list[str] = []
    for message in messages:
        if not isinstance(message, AssistantMessage):
            continue
        for block in message.content:
            if not isinstance(block, ToolCall):
                continue
            bucket = read if block.name.lower() in _READ_TOOLS else modified
            for key in _PATH_KEYS:
                value = block.arguments.get(key)
                if isinstance(value, str) and value and value not in bucket:
                    bucket.append(value)
    return read, modified


def branch_summary_fields(summary: Any) -> dict[str, Any]:
    """The fields of a branch summary given to ``move_to`` as a dict (``summary``, and
    optionally ``details``, ``usage`` as a Usage or a dict, ``from_hook``), checked."""
    if not isinstance(summary, Mapping):
        raise TypeError(f"summary must be a dict with a 'summary' key, not {summary!r}")
    unknown = set(summary) - {"summary", "details", "usage", "from_hook"}
    if unknown:
        raise SessionError("invalid_entry", f"unknown branch summary keys: {', '.join(sorted(unknown))}")
    if not isinstance(summary.get("summary"), str):
        raise SessionError("invalid_entry", f"branch summary needs a str 'summary', got {summary.get('summary')!r}")
    out = dict(summary)
    usage = out.get("usage")
    if isinstance(usage, Mapping):
        fields = dict(usage)
        cost = fields.pop("cost", None)
        try:
            out["usage"] = Usage(**fields, cost=Cost(**cost) if isinstance(cost, Mapping) else Cost())
        except TypeError as exc:
            raise SessionError("invalid_entry", f"branch summary usage is not a valid usage: {exc}") from None
    return out


__all__ = [
    "AsyncSummarizer", "Summarizer", "Summary", "SummaryResult", "as_summary", "branch_summary_fields", "extractive_summary",
]
