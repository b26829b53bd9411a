"""Code ported from the seed (AgentCore.jl's session manager, ../shared/seed/) runs unchanged: its names, its call
shapes, and its "Complete Session Example" line by line (docs/porting.md)."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sessiontree
from sessiontree import (
    ActiveToolsChangeEntry,
    AssistantMessage,
    BranchSummaryEntry,
    BranchSummaryMessage,
    CompactionEntry,
    CompactionSummaryMessage,
    Cost,
    CustomEntry,
    CustomMessageEntry,
    ImageContent,
    InMemorySessionStorage,
    JsonlSessionStorage,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    Session,
    SessionContextBuildOptions,
    SessionError,
    SessionHeader,
    SessionInfoEntry,
    SessionTreeEntry,
    TextContent,
    ThinkingContent,
    ThinkingLevelChangeEntry,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    append_compaction,
    append_message,
    append_model_change,
    append_thinking_level_change,
    build_context,
    build_session_context,
    get_session_stats,
    move_to,
)


def test_the_complete_session_example_ported_line_by_line(tmp_path):
    """The seed's "Complete Session Example", each call in the seed's shape (free functions, positional arguments)."""
    timestamp = 1_700_000_000_000
    usage = Usage(input=900, output=100, total_tokens=1000, cost=Cost(total=0.01))

    # 1. Create storage (the seed builds its header by hand; here the storage writes it)
    storage = JsonlSessionStorage.create(tmp_path / "session.jsonl", cwd="/path")
    # 2. Create session
    session = Session(storage, SessionContextBuildOptions(None, None))
    # 3. Add messages
    msg1_id = append_message(session, UserMessage([TextContent("Hello")], timestamp=timestamp))
    msg2_id = append_message(session, AssistantMessage([TextContent("Hi!")], provider="anthropic", model="claude", usage=usage))
    # 4. Change thinking level
    tl_id = append_thinking_level_change(session, "medium")
    # 5. Change model
    mc_id = append_model_change(session, "openai", "gpt-4")
    # 6. Add more messages
    msg3 = UserMessage([TextContent("What can you do?")], timestamp=timestamp)
    msg4 = AssistantMessage([TextContent("I can...")], provider="openai", model="gpt-4", usage=usage)
    msg3_id = append_message(session, msg3)
    msg4_id = append_message(session, msg4)
    # 7. Compact context (100K tokens -> 20K)
    compact_id = append_compaction(
        session, "User asked about capabilities and assistant explained", msg2_id, 100000, {"summary_length": 50}, False,
        usage, [msg3, msg4],
    )
    # 8. Fork and branch
    session.move_to(msg2_id)
    # 9. Continue on new branch (move_to creates a branch summary when a summary is given)
    branch_id = move_to(session, msg2_id, {"summary": "User changed direction", "details": {"focus": "files"}})
    # 10. Continue on new branch
    msg5_id = append_message(session, UserMessage([TextContent("Let's work with files")], timestamp=timestamp))
    # 11. Query session context
    context = build_context(session)
    # 12. Get stats
    stats = get_session_stats(session)

    assert [type(m).__name__ for m in context.messages] == [
        "UserMessage", "AssistantMessage", "BranchSummaryMessage", "UserMessage"]
    assert context.messages[2].summary == "User changed direction" and context.messages[2].from_id == msg2_id
    assert context.thinking_level == "off" and context.model == {"provider": "anthropic", "model_id": "claude"}
    assert stats.message_count == 5 and stats.total_tokens == 3000 and stats.cost_total == pytest.approx(0.03)
    assert session.leaf_id == msg5_id
    assert [e.id for e in session.get_branch()] == [msg1_id, msg2_id, branch_id, msg5_id]

    # the abandoned branch is still there, compacted as the seed's example says
    old = session.build_context(leaf_id=compact_id)
    assert isinstance(old.messages[0], CompactionSummaryMessage) and old.messages[1:] == [msg3, msg4]
    assert old.thinking_level == "medium" and old.model == {"provider": "openai", "model_id": "gpt-4"}
    assert {tl_id, mc_id, msg3_id, msg4_id} <= {e.id for e in session.get_entries()}

    # and all of it survives a reopen, as a file the seed's readers would dispatch on
    session.close()
    again = sessiontree.open_session(tmp_path / "session.jsonl")
    assert again.build_context() == context and again.leaf_id == msg5_id
    assert isinstance(again.get_entry(compact_id), CompactionEntry)


def test_options_none_none_is_the_default_positionally_and_by_keyword():
    """``SessionContextBuildOptions(nothing, nothing)`` is the seed's default: None means none of either."""
    assert SessionContextBuildOptions(None, None) == SessionContextBuildOptions()
    assert SessionContextBuildOptions(entry_transforms=None, entry_projectors=None) == SessionContextBuildOptions()
    reverse = list.__reversed__
    positional = SessionContextBuildOptions([lambda es: list(reverse(es))], None)
    assert len(positional.entry_transforms) == 1 and positional.entry_projectors == {}
    projector = SessionContextBuildOptions(None, {"note": lambda e, i, es: []})
    assert projector.entry_transforms == () and list(projector.entry_projectors) == ["note"]
    with pytest.raises(TypeError, match="not callable"):
        SessionContextBuildOptions([1], None)


def test_session_takes_the_seeds_keyword_for_its_options():
    """``Session(storage, context_build_options=...)`` is ``Session(storage, options)``; the property reads it back."""
    def note(entry, index, entries):
        return [UserMessage(f"note {entry.data['n']}")]

    options = SessionContextBuildOptions(None, {"note": note})
    session = Session(InMemorySessionStorage.create(), context_build_options=options)
    session.append_custom_entry("note", {"n": 1})
    assert session.build_context().messages == [UserMessage("note 1")]
    assert session.context_build_options is session.options
    with pytest.raises(TypeError, match="not both"):
        Session(InMemorySessionStorage.create(), options, context_build_options=options)


def _three(session):
    a = session.append_message(UserMessage("a"))
    b = session.append_message(AssistantMessage([TextContent("b")]))
    c = session.append_message(UserMessage("c"))
    return a, b, c


def test_a_null_leaf_is_before_the_first_entry_and_only_an_omitted_one_is_the_current_leaf():
    """The seed walks from a root's ``parent_id`` (nothing): an empty path, not the current branch (SPEC 2.2)."""
    session = Session(InMemorySessionStorage.create())
    a, b, c = _three(session)
    root = session.get_entry(a)
    assert root.parent_id is None
    assert session.get_path_to_root_or_compaction(root.parent_id) == []
    assert session.get_branch(None) == [] and session.get_branch(leaf_id=None) == []
    assert session.build_context(leaf_id=None).messages == []
    assert [e.id for e in session.get_branch()] == [a, b, c]
    assert [e.id for e in session.get_path_to_root_or_compaction()] == [a, b, c]
    assert [e.id for e in session.get_branch(b)] == [a, b]
    assert [m.content for m in session.build_context().messages if isinstance(m, UserMessage)] == ["a", "c"]
    view = session.at(session.version - 1)  # time travel answers the same way
    assert view.get_branch(None) == [] and [e.id for e in view.get_branch()] == [a, b]


def test_get_entry_and_get_label_answer_none_for_a_missing_id_and_entry_raises():
    session = Session(InMemorySessionStorage.create())
    a, _, _ = _three(session)
    assert session.get_entry("missing") is None and session.get_label("missing") is None
    assert session.get_entry(a).message == UserMessage("a")
    with pytest.raises(SessionError) as caught:
        session.entry("missing")
    assert caught.value.code == "not_found"
    with pytest.raises(TypeError):
        session.get_entry(7)


def test_the_seeds_entry_type_names_dispatch_with_isinstance():
    """Every entry a session gives back is an instance of the seed's type of the same kind, and of SessionTreeEntry."""
    session = Session(InMemorySessionStorage.create())
    a = session.append_message(UserMessage("hi"))
    session.append_thinking_level_change("high")
    session.append_model_change("openai", "gpt-4")
    session.append_active_tools_change(["bash"])
    session.append_compaction("summary", a, 10)
    session.append_custom_entry("app", {"k": 1})
    session.append_custom_message_entry("app", "shown")
    session.append_label_change(a, "start")
    session.append_session_info("named")
    session.move_to(a, {"summary": "left"})
    expected = {
        "message": MessageEntry, "thinking_level_change": ThinkingLevelChangeEntry, "model_change": ModelChangeEntry,
        "active_tools_change": ActiveToolsChangeEntry, "compaction": CompactionEntry, "custom": CustomEntry,
        "custom_message": CustomMessageEntry, "label": LabelEntry, "session_info": SessionInfoEntry, "leaf": LeafEntry,
        "branch_summary": BranchSummaryEntry,
    }
    entries = session.get_entries()
    assert {e.type for e in entries} == set(expected)
    for entry in entries:
        assert isinstance(entry, SessionTreeEntry) and isinstance(entry, expected[entry.type])
        assert [t for t in expected.values() if isinstance(entry, t)] == [expected[entry.type]]
    assert isinstance(session.header, SessionHeader) and not isinstance(session.header, SessionTreeEntry)


def test_content_and_messages_take_their_main_field_positionally_and_the_rest_by_keyword():
    assert TextContent("Hello") == TextContent(text="Hello")
    assert ImageContent("aGk=", "image/png") == ImageContent(data="aGk=", mime_type="image/png")
    assert ThinkingContent("hmm") == ThinkingContent(thinking="hmm")
    assert UserMessage("hi") == UserMessage(content="hi")
    assert AssistantMessage([TextContent("x")]).content == (TextContent("x"),)
    result = ToolResultMessage([TextContent("ok")], tool_call_id="t1", tool_name="bash")
    assert result == ToolResultMessage(content=[TextContent("ok")], tool_call_id="t1", tool_name="bash")
    assert sessiontree.CustomMessage("x", custom_type="app").content == "x"
    # everything else stays keyword-only, so a positional slip cannot land in the wrong field
    for bad in (lambda: ThinkingContent("hmm", "sig"), lambda: UserMessage("hi", 5),
                lambda: AssistantMessage([], "openai"), lambda: ToolCall("id", "name"), lambda: Usage(1, 2)):
        with pytest.raises(TypeError):
            bad()
    for cls in (TextContent, ImageContent, ThinkingContent, UserMessage, AssistantMessage, ToolResultMessage):
        positional = [f.name for f in attrs.fields(cls) if not f.kw_only]
        assert positional in (["text"], ["data", "mime_type"], ["thinking"], ["content"]), (cls, positional)


def test_the_seeds_free_functions_are_the_context_rules():
    """``build_session_context`` and the functions it is made of, as the seed names them, over a branch's entries."""
    session = Session(InMemorySessionStorage.create())
    a, b, c = _three(session)
    session.append_thinking_level_change("high")
    comp = session.append_compaction("earlier", b, 500)
    session.append_custom_entry("note", {"n": 1})
    d = session.append_message(UserMessage("d"))
    path = session.get_branch()
    entries = sessiontree.default_context_entry_transform(path)
    assert [e.id for e in entries] == [comp, b, c, path[3].id, path[5].id, d]  # compaction, kept b to it, then the rest
    seen = []

    def note(entry, index, es):
        seen.append((entry.type, index, len(es)))
        return [UserMessage(f"note {entry.data['n']}")]

    options = SessionContextBuildOptions(None, {"note": note})
    assert sessiontree.build_context_entries(path, None) == entries
    built = build_session_context(path, options)
    assert built == session.build_context(options)
    assert sessiontree.derive_session_context_state(path) == {
        "thinking_level": "high", "model": {"provider": "", "model_id": ""}, "active_tool_names": None}
    messages = [m for i, e in enumerate(entries) for m in sessiontree.session_entry_to_context_messages(e, i, entries, options)]
    assert messages == list(built.messages)
    assert seen[-1] == ("custom", 4, 6)  # indexes are 0-based
    merged = sessiontree.merge_context_build_options(session, options)
    assert merged == session.options.merged(options) and sessiontree.merge_context_build_options(None, None) == \
        SessionContextBuildOptions()
    with pytest.raises(TypeError):
        sessiontree.merge_context_build_options("fast", None)
    summary = sessiontree.create_compaction_summary_message("s", 10, "2026-01-01T00:00:00.000Z")
    assert summary == CompactionSummaryMessage(summary="s", tokens_before=10, timestamp=1767225600000)
    assert sessiontree.create_branch_summary_message("s", a, 5) == BranchSummaryMessage(summary="s", from_id=a, timestamp=5)
    custom = sessiontree.create_custom_message("app", "hello", False, {"k": 1}, 7)
    assert (custom.custom_type, custom.content, custom.display, custom.details, custom.timestamp) == (
        "app", "hello", False, {"k": 1}, 7)
    assert sessiontree.create_timestamp().endswith("Z")


def test_get_entries_to_fork_follows_the_seeds_options():
    session = Session(InMemorySessionStorage.create())
    a, b, c = _three(session)
    session.move_to(b)
    ids = lambda entries: [e.id for e in entries]  # noqa: E731
    assert ids(sessiontree.get_entries_to_fork(session)) == ids(session.get_entries())  # the seed's "full copy"
    assert ids(sessiontree.get_entries_to_fork(session, {"entryId": c})) == [a, b]  # before a user message
    assert ids(sessiontree.get_entries_to_fork(session, {"entryId": b, "position": "at"})) == [a, b]
    assert ids(sessiontree.get_entries_to_fork(session, {"entry_id": a})) == []
    compacted = session.append_compaction("s", b, 10)
    d = session.append_message(UserMessage("d"))
    assert ids(sessiontree.get_entries_to_fork(session, {"entryId": d, "position": "at"})) == [b, compacted, d]
    with pytest.raises(SessionError) as caught:
        sessiontree.get_entries_to_fork(session, {"entryId": b})
    assert caught.value.code == "invalid_fork_target"


@given(st.lists(st.sampled_from(["user", "assistant", "label", "move"]), max_size=12))
def test_each_session_function_is_its_method(ops):
    """The free functions answer what the methods answer, whatever the session holds."""
    session = Session(InMemorySessionStorage.create())
    for op in ops:
        if op == "user":
            sessiontree.append_message(session, UserMessage("u"))
        elif op == "assistant":
            sessiontree.append_message(session, AssistantMessage([TextContent("a")]))
        elif op == "label" and session.leaf_id:
            sessiontree.append_label_change(session, session.leaf_id, "l")
        elif op == "move" and session.leaf_id:
            sessiontree.move_to(session, session.get_entry(session.leaf_id).parent_id)
    leaf = sessiontree.get_leaf_id(session)
    assert leaf == session.leaf_id
    assert sessiontree.get_branch(session) == session.get_branch()
    assert sessiontree.get_path_to_root_or_compaction(session, None) == []
    assert sessiontree.get_entries(session) == session.get_entries()
    assert sessiontree.find_entries(session, "message") == session.find_entries("message")
    assert sessiontree.get_children(session, None) == session.get_children(None)
    assert sessiontree.get_session_name(session) == session.get_session_name()
    if leaf is not None:
        assert sessiontree.get_entry(session, leaf) is session.get_entry(leaf)
        assert sessiontree.get_label(session, leaf) == session.get_label(leaf)


def test_every_seed_function_is_exported_and_takes_the_session_first():
    """The seed's names live in ``sessiontree.seed`` and stay reachable as ``sessiontree.NAME`` for ported code; only its
    entry classes are part of the main surface (``sessiontree.__all__``)."""
    for name in sessiontree.seed.__all__:
        assert getattr(sessiontree, name) is getattr(sessiontree.seed, name), name
        assert (name in sessiontree.__all__) == (name[0].isupper() or name == "open_session"), name
    for name in ("append_message", "move_to", "build_context", "get_branch"):
        assert next(iter(inspect.signature(getattr(sessiontree, name)).parameters)) == "session"


# -- seed fidelity, round three (issue 37): what changed, and what docs/porting.md now lists --------------------------


def test_session_context_is_built_positionally_as_the_seed_does():
    """``SessionContext(messages, thinking_level, model, active_tool_names)``, as the seed's buildSessionContext
    writes it, equals the keyword form and what a session builds."""
    from sessiontree import SessionContext

    session = Session(InMemorySessionStorage.create())
    session.append_thinking_level_change("high")
    session.append_message(UserMessage("hi"))
    built = session.build_context()
    positional = SessionContext(list(built.messages), "high", None, None)
    assert positional == built == SessionContext(messages=list(built.messages), thinking_level="high")


def test_append_branch_summary_is_move_to_with_a_summary():
    """``append_branch_summary(session, from_id, summary, details, from_hook)`` (the seed's earlier draft, pi's
    branchWithSummary) appends the summary under ``from_id`` as the leaf, recording the move, as ``move_to`` does."""
    moment = datetime(2026, 1, 1, tzinfo=UTC)  # one clock for both: a summary's message carries its entry's time
    twins = [Session(InMemorySessionStorage.create(), id_generator=iter(f"e{n}" for n in range(99)).__next__,
                     clock=lambda: moment) for _ in range(2)]
    for session in twins:
        first = append_message(session, UserMessage("first"))
        append_message(session, UserMessage("second"))
    by_name = sessiontree.append_branch_summary(twins[0], first, "left it", {"why": "retry"}, True)
    by_move = move_to(twins[1], first, {"summary": "left it", "details": {"why": "retry"}, "from_hook": True})
    assert by_name == by_move == twins[0].leaf_id
    assert [e.type for e in twins[0].get_entries()] == [e.type for e in twins[1].get_entries()]
    entry = twins[0].get_entry(by_name)
    assert isinstance(entry, BranchSummaryEntry) and (entry.parent_id, entry.from_id) == (first, first)
    assert (entry.summary, entry.details, entry.from_hook) == ("left it", {"why": "retry"}, True)
    assert build_context(twins[0]) == build_context(twins[1])
    with pytest.raises(SessionError) as caught:
        twins[0].append_branch_summary("missing", "x")
    assert caught.value.code == "not_found"
