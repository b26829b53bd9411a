"""The compaction and branch-summary workflow: when to compact, and doing it.

``Session`` delegates here (``should_compact``, ``plan_compaction``, ``compact``,
``acompact``, ``estimate_context_tokens``, ``move_to(..., summarize=...)``). The caller
supplies the summariser, a plain or async callable ``summarize(messages, previous_summary) -> str | Summary``: the
messages to summarise, oldest first, and the previous compaction's summary (None for a first compaction and for branch
summaries). The library never calls a model; :func:`extractive_summary` stands in for one. The session is only written
after the summariser returns, so one that raises leaves it untouched, and a session changed meanwhile is a
``conflict`` with nothing written. See docs/compaction.md.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import MessageAppended
from sessiontree.domain.messages import AssistantMessage, Cost, ToolCall, Usage, UserMessage, message_text
from sessiontree.projections.compaction import (
    DEFAULT_KEEP_RECENT_TOKENS,
    DEFAULT_RESERVE_TOKENS,
    CompactionPlan,
    ContextTokens,
    TokenEstimator,
    context_tokens,
    plan_compaction,
    reported_usage,
)
from sessiontree.projections.context import CURRENT_LEAF, entry_to_messages, latest_compaction

if TYPE_CHECKING:
    from sessiontree.reader import SessionReader
    from sessiontree.session import Session


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


def _check_summarizer(summarize: Any) -> None:
    if not callable(summarize):
        raise TypeError(f"summarize must be a callable (messages, previous_summary), not {summarize!r}")


def _sync_result(result: Any) -> Summary:
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise TypeError("the summariser is async: use acompact / amove_to")
    return as_summary(result)


async def _async_result(result: Any) -> Summary:
    return as_summary(await result if inspect.isawaitable(result) else result)


def estimate_context_tokens(
    reader: SessionReader, estimator: TokenEstimator | None = None, leaf_id: str | None = CURRENT_LEAF
) -> ContextTokens:
    """The size of the current context (or the one at ``leaf_id``): the last reply's reported usage when it measured
    this context (it came after the latest compaction), plus an estimate of what follows."""
    messages = reader.build_context(leaf_id=leaf_id).messages
    path = reader.get_path_to_root_or_compaction(leaf_id)
    last = latest_compaction(path)
    if last is None:
        return context_tokens(messages, estimator)
    # Compare by value too, since a storage may hand out equal copies of a message.
    fresh = next(
        (e.message for e in reversed(path[last + 1 :]) if isinstance(e, MessageAppended) and reported_usage(e.message)), None
    )
    return context_tokens(messages, estimator, trusted=lambda m: fresh is not None and (m is fresh or m == fresh))


def should_compact(
    reader: SessionReader, context_window: int, reserve_tokens: int = DEFAULT_RESERVE_TOKENS,
    estimator: TokenEstimator | None = None,
) -> bool:
    """True when the context is larger than ``context_window - reserve_tokens``."""
    for name, value in (("context_window", context_window), ("reserve_tokens", reserve_tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TypeError(f"{name} must be an int >= 0, not {value!r}")
    if reserve_tokens >= context_window:
        raise ValueError(f"reserve_tokens ({reserve_tokens}) must be below context_window ({context_window})")
    return estimate_context_tokens(reader, estimator).tokens > context_window - reserve_tokens


def plan(
    reader: SessionReader, keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS, retain_tail: bool = False,
    estimator: TokenEstimator | None = None,
) -> CompactionPlan:
    """Plan a compaction of the current branch (see ``sessiontree.projections.compaction``)."""
    if not isinstance(retain_tail, bool):
        raise TypeError(f"retain_tail must be a bool, not {retain_tail!r}")
    return plan_compaction(
        reader.get_path_to_root_or_compaction(), keep_recent_tokens=keep_recent_tokens, retain_tail=retain_tail,
        options=reader.options, estimator=estimator, tokens_before=estimate_context_tokens(reader, estimator).tokens,
    )


def _prepared(
    session: Session, summarize: Any, from_hook: Any, keep_recent_tokens: int, retain_tail: bool,
    estimator: TokenEstimator | None, planned: CompactionPlan | None = None,
) -> CompactionPlan | None:
    """The arguments checked, the session writable, and the plan: None when it is empty."""
    _check_summarizer(summarize)
    if not isinstance(from_hook, bool):
        raise TypeError(f"from_hook must be a bool, not {from_hook!r}")
    session.storage.check_writable()
    if planned is None:
        planned = plan(session, keep_recent_tokens, retain_tail, estimator)
    return None if planned.is_empty else planned


def _append(
    session: Session, planned: CompactionPlan, leaf: str | None, summary: Summary, details: Any, from_hook: bool,
    if_version: int | None,
) -> str:
    with session._lock:  # the check and the append as one step, for a session shared by threads
        if session.leaf_id != leaf:  # its branch moved on (others' entries on other branches do not matter)
            raise SessionError(
                "conflict",
                f"session {session.id} changed while its compaction was being summarised "
                f"(its leaf moved from {leaf!r} to {session.leaf_id!r}); nothing was written",
            )
        return session.append_compaction(
            summary.summary, planned.first_kept_entry_id, planned.tokens_before,
            details=details if details is not None else summary.details, from_hook=from_hook, usage=summary.usage,
            retained_tail=list(planned.kept_messages) if planned.retain_tail else None, if_version=if_version,
        )


def compact(
    session: Session, summarize: Summarizer, keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS, retain_tail: bool = False,
    details: Any = None, from_hook: bool = False, estimator: TokenEstimator | None = None, planned: CompactionPlan | None = None,
    *, if_version: int | None = None,
) -> str | None:
    """Summarise the older part of the branch and append the compaction entry; returns its id, or None (and calls
    nothing) when there is nothing to summarise. ``details`` given here wins over the summariser's. ``planned`` reuses a
    plan made by :func:`plan` on the same, unchanged session."""
    planned = _prepared(session, summarize, from_hook, keep_recent_tokens, retain_tail, estimator, planned)
    if planned is None:
        return None
    leaf = session.leaf_id
    result = summarize(list(planned.messages_to_summarize), planned.previous_summary)
    return _append(session, planned, leaf, _sync_result(result), details, from_hook, if_version)


async def acompact(
    session: Session, summarize: Summarizer | AsyncSummarizer, keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS,
    retain_tail: bool = False, details: Any = None, from_hook: bool = False, estimator: TokenEstimator | None = None,
    *, if_version: int | None = None,
) -> str | None:
    """:func:`compact` with an async (or plain) summariser."""
    planned = _prepared(session, summarize, from_hook, keep_recent_tokens, retain_tail, estimator)
    if planned is None:
        return None
    leaf = session.leaf_id
    summary = await _async_result(summarize(list(planned.messages_to_summarize), planned.previous_summary))
    return _append(session, planned, leaf, summary, details, from_hook, if_version)


def branch_left(reader: SessionReader, entry_id: str | None) -> list[Any]:
    """The entries a move to ``entry_id`` leaves behind: from just after the common ancestor
    of the current leaf and the target, to the current leaf (root first)."""
    if entry_id is not None and not reader.has_entry(entry_id):
        raise SessionError("not_found", f"entry {entry_id!r} not found in session {reader.id}")
    old = reader.get_branch()
    target = {e.id for e in reader.get_branch(entry_id)} if entry_id is not None else set()
    start = next((index + 1 for index in range(len(old) - 1, -1, -1) if old[index].id in target), 0)
    return old[start:]


def _left_messages(session: Session, entry_id: str | None, summarize: Any) -> list[Any]:
    """The messages of the branch a move to ``entry_id`` leaves behind (arguments checked)."""
    _check_summarizer(summarize)
    session.storage.check_writable()
    entries = branch_left(session, entry_id)
    options = session.options
    return [m for i, e in enumerate(entries) for m in entry_to_messages(e, i, entries, options)]


def _move(session: Session, entry_id: str | None, leaf: str | None, summary: Summary, if_version: int | None) -> str | None:
    with session._lock:  # the check and the move as one step
        if session.leaf_id != leaf:
            raise SessionError(
                "conflict", f"session {session.id} changed while its branch was being summarised; nothing was written"
            )
        fields = {"summary": summary.summary, "details": summary.details, "usage": summary.usage}
        return session.move_to(entry_id, summary=fields, if_version=if_version)


def move_summarized(
    session: Session, entry_id: str | None, summarize: Summarizer, if_version: int | None = None,
) -> str | None:
    """Move the leaf to ``entry_id``, recording a summary of the branch left behind. Nothing left behind (moving forward,
    or to where the leaf is): a plain move, no call."""
    messages = _left_messages(session, entry_id, summarize)
    if not messages:
        return session.move_to(entry_id, if_version=if_version)
    leaf = session.leaf_id
    return _move(session, entry_id, leaf, _sync_result(summarize(messages, None)), if_version)


async def amove_summarized(
    session: Session, entry_id: str | None, summarize: Summarizer | AsyncSummarizer, if_version: int | None = None,
) -> str | None:
    """:func:`move_summarized` with an async (or plain) summariser."""
    messages = _left_messages(session, entry_id, summarize)
    if not messages:
        return session.move_to(entry_id, if_version=if_version)
    leaf = session.leaf_id
    return _move(session, entry_id, leaf, await _async_result(summarize(messages, None)), if_version)


def left_leaf_id(reader: SessionReader, branch_summary_id: str) -> str | None:
    """The leaf a ``move_to`` left when it wrote this branch summary (its ``leaf`` record's
    parent), or None when the summary was not written by a move."""
    entries = reader.get_entries()
    ids = [e.id for e in entries]
    index = ids.index(reader.entry(branch_summary_id).id)
    if index == 0 or entries[index - 1].type != "leaf":
        return None
    return entries[index - 1].parent_id


__all__ = [
    "AsyncSummarizer", "Summarizer", "Summary", "SummaryResult", "acompact", "amove_summarized", "as_summary",
    "branch_left", "branch_summary_fields", "compact", "estimate_context_tokens", "extractive_summary", "left_leaf_id",
    "move_summarized", "plan", "should_compact",
]
