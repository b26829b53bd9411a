"""Statistics: entries by type, messages by role, tool calls, tokens and cost."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from sessiontree.domain.messages import AssistantMessage, ToolCall


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
    """Counts and totals over a set of entries (the whole session, or one branch).

    ``branch`` holds the same figures for the current branch (None inside it).
    Tokens and cost add assistant usage and the usage recorded on compactions and
    branch summaries (the cost of the summarisation calls).
    """

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


def _add_usage(stats: SessionStats, usage: Any, model_key: str | None) -> None:
    if usage is None:
        return
    stats.input += usage.input
    stats.output += usage.output
    stats.cache_read += usage.cache_read
    stats.cache_write += usage.cache_write
    stats.total_tokens += usage.total_tokens
    stats.cost_total += usage.cost.total
    if model_key is not None:
        per = stats.by_model.get(model_key)
        if per is None:
            per = stats.by_model[model_key] = ModelUsage()
        per.messages += 1
        per.input += usage.input
        per.output += usage.output
        per.cache_read += usage.cache_read
        per.cache_write += usage.cache_write
        per.total_tokens += usage.total_tokens
        per.cost_total += usage.cost.total


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
                key = f"{message.provider}/{message.model}" if message.provider else message.model
                _add_usage(state, message.usage, key)
        elif kind in ("compaction", "branch_summary"):
            _add_usage(state, entry.usage, None)
        return state


def stats_of(entries: Iterable[Any]) -> SessionStats:
    """Stats over ``entries`` (a fold of :class:`StatsProjection`)."""
    projection = StatsProjection()
    state = projection.initial()
    for entry in entries:
        state = projection.apply(state, entry)
    return state
