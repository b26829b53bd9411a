"""The public API of SPEC section 7, used the way an agent builder would use it."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

# The shared test kit lives in tests/support (see tests/support/sessiontree_testkit.py).
_SUPPORT = str(Path(__file__).resolve().parent / "support")
if _SUPPORT not in sys.path:
    sys.path.insert(0, _SUPPORT)

import sessiontree_testkit as kit  # noqa: E402

import sessiontree  # noqa: E402
from sessiontree import (  # noqa: E402
    AssistantMessage,
    BranchSummaryMessage,
    Cost,
    FunctionProjection,
    InMemorySessionStorage,
    Session,
    SessionContextBuildOptions,
    SessionError,
    SessionView,
    TextContent,
    Usage,
    UserMessage,
)

SPEC_7_NAMES = [
    "Session", "SessionContextBuildOptions", "SessionError",
    "InMemorySessionStorage", "JsonlSessionStorage", "InMemorySessionRepo", "JsonlSessionRepo",
    "open_repo",
    "UserMessage", "AssistantMessage", "ToolResultMessage", "TextContent", "ImageContent",
    "ThinkingContent", "ToolCall", "Usage", "Cost",
]


@pytest.mark.parametrize("name", SPEC_7_NAMES)
def test_spec_7_names_are_importable_from_sessiontree(name):
    """Every name of SPEC section 7 is exported by the ``sessiontree`` package."""
    assert name in sessiontree.__all__
    assert getattr(sessiontree, name) is not None


def test_the_main_surface_is_small_and_every_name_in_it_is_importable():
    """``sessiontree.__all__`` says where to start (issue 34): about forty names, no porting alias."""
    assert len(sessiontree.__all__) <= 50
    assert len(set(sessiontree.__all__)) == len(sessiontree.__all__)
    for name in sessiontree.__all__:
        assert getattr(sessiontree, name) is not None, name
    assert not {"append_message", "move_to", "get_branch", "build_context"} & set(sessiontree.__all__)


def test_the_complete_session_example_of_the_seed():
    """The seed's "Complete Session Example", step by step, with what each step must give."""
    storage = InMemorySessionStorage(cwd="/path", session_id="session_1", timestamp=kit.T0_ISO)
    session = Session(storage, clock=kit.fixed_clock(kit.T0), id_generator=kit.counter_ids())

    msg1_id = session.append_message(UserMessage(content=[TextContent(text="Hello")], timestamp=1))
    msg2_id = session.append_message(AssistantMessage(
        content=[TextContent(text="Hi!")], provider="anthropic", model="claude-sonnet",
        usage=Usage(input=10, output=3, total_tokens=13, cost=Cost(total=0.01)), stop_reason="stop", timestamp=2,
    ))
    tl_id = session.append_thinking_level_change("medium")
    session.append_model_change("openai", "gpt-4")
    msg3 = UserMessage(content=[TextContent(text="What can you do?")], timestamp=3)
    msg4 = AssistantMessage(
        content=[TextContent(text="I can...")], provider="openai", model="gpt-4",
        usage=Usage(input=30, output=20, total_tokens=50, cost=Cost(total=0.02)), timestamp=4,
    )
    session.append_message(msg3)
    session.append_message(msg4)
    compaction_usage = Usage(input=100, output=10, total_tokens=110, cost=Cost(total=0.05))
    compact_id = session.append_compaction(
        "User asked about capabilities and assistant explained", msg2_id, 100000,
        {"summary_length": 50}, False, compaction_usage, [msg3, msg4],
    )

    # The compacted branch: summary, retained tail; settings from the whole branch.
    context = session.build_context()
    assert kit.said(context.messages) == [
        "compaction_summary:User asked about capabilities and assistant explained",
        "user:What can you do?", "assistant:I can...",
    ]
    assert (context.thinking_level, context.model) == ("medium", {"provider": "openai", "model_id": "gpt-4"})

    assert session.move_to(msg2_id) is None
    assert session.leaf_id == msg2_id
    branch_id = session.move_to(msg2_id, {"summary": "User changed direction", "details": {"focus": "files"}})
    msg5_id = session.append_message(UserMessage(content=[TextContent(text="Let's work with files")], timestamp=5))

    summary = session.get_entry(branch_id)
    assert (summary.type, summary.parent_id, summary.from_id, summary.details) == (
        "branch_summary", msg2_id, msg2_id, {"focus": "files"},
    )
    assert [e.id for e in session.get_branch()] == [msg1_id, msg2_id, branch_id, msg5_id]
    assert [e.id for e in session.get_children(msg2_id)] == [tl_id, branch_id]

    context = session.build_context()
    assert kit.said(context.messages) == [
        "user:Hello", "assistant:Hi!", "branch_summary:User changed direction", "user:Let's work with files",
    ]
    assert isinstance(context.messages[2], BranchSummaryMessage)
    assert context.thinking_level == "off"  # the "medium" change is on the other branch
    assert context.model == {"provider": "anthropic", "model_id": "claude-sonnet"}

    stats = session.get_session_stats()
    assert stats.message_count == 5
    assert stats.entries_by_type["leaf"] == 2
    assert stats.total_tokens == 13 + 50 + 110
    assert stats.cost_total == pytest.approx(0.08)
    assert stats.branch.message_count == 3
    assert stats.branch.total_tokens == 13

    # Everything survives a reopen, the leaf included (unlike pi).
    reopened = Session(storage)
    assert reopened.leaf_id == msg5_id
    assert reopened.build_context() == session.build_context()
    assert reopened.get_entry(compact_id).retained_tail == (msg3, msg4)


# -- the leaf (SPEC 2.4) ---------------------------------------------------------------------


def test_move_to_with_summary_returns_the_summary_id_and_it_becomes_the_leaf():
    """``move_to(id, summary)`` appends a leaf entry and a branch summary; the summary is the leaf."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    s.append_message(kit.user("b"))
    summary_id = s.move_to(a, {"summary": "left b", "from_hook": True, "usage": Usage(input=1)})
    leaf_record, summary = s.get_entries()[-2:]
    assert (leaf_record.type, leaf_record.target_id) == ("leaf", a)
    assert (summary.id, summary.from_hook, summary.usage.input) == (summary_id, True, 1)
    assert s.leaf_id == summary_id


def test_the_leaf_survives_a_reopen():
    """The leaf is replayed from the log, so a reopened session continues where it was."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    s.append_message(kit.user("b"))
    s.move_to(a)
    reopened = Session(s.storage)
    assert reopened.leaf_id == a
    assert reopened.get_entry(reopened.append_message(kit.user("c"))).parent_id == a


def test_move_to_none_starts_a_new_root():
    """After ``move_to(None)`` the next entry is a root and the branch restarts."""
    s = kit.open_session()
    s.append_message(kit.user("a"))
    assert s.move_to(None) is None
    assert s.leaf_id is None and s.build_context().messages == []
    r = s.append_message(kit.user("r"))
    assert s.get_entry(r).parent_id is None


def test_two_sessions_on_one_storage_interleave_each_under_its_own_leaf():
    """A writer whose view is stale takes the other's entry in and appends after it, under its own leaf."""
    storage = kit.new_storage()
    first, second = kit.open_session(storage), kit.open_session(storage, first_tick=50)
    a = first.append_message(kit.user("a"))
    b = second.append_message(kit.user("b"))
    assert second.version == 3 and second.get_entry(a) is not None
    assert second.entry(b).parent_id is None and second.leaf_id == b and second.log_leaf_id == b
    assert Session(storage).version == 3 and Session(storage).leaf_id == b  # a fresh open: the last append's leaf


def test_if_version_conflicts_exactly_when_another_writer_moved_the_log():
    storage = kit.new_storage()
    first, second = kit.open_session(storage), kit.open_session(storage, first_tick=50)
    read = second.version
    first.append_message(kit.user("a"))
    with pytest.raises(SessionError) as caught:
        second.append_message(kit.user("b"), if_version=read)
    assert caught.value.code == "conflict" and "not 1 (if_version)" in caught.value.message
    assert Session(storage).version == 2
    assert second.refresh() == 1
    b = second.append_message(kit.user("b"), if_version=second.version)
    assert Session(storage).version == 3 and Session(storage).entry(b).parent_id is None


def test_a_failed_save_appends_nothing():
    """When the storage refuses a save, the session rolls back and can go on."""

    class Flaky(InMemorySessionStorage):
        fail = False

        def save(self, events):
            if self.fail:
                self.fail = False
                raise SessionError("storage", "disk full")
            super().save(events)

    storage = Flaky(cwd="/p", session_id="s", timestamp=kit.T0_ISO)
    s = kit.open_session(storage)
    s.build_context()
    storage.fail = True
    with pytest.raises(SessionError, match="disk full"):
        s.append_message(kit.user("lost"))
    assert (s.version, s.leaf_id, s.build_context().messages) == (1, None, [])
    a = s.append_message(kit.user("kept"))
    assert [e.id for e in Session(s.storage).get_entries()] == [a]


# -- time travel -------------------------------------------------------------------------------


def test_at_gives_a_read_only_view_of_an_earlier_version():
    """``at(v)`` sees exactly the first v events and offers no append methods."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    s.append_label_change(a, "x")
    s.append_message(kit.user("b"))
    view = s.at(3)
    assert isinstance(view, SessionView) and view.version == 3
    assert (view.leaf_id, view.get_labels(), len(view.get_entries())) == (view.get_entries()[-1].id, {a: "x"}, 2)
    assert kit.said(view.build_context().messages) == ["user:a"]
    assert not hasattr(view, "append_message") and not hasattr(view, "move_to")
    assert s.at(1).get_entries() == [] and s.at(1).leaf_id is None


def test_as_of_picks_the_entries_appended_by_then():
    """``as_of(t)`` sees the entries whose timestamps are not after t (datetime or ISO string)."""
    s = kit.open_session()
    first = s.append_message(kit.user("a"))
    s.append_message(kit.user("b"))
    moment = s.get_entry(first).time
    assert [e.id for e in s.as_of(moment).get_entries()] == [first]
    assert s.as_of(moment + timedelta(milliseconds=999)).version == 2
    assert s.as_of("2099-01-01T00:00:00.000Z").version == s.version
    assert s.as_of(kit.T0_ISO).version == 1


def test_replay_steps_through_every_event():
    """``replay()`` yields the header then each entry, with a view right after it."""
    s = kit.open_session()
    s.append_message(kit.user("a"))
    s.append_session_info("named")
    steps = list(s.replay())
    assert [step.version for step in steps] == [1, 2, 3]
    assert steps[0].event.type == "session"
    assert [step.view.get_session_name() for step in steps] == [None, None, "named"]


def test_views_do_not_change_when_the_session_grows():
    """A view taken earlier keeps answering as of its version after later appends."""
    s = kit.open_session(projections=[FunctionProjection("n", 0, lambda n, e: n + 1)])
    s.append_message(kit.user("a"))
    view = s.at(2)
    before = kit.snapshot(view)
    s.append_message(kit.user("b"))
    s.move_to(None)
    assert kit.snapshot(view) == before


# -- bad input: SessionError or TypeError naming the value, and nothing appended -----------------

BAD_CALLS = [
    ("append_message('hi')", lambda s, a: s.append_message("hi"), TypeError, "'hi'"),
    ("append_message(None)", lambda s, a: s.append_message(None), TypeError, "None"),
    ("thinking 'turbo'", lambda s, a: s.append_thinking_level_change("turbo"), "invalid_entry", "'turbo'"),
    ("thinking 2", lambda s, a: s.append_thinking_level_change(2), TypeError, "2"),
    ("model empty", lambda s, a: s.append_model_change("", "m"), "invalid_entry", "''"),
    ("model int", lambda s, a: s.append_model_change("p", 4), TypeError, "4"),
    ("tools str", lambda s, a: s.append_active_tools_change("bash"), TypeError, "'bash'"),
    ("tools [1]", lambda s, a: s.append_active_tools_change([1]), TypeError, "1"),
    ("compaction unknown kept", lambda s, a: s.append_compaction("s", "ghost", 1), "not_found", "'ghost'"),
    ("compaction negative", lambda s, a: s.append_compaction("s", None, -5), "invalid_entry", "-5"),
    ("compaction tokens str", lambda s, a: s.append_compaction("s", None, "5"), TypeError, "'5'"),
    ("compaction tail str", lambda s, a: s.append_compaction("s", None, 1, retained_tail="x"), TypeError, "'x'"),
    ("compaction details", lambda s, a: s.append_compaction("s", None, 1, details={1, 2}), "invalid_entry", "not JSON"),
    ("custom empty type", lambda s, a: s.append_custom_entry(""), "invalid_entry", "custom_type"),
    ("custom type None", lambda s, a: s.append_custom_entry(None), TypeError, "None"),
    ("custom data", lambda s, a: s.append_custom_entry("t", object()), "invalid_entry", "not JSON"),
    ("custom message content", lambda s, a: s.append_custom_message_entry("t", 7), TypeError, "7"),
    ("custom message display", lambda s, a: s.append_custom_message_entry("t", "c", display="no"), TypeError, "'no'"),
    ("label unknown", lambda s, a: s.append_label_change("ghost", "x"), "not_found", "'ghost'"),
    ("label int", lambda s, a: s.append_label_change(a, 3), TypeError, "3"),
    ("name list", lambda s, a: s.append_session_info(["n"]), TypeError, "['n']"),
    ("move unknown", lambda s, a: s.move_to("ghost"), "not_found", "'ghost'"),
    ("move int", lambda s, a: s.move_to(12), TypeError, "12"),
    ("move summary str", lambda s, a: s.move_to(a, "why"), TypeError, "'why'"),
    ("move summary missing", lambda s, a: s.move_to(a, {}), "invalid_entry", "None"),
    ("move summary key", lambda s, a: s.move_to(a, {"summary": "s", "sumary": 1}), "invalid_entry", "sumary"),
    ("move summary usage", lambda s, a: s.move_to(a, {"summary": "s", "usage": {"inputs": 1}}), "invalid_entry", "inputs"),
    ("move summary hook", lambda s, a: s.move_to(a, {"summary": "s", "from_hook": "yes"}), TypeError, "'yes'"),
    ("entry unknown", lambda s, a: s.entry("ghost"), "not_found", "'ghost'"),
    ("get_entry int", lambda s, a: s.get_entry(1), TypeError, "1"),
    ("find_entries int", lambda s, a: s.find_entries(1), TypeError, "1"),
    ("get_children unknown", lambda s, a: s.get_children("ghost"), "not_found", "'ghost'"),
    ("get_branch unknown", lambda s, a: s.get_branch("ghost"), "not_found", "'ghost'"),
    ("path unknown", lambda s, a: s.get_path_to_root_or_compaction("ghost"), "not_found", "'ghost'"),
    ("context options", lambda s, a: s.build_context("fast"), TypeError, "'fast'"),
    ("context leaf", lambda s, a: s.build_context(leaf_id="ghost"), "not_found", "'ghost'"),
    ("at str", lambda s, a: s.at("2"), TypeError, "'2'"),
    ("at 0", lambda s, a: s.at(0), "not_found", "0"),
    ("at future", lambda s, a: s.at(99), "not_found", "99"),
    ("as_of garbage", lambda s, a: s.as_of("soon"), "invalid_entry", "'soon'"),
    ("as_of naive", lambda s, a: s.as_of(datetime(2026, 1, 1)), "invalid_entry", "2026"),
    ("as_of before", lambda s, a: s.as_of(datetime(2000, 1, 1, tzinfo=UTC)), "not_found", "2000"),
    ("as_of int", lambda s, a: s.as_of(5), TypeError, "5"),
    ("projection unknown", lambda s, a: s.projection("ghost"), "not_found", "'ghost'"),
    ("register junk", lambda s, a: s.register_projection("labels"), TypeError, "'labels'"),
]


@pytest.mark.parametrize("call, error, named", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_input_raises_naming_the_value_and_appends_nothing(call, error, named):
    """Wrong types are TypeError, unknown ids and invalid values SessionError; nothing is stored."""
    s = kit.open_session()
    a = s.append_message(kit.user("a"))
    s.build_context()
    before = kit.snapshot(s)
    expected = TypeError if error is TypeError else SessionError
    with pytest.raises(expected) as caught:
        call(s, a)
    if error is not TypeError:
        assert caught.value.code == error
    assert named in str(caught.value)
    assert kit.snapshot(s) == before
    assert kit.snapshot(Session(s.storage)) == before


@pytest.mark.parametrize(
    "build",
    [
        lambda storage: Session("storage.jsonl"),
        lambda storage: Session(storage, {"entry_transforms": []}),
        lambda storage: Session(storage, clock="now"),
        lambda storage: Session(storage, id_generator=7),
        lambda storage: Session(storage, projections=[object()]),
        lambda storage: SessionContextBuildOptions(entry_transforms=["x"]),
    ],
)
def test_bad_construction_arguments_are_type_errors(build):
    """Building a session or options with a wrong type fails at once with a TypeError."""
    with pytest.raises(TypeError):
        build(kit.new_storage())


@pytest.mark.parametrize(
    "kwargs, error",
    [({"cwd": 5}, TypeError), ({"metadata": ["x"]}, TypeError), ({"timestamp": "yesterday"}, SessionError)],
)
def test_in_memory_storage_refuses_bad_headers(kwargs, error):
    """A new in-memory session with a wrong cwd, metadata or timestamp is refused."""
    with pytest.raises(error):
        InMemorySessionStorage(**kwargs)


def test_a_clock_without_timezone_is_refused_before_anything_is_stored():
    """A naive clock would write a wrong time, so the append fails and nothing is stored."""
    s = Session(kit.new_storage(), clock=lambda: datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="2026"):
        s.append_message(kit.user("a"))
    assert s.version == 1 and Session(s.storage).version == 1


def test_no_public_api_rewrites_or_deletes_an_entry():
    """Entries are immutable once appended: the Session offers no update or delete of entries."""
    verbs = ("delete", "remove", "update", "edit", "rewrite", "replace", "set_entry")
    assert not [n for n in dir(Session) if n.startswith(verbs)]


def test_a_leaf_record_does_not_end_a_branch():
    """get_branch, the context path and build_context refuse the id of a `leaf` side record."""
    from sessiontree import InMemorySessionStorage, Session, SessionError, UserMessage

    session = Session(InMemorySessionStorage())
    first = session.append_message(UserMessage(content="a", timestamp=1))
    session.move_to(first)
    record = session.find_entries("leaf")[0].id
    for call in (
        lambda: session.get_branch(record),
        lambda: session.get_path_to_root_or_compaction(record),
        lambda: session.build_context(leaf_id=record),
    ):
        with pytest.raises(SessionError) as caught:
            call()
        assert caught.value.code == "invalid_entry" and record in caught.value.message


def test_an_empty_session_id_is_refused():
    """InMemorySessionStorage(session_id="") is a programming error, not a random id."""
    from sessiontree import InMemorySessionStorage

    with pytest.raises(TypeError):
        InMemorySessionStorage(session_id="")


def test_a_failing_app_projection_does_not_fail_a_saved_append():
    """An app projection that raises on an entry leaves the append saved; reading it raises the app's error."""
    from sessiontree import FunctionProjection, InMemorySessionStorage, Session, UserMessage

    def apply(count, entry):
        if entry.type == "session_info":
            raise ValueError("app bug")
        return count + 1

    session = Session(InMemorySessionStorage(), projections=[FunctionProjection("count", 0, apply)])
    session.append_message(UserMessage(content="a", timestamp=1))
    assert session.projection("count") == 1
    entry_id = session.append_session_info("named")
    assert session.get_entry(entry_id).name == "named"
    assert Session(session.storage).get_session_name() == "named"
    with pytest.raises(ValueError, match="app bug"):
        session.projection("count")
