"""``Session.check_context`` and ``Session.repair``: the tool-call rules of projections/tool_pairs.py applied to a
session (docs/concepts.md, *Tool calls and results*).

The repair transform fixes any context without touching the log. ``repair`` writes a fix into the log only where a
plain append can: results for the calls of the leaf's own trailing turn, which nothing has answered yet. Anything else
is history (a result cut off by a compaction, a turn interleaved with another): an append cannot change what came
before it, so ``repair`` leaves it to the transform and says so in a :class:`ContextRepairWarning`.
"""

from __future__ import annotations

import warnings
from typing import Any

from sessiontree.projections.context import path_to_root_or_compaction
from sessiontree.projections.tool_pairs import (
    ContextProblem,
    find_problems,
    synthetic_result,
    trailing_missing,
    unrepaired_entries,
)


class ContextRepairWarning(UserWarning):
    """``Session.repair`` left problems it cannot fix by appending; ``repair_tool_pairs`` repairs them in the context."""


def context_entries_of(reader: Any, leaf_id: str | None) -> list[Any]:
    """The context entries at ``leaf_id`` (already checked) as the session's options build them, without the repair."""
    log = reader._agg.log
    path = log.get_many(path_to_root_or_compaction(log, leaf_id, reader._limit))
    return unrepaired_entries(path, reader.options)


def check_context(reader: Any, leaf_id: str | None) -> list[ContextProblem]:
    return find_problems(context_entries_of(reader, leaf_id))


def repair(session: Any) -> list[str]:
    """Append a synthetic error result for each unanswered call of the leaf's trailing turn; returns their ids."""
    appended: list[str] = []
    with session._lock:
        for call, assistant in trailing_missing(context_entries_of(session, session.leaf_id)):
            appended.append(session.append_message(synthetic_result(call, assistant.timestamp)))
        left = check_context(session, session.leaf_id)
    if left:
        kinds = ", ".join(sorted({p.kind for p in left}))
        warnings.warn(ContextRepairWarning(
            f"session {session.id}: {len(left)} problem(s) left ({kinds}) that an append cannot fix without rewriting "
            "history; build the context with SessionContextBuildOptions(entry_transforms=[repair_tool_pairs]) to repair "
            "them there"), stacklevel=3)
    return appended
