"""Statistics: entries by type, messages by role, tool calls, tokens and cost; of a set of entries, and of the whole
session and every branch in one pass over the log (:func:`branch_stats`), each entry decoded once and not kept.

A branch's stats are the fold of its root-to-tip path, so the stats at an entry are those at its parent with the
entry applied. Walking the log in order (a parent comes before its children), the pass keeps a running state only for
entries with children still to come: the last child takes its parent's state over, an earlier one gets a copy. Each
branch's figures are then the very sums the fold of its path makes, added in the same order (floats included).
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Iterable, Sequence
from typing import Any

import attrs

from sessiontree.domain.log import EntryLog
from sessiontree.domain.messages import AssistantMessage, ToolCall, Usage
from sessiontree.projections.base import fold
from sessiontree.projections.context import branch_positions


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


@attrs.frozen
class BranchStats:
    """``whole``: the session's stats, ``.branch`` the current branch's; ``branches``: ``(tip id, is current, stats)``
    for the last entry of every branch in log order, then the current leaf if it sits inside the tree."""

    whole: SessionStats
    branches: list[tuple[str, bool, SessionStats]]


def copy_stats(stats: SessionStats) -> SessionStats:
    """A copy sharing nothing mutable (dicts in the same order), cheaper than ``copy.deepcopy``."""
    return attrs.evolve(
        stats, entries_by_type=dict(stats.entries_by_type), messages_by_role=dict(stats.messages_by_role),
        by_model={key: attrs.evolve(per) for key, per in stats.by_model.items()},
    )


def tip_positions(log: EntryLog, limit: int) -> list[int]:
    """Positions of the entries without children in the tree (``leaf`` records are not nodes), in log order; what
    ``branch_tips`` finds in the tree projection, from the envelopes alone."""
    types, _, parents, orphans = log.envelopes()
    parented = bytearray(limit)
    for pos in range(limit):
        if types[pos] == "leaf":
            continue
        parent = parents[pos]
        if parent < 0 and pos in orphans:  # its parent is later in the log (or missing)
            later = log.position(orphans[pos], limit)
            parent = -1 if later is None else later
        if parent >= 0:
            parented[parent] = 1
    return [pos for pos in range(limit) if types[pos] != "leaf" and not parented[pos]]


def fold_branches(
    types: Sequence[str], parents: Sequence[int], count: int, entries: Iterable[Any], wanted: Collection[int]
) -> tuple[SessionStats, dict[int, SessionStats]]:
    """The stats of ``entries`` (the log's first ``count`` entries, in order, with their ``types`` and ``parents``
    positions) and of the path ending at each position of ``wanted`` (``leaf`` records are on no path: they pass
    their parent's state on)."""
    pending = array("l", [0]) * count
    for pos in range(count):
        if parents[pos] >= 0:
            pending[parents[pos]] += 1
    projection = StatsProjection()
    apply = projection.apply
    whole = projection.initial()
    running: dict[int, SessionStats] = {}  # positions whose children are still to come
    found: dict[int, SessionStats] = {}
    for pos, entry in enumerate(entries):
        apply(whole, entry)
        parent = parents[pos]
        needed = pending[pos] > 0 or pos in wanted
        if parent >= 0:
            pending[parent] -= 1
            base = running[parent] if pending[parent] else running.pop(parent)
            if not needed:
                continue
            state = copy_stats(base) if pending[parent] else base
        elif not needed:
            continue
        else:
            state = SessionStats()
        if types[pos] != "leaf":
            apply(state, entry)
        if pos in wanted:
            found[pos] = copy_stats(state) if pending[pos] else state
        if pending[pos]:
            running[pos] = state
    return whole, found


def branch_stats(log: EntryLog, leaf_id: str | None, limit: int, entries: Iterable[Any]) -> BranchStats:
    """What ``stats`` shows for the first ``limit`` entries of ``log`` with the leaf at ``leaf_id``: ``entries`` are
    those entries in order (a pass that keeps none of them)."""
    types, ids, parents, _ = log.envelopes()
    current_path = branch_positions(log, leaf_id, limit)
    current = current_path[-1] if current_path else None
    tips = tip_positions(log, limit)
    if current is not None and current not in tips:  # the leaf sits inside the tree
        tips.append(current)
    wanted = set(tips)
    whole, found = fold_branches(types, parents, limit, entries, wanted)
    whole.branch = copy_stats(found[current]) if current is not None else SessionStats()
    return BranchStats(whole, [(ids[pos], pos == current, found[pos]) for pos in tips])
