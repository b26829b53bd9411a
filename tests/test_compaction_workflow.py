"""The compaction workflow on a Session: should_compact, compact/acompact, summarised branch moves."""

from __future__ import annotations

import asyncio
import gc
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

from sessiontree_testkit import assistant, new_storage, open_session, tool_result, usage, user

from sessiontree import (
    CompactionSummaryMessage,
    JsonlSessionStorage,
    Session,
    SessionError,
    Summary,
    ToolCall,
    Usage,
    extractive_summary,
)
from sessiontree.cli.cmd_write import compact_report
from sessiontree.compaction import left_leaf_id
from sessiontree.projections.compaction import CharEstimator

estimate = CharEstimator()


class FakeSummarizer:
    """A deterministic summariser that records what it was given."""

    def __init__(self, usage: Usage | None = None, details: Any = None) -> None:
        self.calls: list[tuple[list[Any], str | None]] = []
        self.usage = usage
        self.details = details

    def __call__(self, messages: list[Any], previous: str | None) -> Summary:
        self.calls.append((list(messages), previous))
        text = f"S{len(self.calls)}: {len(messages)} messages" + (f" after <{previous}>" if previous else "")
        return Summary(summary=text, usage=self.usage, details=self.details)


def turn(session: Any, n: int, *, tools: int = 0, size: int = 40, reported: int | None = None) -> str:
    """A user request, ``tools`` call/result rounds and an answer; returns the user entry id."""
    first = session.append_message(user(f"u{n} " + "x" * size))
    for t in range(tools):
        call = ToolCall(id=f"c{n}.{t}", name="edit", arguments={"path": f"src/f{n}.py"})
        session.append_message(assistant(tool_calls=[call]))
        session.append_message(tool_result(call.id, "edit", "r" * size))
    session.append_message(assistant(f"a{n} " + "y" * size, usage=usage(input=reported) if reported else None))
    return first


def conversation(turns: int = 6, **kwargs: Any) -> Session:
    session = open_session()
    for n in range(turns):
        turn(session, n, tools=n % 2, **kwargs)
    return session


def state(session: Session) -> tuple[int, list[Any], Any]:
    return session.version, session.get_entries(), session.leaf_id


# -- compact -----------------------------------------------------------------------------


def test_compact_appends_the_planned_compaction_with_the_summariser_output() -> None:
    """The entry holds the summary, the plan's cut, tokens_before, the call's usage and details."""
    session = conversation()
    plan = session.plan_compaction(100)
    before = session.estimate_context_tokens().tokens
    fake = FakeSummarizer(usage=Usage(input=500, output=50, total_tokens=550), details={"files": ["a.py"]})
    entry_id = session.compact(fake, keep_recent_tokens=100)
    entry = session.get_entry(entry_id)
    assert fake.calls == [(list(plan.messages_to_summarize), None)]
    assert entry.type == "compaction" and entry.first_kept_entry_id == plan.first_kept_entry_id
    assert entry.summary == f"S1: {len(plan.messages_to_summarize)} messages"
    assert entry.tokens_before == before == plan.tokens_before
    assert entry.usage.total_tokens == 550 and entry.details == {"files": ["a.py"]}
    assert entry.from_hook is False and entry.retained_tail is None
    assert session.leaf_id == entry_id


def test_the_context_after_compaction_is_the_summary_then_the_kept_part() -> None:
    """After compacting, the model sees the new summary followed by exactly the kept messages."""
    session = conversation()
    plan = session.plan_compaction(100)
    session.compact(FakeSummarizer(), keep_recent_tokens=100)
    messages = session.build_context().messages
    assert isinstance(messages[0], CompactionSummaryMessage)
    assert messages[0].tokens_before == plan.tokens_before
    assert messages[1:] == list(plan.kept_messages)
    assert session.estimate_context_tokens().tokens <= estimate(messages[0]) + 100


def test_details_given_to_compact_win_and_a_plain_string_is_a_summary() -> None:
    """A str result is the summary text; compact(details=...) overrides the summariser's details."""
    session = conversation()
    entry_id = session.compact(lambda messages, previous: "short", 100, details={"why": "manual"}, from_hook=True)
    entry = session.get_entry(entry_id)
    assert (entry.summary, entry.details, entry.usage, entry.from_hook) == ("short", {"why": "manual"}, None, True)


def test_nothing_to_summarise_writes_nothing_and_calls_nothing() -> None:
    """When the budget keeps everything, compact returns None without calling the summariser."""
    session = conversation(turns=2)
    fake = FakeSummarizer()
    before = state(session)
    assert session.compact(fake, keep_recent_tokens=1_000_000) is None
    assert fake.calls == [] and state(session) == before


def test_retain_tail_stores_a_copy_of_the_kept_messages() -> None:
    """With retain_tail the entry keeps no entry id but a tail equal to the kept messages."""
    session = conversation()
    plan = session.plan_compaction(100, retain_tail=True)
    entry = session.get_entry(session.compact(FakeSummarizer(), 100, retain_tail=True))
    assert entry.first_kept_entry_id is None
    assert list(entry.retained_tail) == list(plan.kept_messages)
    assert session.build_context().messages[1:] == list(plan.kept_messages)
    assert [e.id for e in session.get_path_to_root_or_compaction()] == [entry.id]


def test_a_second_compaction_gets_the_first_summary_and_the_previously_kept_turns() -> None:
    """Repeated compactions summarise from the previous kept boundary, passing the summary along."""
    session = conversation()
    fake = FakeSummarizer()
    first = session.compact(fake, keep_recent_tokens=100)
    kept_before = session.build_context().messages[1:]
    for n in range(6, 9):
        turn(session, n)
    session.compact(fake, keep_recent_tokens=100)
    (messages, previous) = fake.calls[1]
    assert previous == session.get_entry(first).summary
    assert messages[: len(kept_before)] == kept_before


# -- failure leaves the session untouched ------------------------------------------------------


def test_a_failing_summariser_writes_nothing() -> None:
    """An exception from the summariser propagates and no entry (partial or whole) is written."""
    storage = new_storage()
    session = open_session(storage)
    for n in range(4):
        turn(session, n)
    before = state(session)

    def broken(messages: list[Any], previous: str | None) -> str:
        raise RuntimeError("model unavailable")

    with pytest.raises(RuntimeError, match="model unavailable"):
        session.compact(broken, keep_recent_tokens=10)
    assert state(session) == before
    assert state(Session(storage)) == before


def test_a_summariser_returning_the_wrong_type_writes_nothing() -> None:
    """A result that is neither a str nor a Summary is a TypeError and nothing is written."""
    session = conversation()
    before = state(session)
    with pytest.raises(TypeError):
        session.compact(lambda messages, previous: {"summary": "dict"}, 10)
    assert state(session) == before


def test_an_async_summariser_given_to_compact_is_refused_cleanly() -> None:
    """compact refuses a coroutine result (use acompact), closes it, and writes nothing."""
    session = conversation()
    before = state(session)

    async def summarise(messages: list[Any], previous: str | None) -> str:
        return "never"

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match="acompact"):
            session.compact(summarise, 10)
        gc.collect()
    assert state(session) == before


def test_acompact_awaits_an_async_summariser() -> None:
    """acompact with an async summariser appends the same entry compact would."""
    session = conversation()
    plan = session.plan_compaction(100)

    async def summarise(messages: list[Any], previous: str | None) -> Summary:
        await asyncio.sleep(0)
        return Summary(summary=f"{len(messages)} summarised")

    entry_id = asyncio.run(session.acompact(summarise, keep_recent_tokens=100))
    entry = session.get_entry(entry_id)
    assert entry.summary == f"{len(plan.messages_to_summarize)} summarised"
    assert entry.first_kept_entry_id == plan.first_kept_entry_id


def test_acompact_with_a_failing_summariser_writes_nothing() -> None:
    """An async summariser that raises leaves the session untouched."""
    session = conversation()
    before = state(session)

    async def summarise(messages: list[Any], previous: str | None) -> str:
        raise TimeoutError("slow model")

    with pytest.raises(TimeoutError):
        asyncio.run(session.acompact(summarise, 10))
    assert state(session) == before


def test_a_session_changed_while_summarising_is_a_conflict() -> None:
    """If the session moves on during the await, acompact writes nothing and says conflict."""
    session = conversation()

    async def summarise(messages: list[Any], previous: str | None) -> str:
        session.append_message(user("typed meanwhile"))
        return "stale"

    with pytest.raises(SessionError) as caught:
        asyncio.run(session.acompact(summarise, 10))
    assert caught.value.code == "conflict"
    assert session.find_entries("compaction") == []


# -- when to compact ----------------------------------------------------------------------


def test_should_compact_compares_the_reported_usage_with_the_window_minus_reserve() -> None:
    """Reported usage of 90k tokens needs compacting in a 100k window with a 16k reserve, not a 5k one."""
    session = open_session()
    turn(session, 0, reported=90_000)
    assert session.estimate_context_tokens().usage_tokens == 90_000
    assert session.should_compact(100_000)
    assert not session.should_compact(100_000, reserve_tokens=5_000)
    with pytest.raises(ValueError):
        session.should_compact(10_000, reserve_tokens=10_000)


def test_usage_from_before_a_compaction_no_longer_sizes_the_context() -> None:
    """After compacting, kept replies' old usage is ignored until a new reply reports usage."""
    session = open_session()
    for n in range(4):
        turn(session, n, reported=50_000)
    assert session.compact(FakeSummarizer(), keep_recent_tokens=40) is not None
    size = session.estimate_context_tokens()
    assert size.usage_tokens is None and size.tokens < 1_000
    turn(session, 9, reported=1_234)
    assert session.estimate_context_tokens().usage_tokens == 1_234


def test_a_time_travel_view_can_be_planned_but_not_compacted() -> None:
    """A view of an earlier version plans a compaction of that version's context (read-only)."""
    session = conversation()
    view = session.at(6)
    plan = view.plan_compaction(0)
    assert list(plan.messages_to_summarize + plan.kept_messages) == view.build_context().messages
    assert not hasattr(view, "compact")


def test_the_summarisation_usage_counts_in_the_session_stats() -> None:
    """The usage a summariser reports is recorded on the entry and added to the session's tokens."""
    session = conversation()
    before = session.get_session_stats().total_tokens
    session.compact(FakeSummarizer(usage=Usage(input=300, output=20, total_tokens=320)), 100)
    assert session.get_session_stats().total_tokens == before + 320


# -- reopening ----------------------------------------------------------------------------------


@pytest.mark.parametrize("retain_tail", [False, True])
def test_compaction_then_reopen_from_a_jsonl_file_gives_the_same_context(tmp_path: Path, retain_tail: bool) -> None:
    """A compacted session read back from its file builds the same context and plans alike."""
    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path, cwd="/p"))
    for n in range(5):
        turn(session, n, tools=1)
    session.compact(FakeSummarizer(), keep_recent_tokens=120, retain_tail=retain_tail)
    turn(session, 7, reported=321)
    expected = session.build_context()
    session.close()
    reopened = Session(JsonlSessionStorage.open(path))
    assert reopened.build_context() == expected
    assert reopened.estimate_context_tokens().usage_tokens == 321
    assert reopened.plan_compaction(50) == Session(JsonlSessionStorage.open(path)).plan_compaction(50)


turn_shapes = st.lists(st.tuples(st.integers(0, 2), st.integers(1, 200)), min_size=1, max_size=5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rounds=st.lists(st.tuples(turn_shapes, st.integers(0, 400), st.booleans()), min_size=1, max_size=4),
)
def test_repeated_compactions_fit_the_budget_and_survive_a_reopen(rounds: Any) -> None:
    """After every compaction: context = summary + kept, it fits the budget, no orphan, reopen agrees."""
    storage = new_storage()
    session = open_session(storage)
    fake = FakeSummarizer()
    count = 0
    for shape, keep, retain in rounds:
        for tools, size in shape:
            turn(session, count, tools=tools, size=size)
            count += 1
        plan = session.plan_compaction(keep, retain_tail=retain)
        entry_id = session.compact(fake, keep_recent_tokens=keep, retain_tail=retain)
        if plan.is_empty:
            assert entry_id is None
            continue
        messages = session.build_context().messages
        assert messages[1:] == list(plan.kept_messages)
        assert fake.calls[-1][1] == plan.previous_summary
        if plan.fits:
            assert sum(estimate(m) for m in messages[1:]) <= keep
        calls = {b.id for m in messages if m.role == "assistant" for b in m.content if isinstance(b, ToolCall)}
        assert all(m.tool_call_id in calls for m in messages if m.role == "tool_result")
        assert Session(storage).build_context() == session.build_context()


# -- branch summaries -----------------------------------------------------------------------------


def branched() -> tuple[Session, dict[str, str]]:
    """u0 a0 u1 a1 | back to a0 | u2 a2 (the current leaf): two branches under a0."""
    session = open_session()
    ids: dict[str, str] = {}
    ids["u0"] = turn(session, 0)
    ids["a0"] = session.leaf_id  # type: ignore[assignment]
    ids["u1"] = turn(session, 1, tools=1)
    ids["a1"] = session.leaf_id  # type: ignore[assignment]
    session.move_to(ids["a0"])
    ids["u2"] = turn(session, 2)
    ids["a2"] = session.leaf_id  # type: ignore[assignment]
    return session, ids


def test_moving_away_summarises_the_branch_between_the_common_ancestor_and_the_old_leaf() -> None:
    """Moving from a2 to a1 summarises u2..a2 (after the common ancestor a0) and records it."""
    session, ids = branched()
    fake = FakeSummarizer(usage=Usage(input=10, output=2, total_tokens=12))
    summary_id = session.move_to(ids["a1"], summarize=fake)
    (messages, previous), = fake.calls
    assert [m.content[0].text[:2] for m in messages] == ["u2", "a2"] and previous is None
    entry = session.get_entry(summary_id)
    assert (entry.type, entry.parent_id, entry.from_id) == ("branch_summary", ids["a1"], ids["a1"])
    assert entry.summary == "S1: 2 messages" and entry.usage.total_tokens == 12
    assert session.leaf_id == summary_id
    assert left_leaf_id(session, summary_id) == ids["a2"]
    assert session.build_context().messages[-1].summary == "S1: 2 messages"


def test_moving_back_along_the_same_branch_summarises_what_is_left_behind() -> None:
    """Moving from a2 back to u0 leaves a0..a2 behind: those are summarised."""
    session, ids = branched()
    fake = FakeSummarizer()
    session.move_to(ids["u0"], summarize=fake)
    assert [m.content[0].text[:2] for m in fake.calls[0][0]] == ["a0", "u2", "a2"]


def test_moving_forward_or_nowhere_calls_no_summariser() -> None:
    """With nothing left behind (target below the leaf, or the leaf itself) it is a plain move."""
    session, ids = branched()
    session.move_to(ids["u2"])
    fake = FakeSummarizer()
    assert session.move_to(ids["a2"], summarize=fake) is None
    assert session.move_to(ids["a2"], summarize=fake) is None
    assert fake.calls == [] and session.leaf_id == ids["a2"]
    assert session.find_entries("branch_summary") == []


def test_a_failing_branch_summariser_does_not_even_move_the_leaf() -> None:
    """If summarising the branch fails, neither the leaf move nor the summary is written."""
    session, ids = branched()
    before = state(session)

    def broken(messages: list[Any], previous: str | None) -> str:
        raise ConnectionError("offline")

    with pytest.raises(ConnectionError):
        session.move_to(ids["a1"], summarize=broken)
    assert state(session) == before


def test_summary_and_summarize_are_mutually_exclusive_and_targets_must_exist() -> None:
    """Both arguments at once is a TypeError; an unknown target is not_found before any call."""
    session, ids = branched()
    fake = FakeSummarizer()
    with pytest.raises(TypeError):
        session.move_to(ids["a1"], {"summary": "x"}, summarize=fake)
    with pytest.raises(SessionError) as caught:
        session.move_to("deadbeef", summarize=fake)
    assert caught.value.code == "not_found" and fake.calls == []


def test_amove_to_awaits_an_async_branch_summariser() -> None:
    """amove_to summarises the branch left behind with an async summariser."""
    session, ids = branched()

    async def summarise(messages: list[Any], previous: str | None) -> str:
        return f"left {len(messages)}"

    summary_id = asyncio.run(session.amove_to(ids["a1"], summarise))
    assert session.get_entry(summary_id).summary == "left 2"


# -- the command-line hook --------------------------------------------------------------------------


def test_the_compact_command_reports_a_dry_run_and_then_compacts() -> None:
    """The CLI entry point plans without writing on a dry run, then compacts with the stand-in."""
    session = conversation()
    before = state(session)
    report = compact_report(session, keep_recent_tokens=100, dry_run=True)
    assert state(session) == before
    assert report["compacted"] is False and report["tokens_after"] is None
    done = compact_report(session, keep_recent_tokens=100)
    assert done["compacted"] and done["tokens_after"] < done["tokens_before"]
    entry = session.get_entry(done["entry_id"])
    assert "u0" in entry.summary and entry.details["modified_files"] == ["src/f1.py"]


def test_the_extractive_summary_lists_requests_and_files_and_keeps_the_previous_one() -> None:
    """The stand-in summariser copies user requests, file paths, and the previous summary."""
    messages = [
        user("fix the parser\nplease"),
        assistant(tool_calls=[ToolCall(id="1", name="read", arguments={"path": "p.py"})]),
        assistant(tool_calls=[ToolCall(id="2", name="write", arguments={"file_path": "q.py"})]),
    ]
    result = extractive_summary(messages, "before")
    assert result.summary.splitlines()[:2] == ["Earlier summary:", "before"]
    assert "- fix the parser" in result.summary
    assert result.details == {"read_files": ["p.py"], "modified_files": ["q.py"]}


def test_the_extractive_summary_stays_small_for_long_histories() -> None:
    """Thousands of requests and a long previous summary still give a bounded summary."""
    messages = [user(f"request {n} " + "x" * 300) for n in range(3000)]
    result = extractive_summary(messages, "p" * 50_000)
    assert len(result.summary) < 15_000
    assert "- request 0 " in result.summary and "- request 2999 " in result.summary
    assert "... 2960 more ..." in result.summary

def test_the_worked_example_in_the_compaction_guide_runs() -> None:
    """Every python block of docs/compaction.md runs, in order, in one namespace."""
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "compaction.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 5
    namespace: dict[str, Any] = {}
    for index, block in enumerate(blocks):
        exec(compile(block, f"docs/compaction.md block {index + 1}", "exec"), namespace)
