"""Token accounting: how big a message, and a whole context, is for the model.

A *token estimator* is any callable ``(message) -> int``: :class:`CharEstimator` (the default, pi's cheap rule) or
:class:`TextCounterEstimator` over any exact tokenizer, so a caller plugs in its model's tokenizer without this library
depending on one (see docs/compaction.md). :func:`context_tokens` sizes a context the way pi does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from sessiontree.domain import messages as msg

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


__all__ = [
    "DEFAULT_ESTIMATOR", "IMAGE_TOKENS", "CharEstimator", "ContextTokens", "TextCounterEstimator", "TokenEstimator",
    "context_tokens", "estimate_tokens", "message_parts", "reported_usage", "usage_tokens",
]
