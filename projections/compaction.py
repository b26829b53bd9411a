"""The compaction planner: where to cut a branch, what to summarise, what to keep.

Pure: it reads the entries of a branch (root first; the suffix that ``path_to_root_or_compaction`` returns is enough) and
decides, for a budget of recent tokens to keep, where the kept part starts. It considers what the context holds now
(after the previous compaction, whose summary it passes on), cuts only on a turn boundary and never between a tool call
and its result, and keeps the most recent turns that fit, or the newest turn whole when even that one is larger.
docs/compaction.md ("Where to cut") gives the rules in full. ``Session.compact`` turns a plan into an entry.

Token accounting sizes both parts: a *token estimator* is any callable ``(message) -> int``, :class:`CharEstimator` (the
default, pi's cheap rule) or :class:`TextCounterEstimator` over any exact tokenizer, so a caller plugs in its model's
tokenizer without this library depending on one. :func:`context_tokens` sizes a context the way pi does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from sessiontree.domain import messages as msg
from sessiontree.domain.events import ContextCompacted
from sessiontree.projections import context
from sessiontree.projections.context import SessionContextBuildOptions

IMAGE_TOKENS = 1200
"""What one image counts for in the estimators (a typical provider charge for one image)."""

# Assistant replies that ended like this may report partial or no usage: not trusted.
_UNTRUSTED_STOPS = frozenset({"error", "aborted"})


@runtime_checkable
class TokenEstimator(Protocol):
    """Anything that says how many tokens one message costs."""

    def __call__(self, message: Any) -> int: ...


def _flatten(value: Any, out: list[str]) -> None:
    """The strings of a JSON-like value (keys, strings, scalars as text), in order."""
    if isinstance(value, str):
        out.append(value)
    elif value is None:
        return
    elif isinstance(value, Mapping):
        for key, item in value.items():
            out.append(str(key))
            _flatten(item, out)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _flatten(item, out)
    else:
        out.append(str(value))


def _block_parts(block: Any, texts: list[str]) -> int:
    """Append a block's text to ``texts``; return how many images it holds."""
    if isinstance(block, msg.TextContent):
        texts.append(block.text)
    elif isinstance(block, msg.ThinkingContent):
        texts.append(block.thinking)
    elif isinstance(block, msg.ToolCall):
        texts.append(block.name)
        _flatten(block.arguments, texts)
    elif isinstance(block, msg.ImageContent):
        return 1
    elif isinstance(block, msg.UnknownContent):
        _flatten({k: v for k, v in block.data.items() if k != "type"}, texts)
    elif isinstance(block, str):
        texts.append(block)
    return 0


def message_parts(message: Any) -> tuple[list[str], int]:
    """The texts a message puts in front of the model, and its number of images. Tool-call arguments, unknown blocks and
    unknown messages contribute every key and value they hold, as text."""
    texts: list[str] = []
    images = 0
    if isinstance(message, msg.UnknownMessage):
        _flatten({k: v for k, v in message.data.items() if k not in ("role", "timestamp")}, texts)
        return texts, images
    content = getattr(message, "content", None)
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, (list, tuple)):
        for block in content:
            images += _block_parts(block, texts)
    summary = getattr(message, "summary", None)
    if isinstance(summary, str):
        texts.append(summary)
    tool_name = getattr(message, "tool_name", None)
    if isinstance(tool_name, str) and message.role == "tool_result":
        texts.append(tool_name)
    return texts, images


@attrs.frozen
class CharEstimator:
    """Characters divided by ``chars_per_token`` (rounded up), plus ``image_tokens`` per image."""

    chars_per_token: float = attrs.field(default=4.0)
    image_tokens: int = IMAGE_TOKENS

    @chars_per_token.validator
    def _positive(self, attribute: Any, value: float) -> None:
        if not value > 0:
            raise ValueError(f"chars_per_token must be > 0, not {value!r}")

    def __call__(self, message: Any) -> int:
        texts, images = message_parts(message)
        chars = sum(len(t) for t in texts)
        return math.ceil(chars / self.chars_per_token) + images * self.image_tokens


@attrs.frozen
class TextCounterEstimator:
    """Any exact tokenizer (``count(text) -> int``) applied to a message's text; images still count ``image_tokens`` each.

    ``TextCounterEstimator(lambda s: len(encoding.encode(s)))`` turns a tokenizer into an estimator.
    """

    count: Callable[[str], int]
    image_tokens: int = IMAGE_TOKENS

    def __call__(self, message: Any) -> int:
        texts, images = message_parts(message)
        counted = self.count("\n".join(texts)) if texts else 0
        if isinstance(counted, bool) or not isinstance(counted, int) or counted < 0:
            raise TypeError(f"token counter returned {counted!r}, not an int >= 0")
        return counted + images * self.image_tokens


DEFAULT_ESTIMATOR: TokenEstimator = CharEstimator()


def estimate_tokens(messages: Iterable[Any], estimator: TokenEstimator | None = None) -> int:
    """The estimated size of some messages."""
    estimate = estimator or DEFAULT_ESTIMATOR
    return sum(estimate(m) for m in messages)


def usage_tokens(usage: msg.Usage) -> int:
    """The context size a reply's usage reports: ``total_tokens``, else the sum of its parts."""
    if usage.total_tokens > 0:
        return usage.total_tokens
    return usage.input + usage.output + usage.cache_read + usage.cache_write


def reported_usage(message: Any) -> int | None:
    """The context size an assistant reply reports, or None when it reports none we trust."""
    if not isinstance(message, msg.AssistantMessage) or message.usage is None or message.stop_reason in _UNTRUSTED_STOPS:
        return None
    tokens = usage_tokens(message.usage)
    return tokens if tokens > 0 else None


@attrs.frozen(kw_only=True)
class ContextTokens:
    """How big a context is (``tokens``, to compare with a context window), and where the figure comes from:
    ``usage_tokens`` reported by a reply (None: everything is estimated), plus ``estimated_tokens`` for the messages after it."""

    tokens: int
    usage_tokens: int | None
    estimated_tokens: int
    usage_index: int | None = None  # index in the messages of the reply whose usage was used

    @property
    def source(self) -> str:
        return "estimate" if self.usage_tokens is None else "usage"


def context_tokens(
    messages: Sequence[Any], estimator: TokenEstimator | None = None, *, trusted: Callable[[Any], bool] | None = None
) -> ContextTokens:
    """The size of a context: the usage the last trusted assistant reply reports (the provider counted that context
    exactly), plus an estimate of the messages after it; with no such reply, an estimate of everything.
    ``trusted(message)`` says whether an assistant reply's usage describes this context (after a compaction, replies
    kept from before it measured the old, longer context)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        reported = reported_usage(message)
        if reported is None or (trusted is not None and not trusted(message)):
            continue
        tail = estimate_tokens(messages[index + 1 :], estimator)
        return ContextTokens(tokens=reported + tail, usage_tokens=reported, estimated_tokens=tail, usage_index=index)
    total = estimate_tokens(messages, estimator)
    return ContextTokens(tokens=total, usage_tokens=None, estimated_tokens=total)


DEFAULT_KEEP_RECENT_TOKENS = 20_000
DEFAULT_RESERVE_TOKENS = 16_384

TURN_START_ROLES = frozenset({"user", "custom", "branch_summary", "bashExecution", "bash_execution"})
_TURN_START_TYPES = frozenset({"custom_message", "branch_summary"})
_MESSAGE_TYPES = frozenset({"message", "custom_message", "branch_summary", "compaction"})


@attrs.frozen
class _Unit:
    """One thing the context holds: an entry, or a message of a retained tail (entry None)."""

    entry: Any
    messages: tuple[Any, ...]
    tokens: int

    @property
    def turn_start(self) -> bool:
        if self.entry is None:
            return self.messages[0].role in TURN_START_ROLES
        kind = self.entry.type
        return kind in _TURN_START_TYPES or (kind == "message" and self.entry.message.role in TURN_START_ROLES)

    @property
    def silent(self) -> bool:
        """An entry that carries no message and is no message-like entry."""
        return self.entry is not None and not self.messages and self.entry.type not in _MESSAGE_TYPES


@attrs.frozen(kw_only=True)
class CompactionPlan:
    """What a compaction would do: what it summarises, where the kept part starts.

    ``first_kept_entry_id`` is the entry the kept part starts at (None when nothing kept is an entry, e.g. everything is
    summarised). With ``retain_tail`` the compaction stores ``kept_messages`` as its retained tail instead.
    ``tokens_before`` is the context size now; ``summarized_tokens`` and ``kept_tokens`` the estimates of the two parts.
    """

    keep_recent_tokens: int
    retain_tail: bool
    previous_compaction_id: str | None
    previous_summary: str | None
    messages_to_summarize: tuple[Any, ...]
    summarized_entry_ids: tuple[str, ...]
    kept_messages: tuple[Any, ...]
    kept_entry_ids: tuple[str, ...]
    first_kept_entry_id: str | None
    tokens_before: int
    summarized_tokens: int
    kept_tokens: int

    @property
    def is_empty(self) -> bool:
        """True when there is nothing new to summarise (compacting would change nothing)."""
        return not self.messages_to_summarize

    @property
    def fits(self) -> bool:
        """True when the kept part fits the budget (False: the newest turn alone is larger)."""
        return self.kept_tokens <= self.keep_recent_tokens


def context_units(path: Sequence[Any], options: SessionContextBuildOptions, estimate: TokenEstimator) -> tuple[Any, list[_Unit]]:
    """The latest compaction on ``path`` (or None) and the units the context holds after it:
    its retained tail, then the entries the context keeps (``default_compaction_transform``)."""
    entries = context.default_compaction_transform(path)
    compaction = entries[0] if entries and isinstance(entries[0], ContextCompacted) else None
    units: list[_Unit] = []
    if compaction is not None:
        units = [_Unit(None, (m,), estimate(m)) for m in compaction.retained_tail or ()]
    for index in range(0 if compaction is None else 1, len(entries)):
        messages = tuple(context.entry_to_messages(entries[index], index, entries, options))
        units.append(_Unit(entries[index], messages, sum(estimate(m) for m in messages)))
    return compaction, units


def _tool_links(units: Sequence[_Unit]) -> list[tuple[int, int]]:
    """``(call unit, result unit)`` for every tool result whose call is in an earlier unit."""
    calls: dict[str, int] = {}
    links: list[tuple[int, int]] = []
    for index, unit in enumerate(units):
        for message in unit.messages:
            if isinstance(message, msg.ToolResultMessage) and message.tool_call_id in calls:
                links.append((calls[message.tool_call_id], index))
            elif isinstance(message, msg.AssistantMessage):
                for block in message.content:
                    if isinstance(block, msg.ToolCall):
                        calls[block.id] = index
    return links


def _last_turn_complete(units: Sequence[_Unit]) -> bool:
    """Did the newest turn end with an assistant reply that asked for no tool?"""
    for unit in reversed(units):
        if unit.messages:
            last = unit.messages[-1]
            if isinstance(last, msg.AssistantMessage):
                return not any(isinstance(b, msg.ToolCall) for b in last.content)
            return isinstance(last, (msg.CompactionSummaryMessage, msg.BranchSummaryMessage, msg.CustomMessage))
    return True


def boundaries(units: Sequence[_Unit], *, retain_tail: bool) -> list[int]:
    """Indices where a cut may go, ascending (``len(units)``: after everything)."""
    n = len(units)
    blocked = [0] * (n + 2)
    for call, result in _tool_links(units):
        blocked[call + 1] += 1
        blocked[result + 1] -= 1
    out: list[int] = []
    open_links = 0
    for k in range(n + 1):
        open_links += blocked[k]
        if open_links:
            continue
        if k == n:
            if _last_turn_complete(units):
                out.append(k)
        elif units[k].turn_start and (retain_tail or units[k].entry is not None):
            out.append(k)
    return out


def _suffix_tokens(units: Sequence[_Unit]) -> list[int]:
    """``out[k]``: the tokens of ``units[k:]`` (``out[0]`` is the whole)."""
    suffix = [0] * (len(units) + 1)
    for index in range(len(units) - 1, -1, -1):
        suffix[index] = suffix[index + 1] + units[index].tokens
    return suffix


def _cut(units: Sequence[_Unit], suffix: list[int], keep_recent_tokens: int, retain_tail: bool) -> int:
    """Where the kept part starts: the earliest boundary whose suffix fits the budget (else
    the newest boundary), moved back over the silent entries just before it."""
    candidates = boundaries(units, retain_tail=retain_tail)
    fitting = [k for k in candidates if suffix[k] <= keep_recent_tokens]
    if fitting:
        cut = fitting[0]
    elif candidates:
        cut = candidates[-1]
    else:
        cut = 0
    while cut > 0 and units[cut - 1].silent:
        cut -= 1
    return cut


def plan_compaction(
    path: Sequence[Any], *, keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS, retain_tail: bool = False,
    options: SessionContextBuildOptions | None = None, estimator: TokenEstimator | None = None, tokens_before: int | None = None,
) -> CompactionPlan:
    """Plan a compaction of the branch whose entries are ``path`` (root first). ``tokens_before`` defaults to the estimate
    of the whole current context; a caller that knows the real usage (``Session.plan_compaction`` does) passes it in."""
    if isinstance(keep_recent_tokens, bool) or not isinstance(keep_recent_tokens, int):
        raise TypeError(f"keep_recent_tokens must be an int, not {keep_recent_tokens!r}")
    if keep_recent_tokens < 0:
        raise ValueError(f"keep_recent_tokens must be >= 0, not {keep_recent_tokens}")
    estimate = estimator or DEFAULT_ESTIMATOR
    compaction, units = context_units(path, options or context.DEFAULT_OPTIONS, estimate)
    suffix = _suffix_tokens(units)
    cut = _cut(units, suffix, keep_recent_tokens, retain_tail)
    if tokens_before is None:
        tokens_before = suffix[0] + (estimate(context.compaction_summary(compaction)) if compaction is not None else 0)
    summarized, kept = units[:cut], units[cut:]
    return CompactionPlan(
        keep_recent_tokens=keep_recent_tokens,
        retain_tail=retain_tail,
        previous_compaction_id=compaction.id if compaction is not None else None,
        previous_summary=compaction.summary if compaction is not None else None,
        messages_to_summarize=tuple(m for u in summarized for m in u.messages),
        summarized_entry_ids=tuple(u.entry.id for u in summarized if u.entry is not None),
        kept_messages=tuple(m for u in kept for m in u.messages),
        kept_entry_ids=tuple(u.entry.id for u in kept if u.entry is not None),
        first_kept_entry_id=kept[0].entry.id if not retain_tail and kept and kept[0].entry is not None else None,
        tokens_before=tokens_before,
        summarized_tokens=suffix[0] - suffix[cut],
        kept_tokens=suffix[cut],
    )


__all__ = [
    "DEFAULT_ESTIMATOR", "DEFAULT_KEEP_RECENT_TOKENS", "DEFAULT_RESERVE_TOKENS", "IMAGE_TOKENS", "TURN_START_ROLES",
    "CharEstimator", "CompactionPlan", "ContextTokens", "TextCounterEstimator", "TokenEstimator", "context_tokens",
    "estimate_tokens", "message_parts", "plan_compaction", "reported_usage", "usage_tokens",
]
