"""The session aggregate, given events / when a command / then events (SPEC 2.3, 2.4).

Commands are functions of the aggregate that return events; :func:`project` folds them in.
The ``Agg`` harness below drives them like methods: each command's events are folded in and
kept for ``then``."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from sessiontree.domain import aggregate
from sessiontree.domain.aggregate import SessionAggregate
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import (
    BranchSummarized,
    ContextCompacted,
    LabelChanged,
    LeafMoved,
    MessageAppended,
    ModelChanged,
    SessionRenamed,
    SessionStarted,
    ThinkingLevelChanged,
    leaf_after,
)
from sessiontree.domain.log import EntryLog
from sessiontree.domain.messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UnknownMessage,
    UserMessage,
)

SID = "session-under-test"
T = "2026-11-29T11:30:20.123Z"
HEADER = SessionStarted(originator_id=SID, originator_version=1, timestamp=T, cwd="/p")
HI = UserMessage(content=[TextContent(text="hi")])


def entry(cls: type, id: str, parent_id: str | None, **fields: Any) -> Any:
    """An entry event (its version is set by ``given``/``then``)."""
    return cls(originator_id=SID, originator_version=0, timestamp=T, id=id, parent_id=parent_id, **fields)


def msg(id: str, parent_id: str | None) -> MessageAppended:
    return entry(MessageAppended, id, parent_id, message=HI)


class Agg:
    """The functional aggregate driven like an object (see the module documentation)."""

    def __init__(self, state: SessionAggregate) -> None:
        self.state = state
        self.pending: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        if name in ("version", "log", "leaf_id", "id", "header"):
            return getattr(self.state, name)
        command = getattr(aggregate, name)

        def run(*args: Any, **kwargs: Any) -> Any:
            result = command(self.state, *args, **kwargs)
            events = result if isinstance(result, list) else [result]
            for event in events:
                aggregate.project(self.state, event)
            self.pending.extend(events)
            return events[-1].id

        return run

    def collect_events(self) -> list[Any]:
        events, self.pending = self.pending, []
        return events


def given(*entries: Any) -> Agg:
    """The aggregate replayed from a header and ``entries`` (versions 2, 3, ...)."""
    log = EntryLog.of([attrs.evolve(e, originator_version=i + 2) for i, e in enumerate(entries)], " in the test session")
    return Agg(aggregate.replay(HEADER, log))


def then(agg: Agg) -> list[Any]:
    """The events the command triggered, versions checked then blanked for comparison."""
    events = agg.collect_events()
    first = agg.version - len(events) + 1
    assert [e.originator_version for e in events] == list(range(first, agg.version + 1))
    return [attrs.evolve(e, originator_version=0) for e in events]


def refused(agg: Agg, code: str, command: Any) -> SessionError:
    """The command raises ``SessionError(code)`` and leaves the aggregate unchanged."""
    version, length, leaf = agg.version, len(agg.log), agg.leaf_id
    with pytest.raises(SessionError) as caught:
        command()
    assert caught.value.code == code
    assert (agg.version, len(agg.log), agg.leaf_id) == (version, length, leaf)
    assert agg.collect_events() == []
    return caught.value


# -- appending -----------------------------------------------------------------------------


def test_first_entry_is_a_root():
    """On an empty session a message becomes a root (parent None) and the leaf."""
    agg = given()
    agg.append_message(HI, id="a", timestamp=T)
    assert then(agg) == [msg("a", None)]
    assert agg.leaf_id == "a"


def test_entry_hangs_under_the_current_leaf():
    """An appended entry's parent is the current leaf."""
    agg = given(msg("a", None), msg("b", "a"))
    agg.append_model_change("openai", "gpt-5", id="c", timestamp=T)
    assert then(agg) == [entry(ModelChanged, "c", "b", provider="openai", model_id="gpt-5")]


@pytest.mark.parametrize(
    "command, expected",
    [
        (lambda a: a.append_label_change("a", "keep", id="x", timestamp=T),
         entry(LabelChanged, "x", "a", target_id="a", label="keep")),
        (lambda a: a.append_session_info("demo", id="x", timestamp=T),
         entry(SessionRenamed, "x", "a", name="demo")),
        (lambda a: a.append_thinking_level_change("high", id="x", timestamp=T),
         entry(ThinkingLevelChanged, "x", "a", thinking_level="high")),
    ],
)
def test_labels_names_and_settings_become_the_leaf(command, expected):
    """Every non-leaf entry type, labels and names included, becomes the leaf (as in pi)."""
    agg = given(msg("a", None))
    command(agg)
    assert then(agg) == [expected]
    assert agg.leaf_id == "x"


def test_after_a_leaf_entry_the_next_entry_hangs_under_its_target():
    """Replaying a ``leaf`` entry puts the leaf on its target, so new entries branch there."""
    agg = given(msg("a", None), msg("b", "a"), entry(LeafMoved, "l", "b", target_id="a"))
    assert agg.leaf_id == "a"
    agg.append_message(HI, id="c", timestamp=T)
    assert then(agg) == [msg("c", "a")]


def test_move_to_records_a_leaf_entry_under_the_old_leaf():
    """``move_to`` appends a ``leaf`` entry whose parent is the old leaf."""
    agg = given(msg("a", None), msg("b", "a"))
    agg.move_to("a", id="l", timestamp=T)
    assert then(agg) == [entry(LeafMoved, "l", "b", target_id="a")]
    assert agg.leaf_id == "a"


def test_move_to_none_goes_before_the_first_entry():
    """Moving to None makes the next entry a new root."""
    agg = given(msg("a", None))
    agg.move_to(None, id="l", timestamp=T)
    agg.append_message(HI, id="r", timestamp=T)
    assert then(agg) == [entry(LeafMoved, "l", "a", target_id=None), msg("r", None)]


def test_branch_summary_hangs_under_the_moved_to_entry():
    """A branch summary after ``move_to`` has the target as parent and ``from_id``."""
    agg = given(msg("a", None), msg("b", "a"))
    agg.move_to("a", id="l", timestamp=T, summary={"summary": "left b", "details": {"k": 1}}, summary_id="s")
    assert then(agg)[1] == entry(
        BranchSummarized, "s", "a", from_id="a", summary="left b", details={"k": 1}
    )
    assert agg.leaf_id == "s"


def test_compaction_may_keep_an_entry_on_the_branch():
    """``first_kept_entry_id`` on the current branch is accepted."""
    agg = given(msg("a", None), msg("b", "a"))
    agg.append_compaction("sum", "b", 100, id="c", timestamp=T)
    assert then(agg) == [
        entry(ContextCompacted, "c", "b", summary="sum", first_kept_entry_id="b", tokens_before=100)
    ]


def test_replay_keeps_a_thinking_level_the_commands_refuse():
    """A level outside the list is refused on append but kept when read from a log."""
    agg = given(entry(ThinkingLevelChanged, "t", None, thinking_level="ludicrous"))
    assert agg.log.get(0).thinking_level == "ludicrous"
    refused(agg, "invalid_entry", lambda: agg.append_thinking_level_change("ludicrous", id="u", timestamp=T))


# -- invariants (SPEC 2.3) -----------------------------------------------------------------


def test_label_target_must_exist():
    """A label on an unknown entry is refused with not_found naming the id."""
    agg = given(msg("a", None))
    error = refused(agg, "not_found", lambda: agg.append_label_change("zz", "x", id="l", timestamp=T))
    assert "'zz'" in str(error)


def test_label_target_may_be_on_another_branch():
    """Labels may target any existing entry, not only the current branch."""
    agg = given(msg("a", None), msg("b", "a"), entry(LeafMoved, "l", "b", target_id="a"))
    agg.append_label_change("b", "other branch", id="x", timestamp=T)
    assert then(agg)[0].target_id == "b"


def test_move_to_target_must_exist():
    """``move_to`` an unknown entry is refused with not_found naming the id."""
    agg = given(msg("a", None))
    error = refused(agg, "not_found", lambda: agg.move_to("nope", id="l", timestamp=T))
    assert "'nope'" in str(error)


def test_move_to_a_leaf_record_is_refused():
    """``leaf`` entries are side records, so the leaf cannot move onto one."""
    agg = given(msg("a", None), msg("b", "a"), entry(LeafMoved, "l", "b", target_id="a"))
    error = refused(agg, "invalid_entry", lambda: agg.move_to("l", id="m", timestamp=T))
    assert "'l'" in str(error)


def test_compaction_keeping_an_off_branch_entry_is_refused():
    """``first_kept_entry_id`` on another branch is refused with invalid_entry."""
    agg = given(msg("a", None), msg("b", "a"), entry(LeafMoved, "l", "b", target_id="a"))
    error = refused(agg, "invalid_entry", lambda: agg.append_compaction("s", "b", 1, id="c", timestamp=T))
    assert "'b'" in str(error)


def test_compaction_keeping_an_unknown_entry_is_not_found():
    """``first_kept_entry_id`` naming no entry is refused with not_found."""
    agg = given(msg("a", None))
    error = refused(agg, "not_found", lambda: agg.append_compaction("s", "ghost", 1, id="c", timestamp=T))
    assert "'ghost'" in str(error)


def test_thinking_level_outside_the_list_is_refused():
    """Only off, minimal, low, medium, high and xhigh may be appended."""
    agg = given()
    error = refused(agg, "invalid_entry", lambda: agg.append_thinking_level_change("max", id="t", timestamp=T))
    assert "'max'" in str(error)


def test_an_id_in_use_is_refused():
    """A command given an id already in the log raises already_exists."""
    agg = given(msg("a", None))
    refused(agg, "already_exists", lambda: agg.append_message(HI, id="a", timestamp=T))


def test_replay_refuses_duplicate_ids():
    """A log with one id twice is corrupt."""
    with pytest.raises(SessionError) as caught:
        given(msg("a", None), msg("a", "a"))
    assert caught.value.code == "corrupt"
    assert "'a'" in str(caught.value)


def test_branch_summary_from_an_unknown_entry_is_refused():
    """A branch summary must come from an existing entry (or the pseudo-root ``root``, a move
    before the first entry)."""
    agg = given(msg("a", None))
    refused(agg, "not_found", lambda: agg.move_to("zz", id="l", timestamp=T, summary={"summary": "s"}, summary_id="s"))
    agg.move_to(None, id="l", timestamp=T, summary={"summary": "s"}, summary_id="s")
    assert then(agg)[1].from_id == "root"


@pytest.mark.parametrize(
    "command",
    [
        lambda a: a.append_message("hello", id="x", timestamp=T),
        lambda a: a.append_thinking_level_change(3, id="x", timestamp=T),
        lambda a: a.append_model_change("p", None, id="x", timestamp=T),
        lambda a: a.append_active_tools_change("bash", id="x", timestamp=T),
        lambda a: a.append_active_tools_change(["bash", 7], id="x", timestamp=T),
        lambda a: a.append_compaction("s", None, "100", id="x", timestamp=T),
        lambda a: a.append_compaction("s", None, True, id="x", timestamp=T),
        lambda a: a.append_compaction("s", None, 1, retained_tail=["hi"], id="x", timestamp=T),
        lambda a: a.append_compaction("s", None, 1, usage={"input": 1}, id="x", timestamp=T),
        lambda a: a.append_compaction("s", None, 1, from_hook="no", id="x", timestamp=T),
        lambda a: a.append_custom_entry(None, {}, id="x", timestamp=T),
        lambda a: a.append_custom_message_entry("t", 5, id="x", timestamp=T),
        lambda a: a.append_custom_message_entry("t", "c", display="yes", id="x", timestamp=T),
        lambda a: a.append_label_change(1, "x", id="x", timestamp=T),
        lambda a: a.append_label_change("a", 1, id="x", timestamp=T),
        lambda a: a.append_session_info(["n"], id="x", timestamp=T),
        lambda a: a.move_to(1, id="x", timestamp=T),
    ],
)
def test_wrong_types_are_type_errors_and_append_nothing(command):
    """A wrong argument type is a TypeError and no event is triggered."""
    agg = given(msg("a", None))
    with pytest.raises(TypeError):
        command(agg)
    assert len(agg.log) == 1 and agg.collect_events() == []


@pytest.mark.parametrize(
    "command",
    [
        lambda a: a.append_model_change("", "m", id="x", timestamp=T),
        lambda a: a.append_compaction("s", None, -1, id="x", timestamp=T),
        lambda a: a.append_custom_entry("", None, id="x", timestamp=T),
        lambda a: a.append_custom_message_entry("", "c", id="x", timestamp=T),
    ],
)
def test_invalid_values_are_refused(command):
    """Empty names and negative token counts are invalid_entry."""
    agg = given(msg("a", None))
    refused(agg, "invalid_entry", lambda: command(agg))


# -- construction, replay, rollback ----------------------------------------------------------


def test_start_gives_the_header_as_version_one():
    """Starting a session gives its header, at version 1; replayed, an empty session."""
    header = aggregate.start(session_id=SID, timestamp=T, cwd="/p", metadata={"k": "v"})
    assert isinstance(header, SessionStarted)
    assert (header.originator_version, header.version, header.cwd, header.metadata) == (1, 3, "/p", {"k": "v"})
    agg = aggregate.replay(header, EntryLog())
    assert agg.leaf_id is None and len(agg.log) == 0 and agg.version == 1


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"session_id": ""}, SessionError),
        ({"session_id": 5}, TypeError),
        ({"cwd": 5}, TypeError),
        ({"metadata": [1]}, TypeError),
        ({"timestamp": "yesterday"}, SessionError),
    ],
)
def test_create_refuses_bad_headers(kwargs, error):
    """A header with a wrong type or value is refused before any event exists."""
    arguments = {"session_id": SID, "timestamp": T, **kwargs}
    with pytest.raises(error):
        aggregate.start(**arguments)


def test_replay_restores_the_leaf_and_version():
    """Replaying a log gives the leaf after its last entry and version 1 + entries."""
    agg = given(msg("a", None), msg("b", "a"), entry(LeafMoved, "l", "b", target_id="a"))
    assert agg.leaf_id == "a"
    assert agg.version == 4


def test_a_command_changes_nothing_until_its_event_is_projected():
    """A command returns the next event and leaves the aggregate as it was; ``project`` folds
    the event in (so an append whose save fails leaves no trace)."""
    agg = given(msg("a", None))
    event = aggregate.append_message(agg.state, HI, id="b", timestamp=T)
    assert (agg.version, len(agg.log), agg.leaf_id, "b" in agg.state) == (2, 1, "a", False)
    assert (event.originator_version, event.parent_id) == (3, "a")
    aggregate.project(agg.state, event)
    assert (agg.version, len(agg.log), agg.leaf_id, "b" in agg.state) == (3, 2, "b", True)


def test_leaf_after_follows_spec_2_4():
    """After E the leaf is E.target_id if E is a leaf entry, else E.id."""
    assert leaf_after(msg("a", None)) == "a"
    assert leaf_after(entry(LeafMoved, "l", "a", target_id="x")) == "x"
    assert leaf_after(entry(LeafMoved, "l", "a", target_id=None)) is None


def test_events_are_immutable():
    """An appended entry cannot be changed in place."""
    event = msg("a", None)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.parent_id = "b"  # type: ignore[misc]


class _Blocks(tuple):
    """A tuple subclass holding content blocks."""


@attrs.frozen
class _MyCall(ToolCall):
    """An app's subclass of a tool call."""


@pytest.mark.parametrize(
    "command",
    [
        lambda a: a.append_message(UnknownMessage(role="assistant"), id="x", timestamp=T),
        lambda a: a.append_message(UserMessage(content=[UnknownContent(type="text")]), id="x", timestamp=T),
        lambda a: a.append_compaction("s", None, 1, retained_tail=[UnknownMessage(role="user")], id="x", timestamp=T),
        lambda a: a.append_custom_message_entry("t", [UnknownContent(type="image")], id="x", timestamp=T),
        # blocks in a tuple subclass are checked too
        lambda a: a.append_message(UserMessage(content=_Blocks([UnknownContent(type="text")])), id="x", timestamp=T),
    ],
)
def test_unknown_stand_ins_for_known_roles_and_blocks_are_refused(command):
    """An UnknownMessage/UnknownContent using a known tag would write an unreadable line, so it is refused."""
    agg = given(msg("a", None))
    refused(agg, "invalid_entry", lambda: command(agg))


def test_unknown_roles_and_blocks_may_be_appended():
    """Messages and blocks of roles and types this library does not know are kept as given."""
    agg = given()
    message = UnknownMessage(role="bashExecution", data={"command": "ls"})
    agg.append_message(message, id="x", timestamp=T)
    agg.append_message(UserMessage(content=[UnknownContent(type="audio")]), id="y", timestamp=T)
    assert next(e.message for e in then(agg)) == message


@pytest.mark.parametrize(
    "command, named",
    [
        (lambda a: a.append_custom_entry("t", {"x": float("nan")}, id="x", timestamp=T), "nan"),
        (lambda a: a.append_custom_entry("t", {1: "int key"}, id="x", timestamp=T), "1"),
        (lambda a: a.append_custom_entry("t", {"when": object()}, id="x", timestamp=T), "object"),
        (lambda a: a.append_compaction("s", None, 1, details=float("inf"), id="x", timestamp=T), "inf"),
        (lambda a: a.move_to("a", summary={"summary": "s", "details": {"k": {2, 3}}}, summary_id="y", id="x", timestamp=T), "{2, 3}"),
        (lambda a: a.append_message(ToolResultMessage(tool_call_id="c", tool_name="t", details=[float("nan")]), id="x", timestamp=T), "nan"),
        (lambda a: a.append_message(UserMessage(content=[TextContent(text="t", extra={"xScore": float("-inf")})]), id="x", timestamp=T), "-inf"),
        (lambda a: a.append_message(AssistantMessage(content=[ToolCall(id="c", name="n", arguments={"p": object()})]), id="x", timestamp=T), "object"),
        # an app's subclass of a block keeps its base's free-form fields
        (lambda a: a.append_message(AssistantMessage(content=[_MyCall(id="c", name="n", arguments={"p": float("nan")})]), id="x", timestamp=T), "nan"),
    ],
)
def test_values_json_cannot_hold_are_refused(command, named):
    """NaN, infinities, non-string keys and other objects would change or vanish on the wire: refused."""
    agg = given(msg("a", None))
    error = refused(agg, "invalid_entry", lambda: command(agg))
    assert named in str(error)


def test_data_and_details_are_recorded_as_the_wire_gives_them_back():
    """Tuples become lists and mappings dicts, so a reopened session holds equal values."""
    agg = given(msg("a", None))
    agg.append_custom_entry("t", {"xs": (1, (2, 3))}, id="x", timestamp=T)
    agg.append_compaction("s", None, 1, details=("k",), id="y", timestamp=T)
    events = then(agg)
    assert events[0].data == {"xs": [1, [2, 3]]}
    assert events[1].details == ["k"]


# -- eventsourcing's protocol ------------------------------------------------------------------


def test_project_folds_only_the_aggregate_s_own_next_event():
    """``project`` keeps eventsourcing's rules: another aggregate's event, or one that is not
    the next version, is refused (its errors) and leaves the aggregate as it was."""
    from eventsourcing.domain import OriginatorIDError, OriginatorVersionError

    agg = given(msg("a", None))
    other = attrs.evolve(msg("b", "a"), originator_id="another-session", originator_version=agg.version + 1)
    with pytest.raises(OriginatorIDError):
        aggregate.project(agg.state, other)
    for version in (agg.version, agg.version + 2):
        with pytest.raises(OriginatorVersionError):
            aggregate.project(agg.state, attrs.evolve(msg("b", "a"), originator_version=version))
    assert (agg.version, len(agg.log), agg.leaf_id) == (2, 1, "a")
    assert aggregate.project(agg.state, attrs.evolve(msg("b", "a"), originator_version=3)) is agg.state
    assert (agg.version, agg.leaf_id) == (3, "b")


@pytest.mark.parametrize(
    "message",
    [
        UserMessage(content="hi", extra={"role": {"x": 1}}),
        UserMessage(content=(TextContent(text="t", extra={"type": ["x"]}),)),
        AssistantMessage(content=(TextContent(text="t", extra={"type": "image"}),), provider="p", model="m", stop_reason="stop"),
    ],
    ids=["message-role", "block-type", "block-known-type"],
)
def test_unknown_fields_may_not_stand_for_the_tag(message):
    """An unknown field named like the tag (a message's role, a block's type) would be
    written over it and make the line unreadable: the append is refused instead."""
    agg = given(msg("a", None))
    error = refused(agg, "invalid_entry", lambda: agg.append_message(message, id="b", timestamp=T))
    assert "tag" in error.message
