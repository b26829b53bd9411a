"""Tool calls and results: check_context names every break of the providers' rules, repair_tool_pairs repairs exactly
those in the context (never in the log), and Session.repair appends what an append can fix."""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sessiontree_providers import anthropic_problems, chat_problems, responses_problems
from sessiontree_testkit import assistant, open_session, tool_result, user

import sessiontree
from sessiontree import (
    ContextProblem,
    ContextRepairWarning,
    InMemorySessionRepo,
    SessionContextBuildOptions,
    SessionError,
    ToolCall,
    ToolResultMessage,
)
from sessiontree.projections.context import context_entries

REPAIR = SessionContextBuildOptions(entry_transforms=[sessiontree.repair_tool_pairs])
IDS = ["a", "b", "c"]


def calls(*ids: str) -> Any:
    return assistant("", tool_calls=[ToolCall(id=i, name=f"tool_{i}") for i in ids])


def kinds(problems: list[ContextProblem]) -> Counter:
    return Counter((p.kind, p.tool_call_id) for p in problems)


def roles(messages: Any) -> list[str]:
    return [m.role if not isinstance(m, ToolResultMessage) else f"result:{m.tool_call_id}" for m in messages]


# -- each kind, as docs/concepts.md shows it -------------------------------------------------------


def test_an_interrupted_call_is_missing_and_gets_a_synthetic_error_result_right_after_it() -> None:
    """A call whose run ended before its result: missing_result; the repair puts an error result after the call."""
    session = open_session()
    session.append_message(user("list files"))
    call = session.append_message(calls("a", "b"))
    session.append_message(tool_result("a", "tool_a", "ok"))
    session.append_message(user("hello?"))
    [problem] = session.check_context()
    assert (problem.kind, problem.entry_id, problem.tool_call_id) == ("missing_result", call, "b")
    assert "next message" in problem.message
    messages = session.build_context(REPAIR).messages
    assert roles(messages) == ["user", "assistant", "result:a", "result:b", "user"]
    synthetic = messages[3]
    assert synthetic.is_error and synthetic.tool_name == "tool_b" and synthetic.details["synthetic"] is True
    assert synthetic.content[0].text == "No result was recorded for this tool call (interrupted)."
    assert roles(session.build_context().messages) == ["user", "assistant", "result:a", "user"]  # pi's context by default


def test_each_kind_is_reported_with_its_entry_and_repaired_by_its_rule() -> None:
    """Orphan, duplicate and out-of-place results and a repeated call id, in one branch."""
    session = open_session()
    session.append_message(user("go"))
    first = session.append_message(calls("a"))
    session.append_message(tool_result("a", "tool_a", "one"))
    dup = session.append_message(tool_result("a", "tool_a", "again"))
    orphan = session.append_message(tool_result("zz", "tool_z", "who?"))
    session.append_message(user("next"))
    second = session.append_message(calls("b"))
    session.append_message(user("interleaved"))
    late = session.append_message(tool_result("b", "tool_b", "late"))
    again = session.append_message(calls("a"))
    session.append_message(tool_result("a", "tool_a", "second a"))
    found = [(p.kind, p.entry_id, p.tool_call_id) for p in session.check_context()]
    assert found == [
        ("duplicate_result", dup, "a"), ("orphan_result", orphan, "zz"), ("result_out_of_place", late, "b"),
        ("duplicate_call_id", again, "a"),
    ]
    assert first and second
    messages = session.build_context(REPAIR).messages
    assert roles(messages) == ["user", "assistant", "result:a", "user", "assistant", "result:b", "user", "assistant",
                               "result:a_2"]
    assert [b.id for b in messages[-2].content] == ["a_2"]
    assert session.build_context(REPAIR).messages[5].content[0].text == "late"


def test_check_context_raises_only_for_an_unknown_leaf_and_takes_any_leaf() -> None:
    """Like build_context: not_found for an unknown leaf; None is the empty context."""
    session = open_session()
    session.append_message(user("go"))
    call = session.append_message(calls("a"))
    session.append_message(tool_result("a", "tool_a", "ok"))
    assert session.check_context() == []
    assert [p.kind for p in session.check_context(leaf_id=call)] == ["missing_result"]
    assert "end of the branch" in session.check_context(leaf_id=call)[0].message
    assert session.check_context(leaf_id=None) == []
    with pytest.raises(SessionError) as caught:
        session.check_context(leaf_id="nope")
    assert caught.value.code == "not_found"


def test_repair_appends_results_for_the_trailing_turn_and_nothing_is_rewritten() -> None:
    """An interrupted run: repair() appends one error result per unanswered call under the leaf."""
    session = open_session()
    session.append_message(user("go"))
    session.append_message(calls("a", "b", "c"))
    session.append_message(tool_result("b", "tool_b", "ok"))
    before = session.get_entries()
    appended = session.repair()
    assert len(appended) == 2
    assert session.get_entries()[: len(before)] == before
    assert [session.entry(i).message.tool_call_id for i in appended] == ["a", "c"]
    assert all(session.entry(i).message.is_error for i in appended)
    assert session.leaf_id == appended[-1] and session.check_context() == []
    assert session.repair() == []


def test_repair_leaves_history_alone_and_says_the_transform_is_the_way() -> None:
    """A call answered only after the next user message: appending cannot fix it; repair warns and appends nothing."""
    session = open_session()
    session.append_message(user("go"))
    session.append_message(calls("a"))
    session.append_message(user("more"))
    session.append_message(assistant("done"))
    with pytest.warns(ContextRepairWarning, match="repair_tool_pairs"):
        assert session.repair() == []
    assert len(session.get_entries()) == 4
    assert session.check_context(leaf_id=session.leaf_id)[0].kind == "missing_result"


def test_a_fork_at_an_assistant_message_with_calls_gets_synthetic_results() -> None:
    """fork(position="at") on a call: the fork's repaired context answers it, and repair() can write the answer."""
    repo = InMemorySessionRepo()
    source = repo.create(cwd="/p")
    source.append_message(user("go"))
    call = source.append_message(calls("a"))
    source.append_message(tool_result("a", "tool_a", "ok"))
    fork = repo.fork(source.id, call, position="at")
    assert [p.kind for p in fork.check_context()] == ["missing_result"]
    assert roles(fork.build_context(REPAIR).messages) == ["user", "assistant", "result:a"]
    [added] = fork.repair()
    assert fork.check_context() == [] and fork.entry(added).message.details["synthetic"] is True


def test_the_compaction_planner_never_leaves_an_orphan_behind() -> None:
    """compact() cuts between turns: no tool-call problem appears (tests/projections/test_compaction_plan.py has the
    planner's own property)."""
    session = open_session()
    for retain in (False, True):
        for n in range(6):
            session.append_message(user(f"q{n} " + "x" * 200))
            session.append_message(calls(f"c{n}{retain}"))
            session.append_message(tool_result(f"c{n}{retain}", f"tool_c{n}", "r" * 400))
            session.append_message(assistant("ok"))
        assert session.compact(lambda messages, previous: "summary", keep_recent_tokens=300, retain_tail=retain) is not None
        assert session.check_context() == []


def test_the_transform_extends_a_kept_context_only_when_that_is_safe() -> None:
    """With the transform as a session option, the kept context is right after each kind of append."""
    session = open_session(options=REPAIR)
    session.append_message(user("go"))
    session.append_message(calls("a"))
    assert roles(session.build_context().messages) == ["user", "assistant", "result:a"]
    session.append_message(tool_result("a", "tool_a", "real"))
    assert session.build_context().messages[-1].content[0].text == "real"
    session.append_message(user("next"))
    session.append_message(calls("a"))
    assert roles(session.build_context().messages)[-2:] == ["assistant", "result:a_2"]
    session.append_message(user("after"))
    assert roles(session.build_context().messages)[-3:] == ["assistant", "result:a_2", "user"]


# -- the property ----------------------------------------------------------------------------------

op = st.one_of(
    st.tuples(st.just("user")),
    st.tuples(st.just("calls"), st.lists(st.sampled_from(IDS), max_size=3)),
    st.tuples(st.just("result"), st.sampled_from([*IDS, "x"])),
    st.tuples(st.just("result"), st.sampled_from(IDS)),
    st.tuples(st.just("calls"), st.lists(st.sampled_from(IDS), min_size=1, max_size=2)),
    st.tuples(st.just("custom_message")),
    st.tuples(st.just("label")),
    st.tuples(st.just("compact"), st.integers(0, 1000), st.booleans()),
    st.tuples(st.just("move"), st.integers(0, 1000)),
    st.tuples(st.just("fork"), st.integers(0, 1000)),
)


def _run(session: Any, repo: Any, ops: list[Any]) -> list[Any]:
    sessions = [session]
    for o in ops:
        s = sessions[-1]
        branch = s.get_branch()
        every = [e.id for e in s.get_entries() if e.type != "leaf"]
        kind = o[0]
        if kind == "user":
            s.append_message(user("u"))
        elif kind == "calls":
            s.append_message(calls(*o[1]))
        elif kind == "result":
            s.append_message(tool_result(o[1], f"tool_{o[1]}", "r"))
        elif kind == "custom_message":
            s.append_custom_message_entry("note", "a note")
        elif kind == "label" and branch:
            s.append_label_change(branch[-1].id, "here")
        elif kind == "compact" and branch:
            first = branch[o[1] % len(branch)].id if o[1] % 3 else None
            tail = list(s.build_context().messages)[-(o[1] % 4):] if o[2] else None
            s.append_compaction("summary", first, 0, retained_tail=tail)
        elif kind == "move" and every:
            s.move_to(every[o[1] % len(every)])
        elif kind == "fork" and every:
            sessions.append(repo.fork(s.id, every[o[1] % len(every)], position="at"))
    return sessions


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=2, max_size=25))
def test_every_repaired_context_passes_each_providers_rules(ops: list[Any]) -> None:
    """Random trees (interrupted calls, compactions, forks, moves, interleavings, repeated ids): at every leaf,
    check_context equals what each provider's checker finds, and the repaired context passes all three."""
    repo = InMemorySessionRepo()
    for session in _run(repo.create(cwd="/p"), repo, ops):
        for leaf in [e.id for e in session.get_entries() if e.type != "leaf"]:
            plain = list(session.build_context(leaf_id=leaf).messages)
            problems = session.check_context(leaf_id=leaf)
            reported = kinds(problems)
            assert anthropic_problems(plain) == reported
            assert chat_problems(plain) == reported
            responses = responses_problems(plain)
            if any(kind == "duplicate_call_id" for kind, _ in reported):  # Responses cannot tell which call is answered
                responses = Counter({k: n for k, n in responses.items() if k[0] == "duplicate_call_id"})
            assert set(responses) <= set(reported)  # Responses pairs by id alone: less is out of place there
            repaired = list(session.build_context(REPAIR, leaf_id=leaf).messages)
            assert anthropic_problems(repaired) == chat_problems(repaired) == responses_problems(repaired) == Counter()
            _changes_match(plain, repaired, reported)
            once = sessiontree.repair_tool_pairs(context_entries(session.get_path_to_root_or_compaction(leaf), session.options))
            assert sessiontree.repair_tool_pairs(once) == once  # twice changes nothing more
            for kind in {p.kind for p in problems}:
                event(kind)


def _changes_match(plain: list[Any], repaired: list[Any], reported: Counter) -> None:
    """What the repair changed is what was reported: synthetic results for missing ones, results left out for orphans
    and duplicates, renamed calls for repeated ids, and every other message kept in order."""
    count = Counter(kind for kind, _ in reported.elements())
    synthetic = [m for m in repaired if isinstance(m, ToolResultMessage) and (m.details or {}).get("synthetic")]
    assert len(synthetic) == count["missing_result"]
    plain_results = [m for m in plain if isinstance(m, ToolResultMessage)]
    kept_results = [m for m in repaired if isinstance(m, ToolResultMessage) and m not in synthetic]
    assert len(plain_results) - len(kept_results) == count["orphan_result"] + count["duplicate_result"]
    plain_ids = [b.id for m in plain for b in getattr(m, "content", ()) if isinstance(b, ToolCall)]
    new_ids = [b.id for m in repaired for b in getattr(m, "content", ()) if isinstance(b, ToolCall)]
    assert sum(a != b for a, b in zip(plain_ids, new_ids, strict=True)) == count["duplicate_call_id"]
    others = [m.role for m in plain if not isinstance(m, ToolResultMessage)]
    assert others == [m.role for m in repaired if not isinstance(m, ToolResultMessage)]


def test_the_repair_warning_is_a_user_warning() -> None:
    """Apps can filter it like any UserWarning."""
    assert issubclass(ContextRepairWarning, UserWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert open_session().repair() == []


def test_repair_answers_a_trailing_call_whose_id_repeats_an_earlier_one() -> None:
    """The appended result carries the call's own id: it answers the nearest call, so only the repeated id is left."""
    session = open_session()
    session.append_message(user("go"))
    session.append_message(calls("a"))
    session.append_message(tool_result("a", "tool_a", "one"))
    session.append_message(user("again"))
    again = session.append_message(calls("a"))
    with pytest.warns(ContextRepairWarning):
        [added] = session.repair()
    assert session.entry(added).message.tool_call_id == "a"
    assert [(p.kind, p.entry_id) for p in session.check_context()] == [("duplicate_call_id", again)]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op.filter(lambda o: o[0] != "fork"), min_size=1, max_size=20))
def test_a_session_repairing_by_default_keeps_its_context_right_after_every_append(ops: list[Any]) -> None:
    """With the transform as a session option, the context kept across appends equals one built afresh."""
    session = open_session(options=REPAIR)
    for o in ops:
        _run(session, None, [o])
        assert list(session.build_context().messages) == list(session.build_context(leaf_id=session.leaf_id).messages)
