"""Statistics: entries by type, messages by role, tool calls, tokens and cost."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from sessiontree.domain.messages import AssistantMessage, ToolCall, Usage
from sessiontree.projections.base import fold


@attrs.define(kw_only=True)
class ModelUsage:
    """Tokens and cost of one model's replies."""

    messages: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost_total: float = 0.0


@attrs.define(kw_only=True)
class SessionStats:
    """Counts and totals over a set of entries (the whole session, or one branch); ``branch`` holds the same figures for
    the current branch (None inside it). Tokens and cost add assistant usage and the usage recorded on compactions and
    branch summaries (the cost of the summarisation calls)."""

    entry_count: int = 0
    entries_by_type: dict[str, int] = attrs.field(factory=dict)
    message_count: int = 0
    messages_by_role: dict[str, int] = attrs.field(factory=dict)
    tool_calls: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost_total: float = 0.0
    by_model: dict[str, ModelUsage] = attrs.field(factory=dict)
    branch: SessionStats | None = None

    @property
    def user_messages(self) -> int:
        return self.messages_by_role.get("user", 0)

    @property
    def assistant_messages(self) -> int:
        return self.messages_by_role.get("assistant", 0)


def _add_usage(totals: SessionStats | ModelUsage, usage: Usage) -> None:
    totals.input += usage.input
    totals.output += usage.output
    totals.cache_read += usage.cache_read
    totals.cache_write += usage.cache_write
    totals.total_tokens += usage.total_tokens
    totals.cost_total += usage.cost.total


def _model_usage(stats: SessionStats, reply: AssistantMessage) -> ModelUsage:
    """The reply's model's totals in ``stats.by_model``, counting the reply."""
    key = f"{reply.provider}/{reply.model}" if reply.provider else reply.model
    per = stats.by_model.get(key)
    if per is None:
        per = stats.by_model[key] = ModelUsage()
    per.messages += 1
    return per


class StatsProjection:
    """State: a :class:`SessionStats` updated in place."""

    name = "stats"
    types = None

    def initial(self) -> SessionStats:
        return SessionStats()

    def apply(self, state: SessionStats, entry: Any) -> SessionStats:
        kind = entry.type
        state.entry_count += 1
        state.entries_by_type[kind] = state.entries_by_type.get(kind, 0) + 1
        if kind == "message":
            message = entry.message
            role = message.role
            state.message_count += 1
            state.messages_by_role[role] = state.messages_by_role.get(role, 0) + 1
            if isinstance(message, AssistantMessage):
                state.tool_calls += sum(1 for b in message.content if isinstance(b, ToolCall))
                if message.usage is not None:
                    _add_usage(state, message.usage)
                    _add_usage(_model_usage(state, message), message.usage)
        elif kind in ("compaction", "branch_summary") and entry.usage is not None:
            _add_usage(state, entry.usage)
        return state


def stats_of(entries: Iterable[Any]) -> SessionStats:
    """Stats over ``entries`` (a fold of :class:`StatsProjection`)."""
    return fold(StatsProjection(), entries)
