"""The LLM context of a branch: one test per SPEC 3 context rule."""

from __future__ import annotations

import pytest
import sessiontree_testkit as kit

from sessiontree import (
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    SessionContextBuildOptions,
    TextContent,
    UserMessage,
)
from sessiontree.domain.events import ContextCompacted, MessageAppended
from sessiontree.projections.context import build_session_context

said = kit.said


def conversation(session, *texts):
    """Append alternating user/assistant messages; returns their ids."""
    ids = []
    for i, text in enumerate(texts):
        ids.append(session.append_message(kit.user(text) if i % 2 == 0 else kit.assistant(text)))
    return ids


def both(session, options=None):
    """The session's context, checked equal to a from-scratch build over its branch."""
    context = session.build_context(options)
    merged = session.options.merged(options)
    assert build_session_context(session.get_branch(), merged) == context
    return context


# -- settings --------------------------------------------------------------------------------


def test_defaults_on_an_empty_session():
    """No entries: no messages, thinking ``off``, no model, no active tools."""
    context = kit.open_session().build_context()
    assert (context.messages, context.thinking_level, context.model, context.active_tool_names) == (
        [], "off", None, None,
    )


def test_latest_thinking_level_on_the_branch_wins():
    """The thinking level is the latest change on the branch, not on another branch."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    s.append_thinking_level_change("low")
    s.append_thinking_level_change("high")
    assert both(s).thinking_level == "high"
    s.move_to(a)
    assert both(s).thinking_level == "off"


def test_model_change_after_an_assistant_message_wins():
    """A model change later than the last assistant reply sets the model."""
    s = kit.open_session()
    conversation(s, "q", "a")
    s.append_model_change("openai", "gpt-5")
    assert both(s).model == {"provider": "openai", "model_id": "gpt-5"}


def test_assistant_message_after_a_model_change_wins():
    """An assistant reply later than the last model change sets the model from its fields."""
    s = kit.open_session()
    s.append_model_change("openai", "gpt-5")
    s.append_message(kit.assistant("hi", provider="anthropic", model="claude-opus"))
    assert both(s).model == {"provider": "anthropic", "model_id": "claude-opus"}


def test_active_tools_are_the_latest_change():
    """Active tools come from the latest ``active_tools_change`` (None if there is none)."""
    s = kit.open_session()
    s.append_active_tools_change(["read"])
    s.append_active_tools_change(["read", "bash"])
    assert both(s).active_tool_names == ["read", "bash"]


def test_settings_come_from_the_whole_branch_even_behind_a_compaction():
    """Settings before the latest compaction still apply; only the messages are cut."""
    s = kit.open_session()
    s.append_thinking_level_change("medium")
    s.append_active_tools_change(["bash"])
    conversation(s, "q", "a")
    s.append_compaction("sum", None, 10)
    context = both(s)
    assert (context.thinking_level, context.active_tool_names) == ("medium", ["bash"])
    assert context.model == {"provider": "anthropic", "model_id": "claude-sonnet"}


# -- messages ---------------------------------------------------------------------------------


def test_without_compaction_every_message_in_branch_order():
    """With no compaction the context is every message on the branch, root first."""
    s = kit.open_session()
    conversation(s, "q1", "a1", "q2")
    assert said(both(s).messages) == ["user:q1", "assistant:a1", "user:q2"]


def test_only_the_current_branch_is_in_the_context():
    """Entries on other branches are not in the context."""
    s = kit.open_session()
    q1, _ = conversation(s, "q1", "a1")
    s.move_to(q1)
    s.append_message(kit.assistant("other"))
    assert said(both(s).messages) == ["user:q1", "assistant:other"]


def test_latest_compaction_wins():
    """With two compactions on the branch only the latest one's summary is in the context."""
    s = kit.open_session()
    conversation(s, "q1", "a1")
    s.append_compaction("first", None, 10)
    conversation(s, "q2", "a2")
    s.append_compaction("second", None, 20)
    s.append_message(kit.user("q3"))
    assert said(both(s).messages) == ["compaction_summary:second", "user:q3"]


def test_retained_tail_replaces_the_entries_before_the_compaction():
    """With ``retained_tail`` the context is the summary, the tail, then the later entries."""
    s = kit.open_session()
    q1, _a1, _q2 = conversation(s, "q1", "a1", "q2")
    s.append_compaction("sum", q1, 100, retained_tail=[kit.user("kept q2")])
    s.append_message(kit.assistant("a2"))
    assert said(both(s).messages) == ["compaction_summary:sum", "user:kept q2", "assistant:a2"]


def test_first_kept_entry_id_keeps_the_branch_from_there():
    """Without a tail the context keeps the entries from ``first_kept_entry_id`` (inclusive)."""
    s = kit.open_session()
    _q1, _a1, q2, _a2 = conversation(s, "q1", "a1", "q2", "a2")
    s.append_compaction("sum", q2, 100)
    s.append_message(kit.user("q3"))
    assert said(both(s).messages) == ["compaction_summary:sum", "user:q2", "assistant:a2", "user:q3"]


def test_null_first_kept_without_tail_keeps_nothing_before():
    """A compaction with neither a kept id nor a tail keeps nothing from before it."""
    s = kit.open_session()
    conversation(s, "q1", "a1")
    s.append_compaction("sum", None, 100)
    assert said(both(s).messages) == ["compaction_summary:sum"]


def test_older_compactions_contribute_nothing():
    """An older compaction inside the kept range adds no summary of its own."""
    s = kit.open_session()
    q1, _ = conversation(s, "q1", "a1")
    s.append_compaction("old", None, 10)
    s.append_message(kit.user("q2"))
    s.append_compaction("new", q1, 20)
    assert said(both(s).messages) == ["compaction_summary:new", "user:q1", "assistant:a1", "user:q2"]


def test_first_kept_not_on_the_branch_keeps_nothing_before():
    """A ``first_kept_entry_id`` that is not on the branch (a foreign log) keeps nothing before."""
    storage = kit.new_storage()
    sid = storage.session_id

    def at(version, cls, id, parent, **fields):
        return cls(originator_id=sid, originator_version=version, timestamp=kit.T0_ISO, id=id, parent_id=parent, **fields)

    storage.save([
        at(2, MessageAppended, "a", None, message=kit.user("q1")),
        at(3, MessageAppended, "b", "a", message=kit.user("other branch")),
        at(4, MessageAppended, "c", "a", message=kit.user("q2")),
        at(5, ContextCompacted, "k", "c", summary="sum", first_kept_entry_id="b", tokens_before=1),
        at(6, MessageAppended, "d", "k", message=kit.user("q3")),
    ])
    s = kit.open_session(storage)
    assert said(both(s).messages) == ["compaction_summary:sum", "user:q3"]


def test_compaction_summary_message_carries_tokens_and_time():
    """The summary message has the compaction's summary, tokens_before and time in ms."""
    s = kit.open_session()
    s.append_compaction("sum", None, 1234)
    [summary] = both(s).messages
    entry = s.find_entries("compaction")[0]
    assert summary == CompactionSummaryMessage(summary="sum", tokens_before=1234, timestamp=int(entry.time.timestamp() * 1000))


def test_branch_summary_becomes_a_branch_summary_message():
    """A branch summary entry becomes a BranchSummaryMessage after the entry it hangs under."""
    s = kit.open_session()
    q1, _ = conversation(s, "q1", "a1")
    summary_id = s.move_to(q1, {"summary": "tried a1, dropped it"})
    entry = s.get_entry(summary_id)
    assert both(s).messages[1] == BranchSummaryMessage(
        summary="tried a1, dropped it", from_id=q1, timestamp=int(entry.time.timestamp() * 1000)
    )


def test_custom_message_becomes_a_custom_message():
    """A ``custom_message`` entry reaches the model as a CustomMessage with its fields."""
    s = kit.open_session()
    s.append_custom_message_entry("hint", [TextContent(text="use tabs")], details={"k": 1}, display=False)
    [message] = both(s).messages
    assert isinstance(message, CustomMessage)
    assert (message.role, message.custom_type, message.content, message.details, message.display) == (
        "custom", "hint", (TextContent(text="use tabs"),), {"k": 1}, False,
    )


def test_custom_entries_are_not_sent_without_a_projector():
    """A ``custom`` entry contributes nothing unless a projector is registered for its type."""
    s = kit.open_session()
    s.append_custom_entry("state", {"step": 1})
    assert both(s).messages == []


def test_projector_by_custom_type_decides_what_a_custom_entry_sends():
    """A projector for the ``custom_type`` gets (entry, index, entries) and returns messages."""
    seen = []

    def project(entry, index, entries):
        seen.append((entry.custom_type, index, [e.type for e in entries]))
        return [UserMessage(content=f"state is {entry.data['step']}")]

    s = kit.open_session()
    s.append_message(kit.user("q"))
    s.append_custom_entry("state", {"step": 2})
    s.append_custom_entry("other", {})
    options = SessionContextBuildOptions(entry_projectors={"state": project})
    assert said(s.build_context(options).messages) == ["user:q", "user:state is 2"]
    assert seen == [("state", 1, ["message", "custom", "custom"])]


def test_entry_transforms_run_in_order_after_the_compaction_transform():
    """Transforms see the compacted entry list and run in the order given."""
    calls = []

    def drop_users(entries):
        calls.append(("drop", [e.type for e in entries]))
        return [e for e in entries if not (e.type == "message" and e.message.role == "user")]

    def reverse(entries):
        calls.append(("reverse", [e.type for e in entries]))
        return list(reversed(entries))

    s = kit.open_session()
    conversation(s, "q1", "a1")
    s.append_compaction("sum", None, 1)
    conversation(s, "q2", "a2")
    context = s.build_context(SessionContextBuildOptions(entry_transforms=[drop_users, reverse]))
    assert said(context.messages) == ["assistant:a2", "compaction_summary:sum"]
    assert calls == [
        ("drop", ["compaction", "message", "message"]),
        ("reverse", ["compaction", "message"]),
    ]


def test_session_and_call_options_merge():
    """Session-level transforms run before call-level ones; call-level projectors win per type."""
    order = []

    def mark(name):
        def transform(entries):
            order.append(name)
            return entries
        return transform

    session_options = SessionContextBuildOptions(
        entry_transforms=[mark("session")],
        entry_projectors={"a": lambda e, i, es: [UserMessage(content="session a")],
                          "b": lambda e, i, es: [UserMessage(content="session b")]},
    )
    call_options = SessionContextBuildOptions(
        entry_transforms=[mark("call")],
        entry_projectors={"b": lambda e, i, es: [UserMessage(content="call b")]},
    )
    s = kit.open_session(options=session_options)
    s.append_custom_entry("a")
    s.append_custom_entry("b")
    assert said(both(s, call_options).messages) == ["user:session a", "user:call b"]
    order.clear()
    s.build_context(call_options)
    assert order == ["session", "call"]
    assert said(both(s).messages) == ["user:session a", "user:session b"]


def test_leaf_entries_are_never_in_the_context_or_path():
    """``leaf`` records are side records: not in the branch, the path or the context."""
    s = kit.open_session()
    q1, a1 = conversation(s, "q1", "a1")
    s.move_to(q1)
    s.move_to(a1)
    assert [e.type for e in s.get_entries()].count("leaf") == 2
    assert [e.id for e in s.get_branch()] == [q1, a1]
    assert [e.id for e in s.get_path_to_root_or_compaction(a1)] == [q1, a1]
    assert said(both(s).messages) == ["user:q1", "assistant:a1"]


def test_settings_entries_labels_and_names_send_no_messages():
    """Model, thinking, tools, label and session_info entries contribute no messages."""
    s = kit.open_session()
    q = s.append_message(kit.user("q"))
    s.append_model_change("openai", "gpt-5")
    s.append_thinking_level_change("low")
    s.append_active_tools_change([])
    s.append_label_change(q, "start")
    s.append_session_info("named")
    assert said(both(s).messages) == ["user:q"]


def test_context_of_another_leaf():
    """``build_context(leaf_id=...)`` gives the context of any branch without moving the leaf."""
    s = kit.open_session()
    q1, a1 = conversation(s, "q1", "a1")
    s.move_to(q1)
    s.append_message(kit.assistant("b1"))
    assert said(s.build_context(leaf_id=a1).messages) == ["user:q1", "assistant:a1"]
    assert said(s.build_context().messages) == ["user:q1", "assistant:b1"]


def test_build_session_context_is_a_pure_function_of_the_entries():
    """The pure builder works on any list of entries, e.g. a branch taken from a reader."""
    s = kit.open_session()
    conversation(s, "q1", "a1")
    branch = s.get_branch()
    assert build_session_context(branch) == build_session_context(list(branch))
    assert said(build_session_context(branch[:1]).messages) == ["user:q1"]


@pytest.mark.parametrize("bad", ["x", 5, {"entry_transforms": []}])
def test_options_of_the_wrong_type_are_refused(bad):
    """``build_context`` options must be SessionContextBuildOptions or None."""
    with pytest.raises(TypeError):
        kit.open_session().build_context(bad)


def test_options_validate_their_callables():
    """Transforms and projectors must be callables (projectors keyed by str)."""
    with pytest.raises(TypeError):
        SessionContextBuildOptions(entry_transforms=[1])
    with pytest.raises(TypeError):
        SessionContextBuildOptions(entry_projectors={"a": "not callable"})
    with pytest.raises(TypeError):
        SessionContextBuildOptions(entry_projectors={1: lambda *a: []})
