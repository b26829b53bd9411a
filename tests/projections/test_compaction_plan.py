"""The compaction planner: turn-boundary cuts, tool pairs kept together, the keep budget."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessiontree_testkit import assistant, open_session, tool_result, user

from sessiontree.domain.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from sessiontree.projections.compaction import CharEstimator, plan_compaction

estimate = CharEstimator()


def turn(session: Any, n: int, *, tools: int = 0, size: int = 40) -> str:
    """A user request, ``tools`` call/result rounds, and a final answer; returns the user entry id."""
    first = session.append_message(user(f"u{n} " + "x" * size))
    for t in range(tools):
        call = ToolCall(id=f"c{n}.{t}", name="read", arguments={"path": f"f{n}.{t}"})
        session.append_message(assistant(tool_calls=[call]))
        session.append_message(tool_result(call.id, "read", "r" * size))
    session.append_message(assistant(f"a{n} " + "y" * size))
    return first


def tokens(messages: Any) -> int:
    return sum(estimate(m) for m in messages)


def plan_of(session: Any, keep: int, **kwargs: Any) -> Any:
    return plan_compaction(session.get_branch(), keep_recent_tokens=keep, **kwargs)


def test_the_cut_keeps_the_newest_turns_that_fit_the_budget() -> None:
    """With 4 equal turns and room for two, the kept part starts at the third user message."""
    session = open_session()
    ids = [turn(session, n) for n in range(4)]
    per_turn = tokens(session.build_context().messages) // 4
    plan = plan_of(session, 2 * per_turn + 1)
    assert plan.first_kept_entry_id == ids[2]
    assert [m.role for m in plan.messages_to_summarize] == ["user", "assistant"] * 2
    assert plan.kept_tokens == 2 * per_turn and plan.fits
    assert plan.summarized_entry_ids == tuple(e.id for e in session.get_branch()[:4])


def test_summarised_and_kept_messages_partition_the_context() -> None:
    """What is summarised followed by what is kept is exactly the current context."""
    session = open_session()
    for n in range(5):
        turn(session, n, tools=n % 3)
    plan = plan_of(session, 120)
    assert list(plan.messages_to_summarize + plan.kept_messages) == session.build_context().messages
    assert plan.tokens_before == tokens(session.build_context().messages)


def test_a_big_tool_result_never_becomes_the_first_kept_entry() -> None:
    """The budget runs out inside a tool loop; the cut moves to the next user message instead."""
    session = open_session()
    turn(session, 0)
    turn(session, 1, tools=2, size=400)
    last = turn(session, 2)
    plan = plan_of(session, 150)
    assert plan.first_kept_entry_id == last
    kept_roles = [m.role for m in plan.kept_messages]
    assert kept_roles == ["user", "assistant"]


def test_a_turn_in_progress_larger_than_the_budget_is_kept_whole() -> None:
    """No cut inside a turn: an unfinished newest turn larger than the budget is kept entirely."""
    session = open_session()
    turn(session, 0)
    last = session.append_message(user("u1 " + "x" * 200))
    call = ToolCall(id="c1", name="read", arguments={"path": "big"})
    session.append_message(assistant(tool_calls=[call]))
    session.append_message(tool_result("c1", "read", "r" * 800))
    plan = plan_of(session, 10)
    assert plan.first_kept_entry_id == last
    assert not plan.fits and plan.kept_tokens > 10
    assert [m.role for m in plan.messages_to_summarize] == ["user", "assistant"]


def test_a_finished_newest_turn_larger_than_the_budget_is_summarised_too() -> None:
    """The budget is a ceiling: when only keeping nothing fits, a finished turn is summarised."""
    session = open_session()
    turn(session, 0)
    turn(session, 1, tools=3, size=200)
    plan = plan_of(session, 10)
    assert plan.first_kept_entry_id is None and plan.fits and plan.kept_tokens == 0


def test_a_zero_budget_summarises_everything_once_the_turn_is_complete() -> None:
    """Keeping nothing is allowed after a finished turn, and the plan then keeps no entry."""
    session = open_session()
    turn(session, 0)
    turn(session, 1)
    plan = plan_of(session, 0)
    assert plan.first_kept_entry_id is None
    assert plan.kept_messages == () and len(plan.messages_to_summarize) == 4


def test_a_turn_in_progress_is_never_summarised_away() -> None:
    """While a tool result awaits the model's answer, the current turn is kept whole."""
    session = open_session()
    turn(session, 0)
    current = session.append_message(user("run it"))
    call = ToolCall(id="c9", name="bash", arguments={"command": "make"})
    session.append_message(assistant(tool_calls=[call]))
    session.append_message(tool_result("c9", "bash", "built"))
    plan = plan_of(session, 0)
    assert plan.first_kept_entry_id == current
    assert [m.role for m in plan.kept_messages] == ["user", "assistant", "tool_result"]


def test_settings_changes_before_a_turn_stay_with_it() -> None:
    """A model change and a label right before the first kept user message are kept too."""
    session = open_session()
    turn(session, 0)
    change = session.append_model_change("openai", "gpt-5")
    session.append_thinking_level_change("high")
    kept_user = turn(session, 1)
    plan = plan_of(session, 30)
    assert plan.first_kept_entry_id == change
    assert kept_user in plan.kept_entry_ids


def test_a_result_that_arrives_after_the_next_user_message_is_not_orphaned() -> None:
    """A tool call answered only after the next user message blocks the cut before that message."""
    session = open_session()
    turn(session, 0)
    session.append_message(user("first"))
    session.append_message(assistant(tool_calls=[ToolCall(id="late", name="bash", arguments={})]))
    interrupting = session.append_message(user("second"))
    session.append_message(tool_result("late", "bash", "done"))
    session.append_message(assistant("ok"))
    plan = plan_of(session, 20)
    assert plan.first_kept_entry_id != interrupting
    summarised_calls = {b.id for m in plan.messages_to_summarize if isinstance(m, AssistantMessage)
                        for b in m.content if isinstance(b, ToolCall)}
    kept_results = {m.tool_call_id for m in plan.kept_messages if isinstance(m, ToolResultMessage)}
    assert not summarised_calls & kept_results


def test_nothing_to_summarise_gives_an_empty_plan() -> None:
    """A budget larger than the context keeps everything: the plan is empty."""
    session = open_session()
    turn(session, 0)
    turn(session, 1)
    plan = plan_of(session, 10_000)
    assert plan.is_empty and plan.first_kept_entry_id == session.get_branch()[0].id
    assert plan.summarized_tokens == 0


def test_a_repeated_compaction_starts_at_the_previous_kept_boundary() -> None:
    """The second plan sees the first compaction's kept entries and passes its summary along."""
    session = open_session()
    ids = [turn(session, n) for n in range(3)]
    first = plan_of(session, 40)
    assert first.first_kept_entry_id == ids[2]
    compaction = session.append_compaction("S1", first.first_kept_entry_id, first.tokens_before)
    later = [turn(session, n) for n in range(3, 5)]
    second = plan_compaction(session.get_path_to_root_or_compaction(), keep_recent_tokens=40)
    assert second.previous_summary == "S1" and second.previous_compaction_id == compaction
    assert second.first_kept_entry_id == later[1]
    assert ids[2] in second.summarized_entry_ids and compaction not in second.summarized_entry_ids
    said = [m.content[0].text[:2] for m in second.messages_to_summarize if isinstance(m, UserMessage)]
    assert said == ["u2", "u3"]
    assert second.tokens_before == tokens(session.build_context().messages)


def test_a_previous_retained_tail_is_summarised_or_cut_inside_with_retain_tail() -> None:
    """Tail messages are summarised when cutting at an entry; with retain_tail the cut may fall in the tail."""
    session = open_session()
    session.append_compaction("S1", None, 100, retained_tail=[user("old request"), assistant("old answer")])
    turn(session, 0)
    by_entry = plan_compaction(session.get_branch(), keep_recent_tokens=10_000)
    assert by_entry.first_kept_entry_id == session.get_branch()[1].id
    assert [m.role for m in by_entry.messages_to_summarize] == ["user", "assistant"]
    by_tail = plan_compaction(session.get_branch(), keep_recent_tokens=10_000, retain_tail=True)
    assert by_tail.is_empty and by_tail.first_kept_entry_id is None
    assert len(by_tail.kept_messages) == 4


def test_the_budget_must_be_a_non_negative_int() -> None:
    """A negative or non-int keep budget is refused before anything is planned."""
    with pytest.raises(ValueError):
        plan_compaction([], keep_recent_tokens=-1)
    with pytest.raises(TypeError):
        plan_compaction([], keep_recent_tokens=1.5)  # type: ignore[arg-type]


turns = st.lists(
    st.tuples(st.integers(0, 3), st.integers(1, 300), st.booleans()), min_size=1, max_size=8
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=turns, keep=st.integers(0, 600), retain=st.booleans())
def test_any_plan_respects_turns_tool_pairs_and_the_budget(shape: Any, keep: int, retain: bool) -> None:
    """For random conversations and budgets: partition, no orphan, turn-boundary cut, tightest fit."""
    session = open_session()
    for n, (tools, size, settings_first) in enumerate(shape):
        if settings_first:
            session.append_thinking_level_change("low")
        turn(session, n, tools=tools, size=size)
    plan = plan_of(session, keep, retain_tail=retain)
    context = session.build_context().messages
    assert list(plan.messages_to_summarize + plan.kept_messages) == context
    calls = {b.id for m in plan.messages_to_summarize if isinstance(m, AssistantMessage)
             for b in m.content if isinstance(b, ToolCall)}
    assert not calls & {m.tool_call_id for m in plan.kept_messages if isinstance(m, ToolResultMessage)}
    assert not plan.kept_messages or isinstance(plan.kept_messages[0], UserMessage)
    if plan.first_kept_entry_id is not None:
        kept = [e for e in session.get_branch() if e.id in plan.kept_entry_ids]
        assert kept[0].id == plan.first_kept_entry_id
        first_message = next(e for e in kept if e.type == "message")
        assert isinstance(first_message.message, UserMessage)
    turn_sizes = []
    for message in context:
        if isinstance(message, UserMessage):
            turn_sizes.append(0)
        turn_sizes[-1] += estimate(message)
    if max(turn_sizes) <= keep:
        assert plan.fits and plan.kept_tokens <= keep
    if plan.fits and plan.messages_to_summarize:
        last_user = max(i for i, m in enumerate(plan.messages_to_summarize) if isinstance(m, UserMessage))
        assert tokens(plan.messages_to_summarize[last_user:]) + plan.kept_tokens > keep
