"""The session aggregate: construction, replay and rollback, what values it refuses or records as given, and
eventsourcing's protocol (the harness: tests/support/sessiontree_aggkit.py)."""

from __future__ import annotations

import attrs
import pytest
from sessiontree_aggkit import (
    HI,
    SID,
    T,
    entry,
    given,
    msg,
    refused,
    then,
)

from sessiontree.domain import aggregate
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import (
    LeafMoved,
    SessionStarted,
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
