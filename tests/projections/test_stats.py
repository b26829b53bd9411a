"""Session statistics, for the whole session and for the current branch (SPEC 3)."""

from __future__ import annotations

import pytest
import sessiontree_testkit as kit

from sessiontree import ToolCall
from sessiontree.projections.stats import StatsProjection, stats_of


def busy_session():
    """Two branches with tool calls, usage on replies, a compaction and a branch summary."""
    s = kit.open_session()
    q = s.append_message(kit.user("q"))
    s.append_message(kit.assistant(
        "reading", usage=kit.usage(100, 10, 0.5),
        tool_calls=[ToolCall(id="c1", name="read", arguments={"path": "a.py"}),
                    ToolCall(id="c2", name="read", arguments={"path": "b.py"})],
    ))
    s.append_message(kit.tool_result("c1", "read", "..."))
    s.append_compaction("sum", None, 110, usage=kit.usage(50, 5, 0.25))
    s.move_to(q, {"summary": "dropped", "usage": {"input": 7, "output": 3, "cost": {"total": 0.125}}})
    s.append_message(kit.assistant("other", model="claude-haiku", usage=kit.usage(20, 2, 0.0625)))
    return s, q


def test_whole_session_counts_every_entry():
    """Whole-session stats count entries by type and messages by role over all branches."""
    s, _ = busy_session()
    stats = s.get_session_stats()
    assert stats.entry_count == 7
    assert stats.entries_by_type == {"message": 4, "compaction": 1, "leaf": 1, "branch_summary": 1}
    assert stats.messages_by_role == {"user": 1, "assistant": 2, "tool_result": 1}
    assert (stats.message_count, stats.user_messages, stats.assistant_messages) == (4, 1, 2)
    assert stats.tool_calls == 2


def test_tokens_and_cost_add_replies_compactions_and_branch_summaries():
    """Usage of replies, compactions and branch summaries is summed (the summarisation calls cost too)."""
    s, _ = busy_session()
    stats = s.get_session_stats()
    assert (stats.input, stats.output) == (100 + 50 + 7 + 20, 10 + 5 + 3 + 2)
    assert stats.total_tokens == 110 + 55 + 0 + 22
    assert stats.cost_total == pytest.approx(0.5 + 0.25 + 0.125 + 0.0625)


def test_cost_per_model_counts_replies_only():
    """``by_model`` splits reply usage per provider/model."""
    stats = busy_session()[0].get_session_stats()
    assert set(stats.by_model) == {"anthropic/claude-sonnet", "anthropic/claude-haiku"}
    assert stats.by_model["anthropic/claude-haiku"].input == 20
    assert stats.by_model["anthropic/claude-sonnet"].messages == 1


def test_branch_stats_cover_only_the_current_branch():
    """``stats.branch`` counts the root-to-leaf path only, without leaf records."""
    s, _ = busy_session()
    branch = s.get_session_stats().branch
    assert branch.entries_by_type == {"message": 2, "branch_summary": 1}
    assert branch.messages_by_role == {"user": 1, "assistant": 1}
    assert (branch.input, branch.tool_calls) == (7 + 20, 0)
    assert branch.branch is None


def test_stats_are_a_fold_of_the_stats_projection():
    """``stats_of`` folds the same projection the session keeps up to date."""
    s, _ = busy_session()
    whole = s.get_session_stats()
    again = stats_of(s.get_entries())
    whole.branch = None
    assert whole == again
    assert StatsProjection().initial().entry_count == 0


def test_returned_stats_are_a_copy():
    """Changing returned stats does not change the session's."""
    s, _ = busy_session()
    s.get_session_stats().entries_by_type.clear()
    assert s.get_session_stats().entry_count == 7
    assert s.get_session_stats().entries_by_type["message"] == 4
