"""Messages and content blocks: immutable value objects with SPEC 2.1 field names."""

from __future__ import annotations

import attrs
import pytest

import sessiontree.domain.messages as m
from sessiontree import InMemorySessionStorage, Session
from sessiontree.domain.messages import (
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    Cost,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    Usage,
    UserMessage,
    check_fields,
    message_text,
)


def test_messages_take_their_spec_field_names_as_keywords():
    """The SPEC 7 constructor examples work, with defaults for optional fields."""
    user = UserMessage(content=[TextContent(text="hi")], timestamp=0)
    reply = AssistantMessage(
        content=[TextContent(text="yo"), ToolCall(id="c1", name="read", arguments={"path": "a"})],
        provider="openai",
        model="gpt-5",
        usage=Usage(input=3, output=4, total_tokens=7, cost=Cost(total=0.5)),
        stop_reason="stop",
        timestamp=5,
    )
    assert user.role == "user" and reply.role == "assistant"
    assert reply.api is None and reply.error_message is None
    assert reply.usage.cost.total == 0.5


def test_content_lists_become_tuples():
    """Content given as a list is stored as a tuple, so it cannot change after the fact."""
    message = UserMessage(content=[TextContent(text="a")])
    assert message.content == (TextContent(text="a"),)


def test_user_content_may_be_a_plain_string():
    """A user message's content is a string or text/image blocks."""
    assert UserMessage(content="plain").content == "plain"


def test_messages_are_frozen():
    """Changing a message is done with ``attrs.evolve``, never in place."""
    message = UserMessage(content="a")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        message.content = "b"  # type: ignore[misc]
    assert attrs.evolve(message, content="b").content == "b"


@pytest.mark.parametrize(
    "build",
    [
        lambda: UserMessage(content=5),
        lambda: UserMessage(content=["not a block"]),
        lambda: UserMessage(content="a", timestamp="now"),
        lambda: AssistantMessage(content="text is not blocks"),
        lambda: AssistantMessage(content=[], usage={"input": 1}),
        lambda: ToolResultMessage(tool_call_id=1, tool_name="read"),
        lambda: ToolResultMessage(tool_call_id="c", tool_name="read", is_error="no"),
        lambda: ToolCall(id="c", name="read", arguments=["a"]),
        lambda: TextContent(text=None),
        lambda: ImageContent(data="x"),
        lambda: Usage(input="many"),
        lambda: Usage(cost={"total": 1}),
        lambda: Cost(total="free"),
        lambda: Usage(output=True),
    ],
)
def test_wrong_field_types_are_type_errors(build):
    """A message or block with a wrong field type is refused with TypeError where the log takes it in (the append
    command; the constructors leave the check to it, so a value read from a log is not checked twice)."""
    session = Session(InMemorySessionStorage.create())
    with pytest.raises(TypeError):
        session.append_message(_in_a_message(build()))
    assert session.get_entries() == []


def _in_a_message(value):
    """``value`` as the append command meets it: a message, or inside one."""
    if isinstance(value, Usage):
        return AssistantMessage(content=[], usage=value)
    if isinstance(value, Cost):
        return AssistantMessage(content=[], usage=Usage(cost=value))
    if isinstance(value, (TextContent, ToolCall)):
        return AssistantMessage(content=[value])
    return value


def test_extra_keeps_unknown_fields():
    """Unknown wire fields ride along in ``extra`` and take part in equality."""
    a = TextContent(text="x", extra={"cacheControl": {"type": "ephemeral"}})
    assert a.extra == {"cacheControl": {"type": "ephemeral"}}
    assert a != TextContent(text="x")


def test_unknown_message_keeps_its_role_and_fields():
    """A message of an unknown role keeps every field in ``data``."""
    message = UnknownMessage(role="bashExecution", data={"role": "bashExecution", "timestamp": 9})
    assert message.role == "bashExecution" and message.timestamp == 9


def test_summary_and_custom_messages_expose_their_role():
    """Messages built by context building expose ``.role`` like the others."""
    assert CustomMessage(custom_type="t", content="c").role == "custom"
    assert CompactionSummaryMessage(summary="s").role == "compaction_summary"
    assert BranchSummaryMessage(summary="s", from_id="a").role == "branch_summary"
    assert ThinkingContent(thinking="hmm").signature is None


def test_message_text_joins_text_blocks():
    """``message_text`` gives the plain text of a message (or a summary's text)."""
    assert message_text(UserMessage(content=[TextContent(text="a"), ImageContent(data="d", mime_type="image/png"), TextContent(text="b")])) == "ab"
    assert message_text(CompactionSummaryMessage(summary="s")) == "s"


def test_unknown_message_and_block_data_carry_their_tag():
    """``data`` always holds the tag; a tag that disagrees with it is a TypeError."""
    from sessiontree.domain.messages import UnknownContent

    assert UnknownMessage(role="x", data={"a": 1}).data == {"a": 1, "role": "x"}
    assert UnknownContent(type="audio").data == {"type": "audio"}
    with pytest.raises(TypeError, match="'y'"):
        UnknownMessage(role="x", data={"role": "y"})


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: m.UserMessage(content=123), "UserMessage.content must be a str or a list of content blocks"),
        (lambda: m.AssistantMessage(content="x"), "AssistantMessage.content must be a list of content blocks"),
        (lambda: m.UserMessage(content=[1]), "1 is not a block"),
        (lambda: m.ToolCall(id=1, name="x"), "ToolCall.id must be a str, not 1"),
        (lambda: m.AssistantMessage(content=[], usage=3), "AssistantMessage.usage must be a Usage or None, not 3"),
    ],
)
def test_a_wrong_type_is_one_readable_sentence(build, expected):
    """A wrong type raises TypeError whose message names the class, the field and the value."""
    with pytest.raises(TypeError) as caught:
        check_fields(_in_a_message(build()))
    assert len(caught.value.args) == 1 and expected in str(caught.value)
