"""Agents SDK items <-> sessiontree entries: every item comes back exactly as it went in, through every backend and a
reopen; the kinds that map become messages sessiontree shows, and nothing of their text is stored twice."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
import openai_agents_kit as kit

from sessiontree import (
    AssistantMessage,
    ImageContent,
    InMemorySessionRepo,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UserMessage,
)
from sessiontree.integrations.openai_agents import SessionTreeSession
from sessiontree.integrations.openai_agents_items import CUSTOM_TYPE, KEY, to_item, to_message

ROUND_TRIP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@given(item=kit.any_items)
@settings(max_examples=400, deadline=None)
def test_a_message_stands_for_its_item_exactly_or_the_item_is_kept_whole(item):
    """``to_message`` gives a message only when ``to_item`` rebuilds the very same item from it."""
    message = to_message(item, {}, 0)
    if message is not None:
        assert to_item(message) == item


@given(item=kit.mapped_items)
@settings(max_examples=300, deadline=None)
def test_the_kinds_we_know_become_messages(item):
    """A well-formed item of a mapped kind is a message (a custom entry only for blocks our log cannot hold as
    unknown blocks: a block typed like one of ours)."""
    ours = {"text", "thinking", "tool_call", "image"}
    listed = [b for key in ("content", "output") if isinstance(item.get(key), list) for b in item[key]]
    message = to_message(item, {}, 0)
    if any(block["type"] in ours for block in listed):
        assert message is None
    else:
        assert message is not None


@pytest.mark.parametrize("backend", ["jsonl", "memory", "sqlite"])
@given(items=st.lists(kit.any_items, max_size=6))
@ROUND_TRIP
def test_get_items_returns_what_add_items_was_given_also_after_a_reopen(backend, items, tmp_path_factory):
    """Items of every kind, odd ones too, read back equal and in order as stored (``repair=False``): from the live
    session and from a new one on the repository opened again."""
    with kit.repositories(backend, tmp_path_factory.mktemp(backend)) as repos:
        sid = kit.new_id()
        first = SessionTreeSession(sid, repos(), repair=False)
        asyncio.run(first.add_items(items))
        assert asyncio.run(first.get_items()) == items
        first.close()
        assert asyncio.run(SessionTreeSession(sid, repos(), repair=False).get_items()) == items



@pytest.mark.parametrize("item", [
    {"type": "function_call", "call_id": "", "name": None, "arguments": "{}"},
    {"type": "function_call_output", "call_id": None, "output": "x"},
    {"type": "reasoning", "id": "r", "summary": [{"type": "summary_text", "text": None}]},
])
def test_an_item_whose_message_the_log_would_refuse_is_kept_whole(item):
    """A mapped kind with a field of the wrong type (hypothesis found a call named None) is no message: it is kept
    whole in a custom entry and read back as it went in, not refused with a ``TypeError`` by the append."""
    assert to_message(item, {}, 0) is None
    store = SessionTreeSession(kit.new_id(), InMemorySessionRepo(), repair=False)
    asyncio.run(store.add_items([item]))
    assert asyncio.run(store.get_items()) == [item]


AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


@pytest.mark.parametrize("backend", ["jsonl", "memory", "sqlite"])
def test_the_store_that_added_redacted_items_reads_them_back_as_a_new_store_does(backend, tmp_path):
    """The log is redacted (docs/integrations.md): the store that added an item with a secret reads back what the log
    holds, as a new store on the repository opened again does, not the item as it was given."""
    items = [{"role": "user", "content": f"my key is {AWS_KEY}"}, {"type": "custom_kind", "note": AWS_KEY},
             {"role": "user", "content": "no secret here"}]
    with kit.repositories(backend, tmp_path) as repos:
        sid = kit.new_id()
        first = SessionTreeSession(sid, repos(), repair=False)
        asyncio.run(first.add_items(items))
        live = asyncio.run(first.get_items())
        first.close()
        fresh = asyncio.run(SessionTreeSession(sid, repos(), repair=False).get_items())
        assert AWS_KEY not in json.dumps(fresh) and fresh[2] == items[2]
        assert live == fresh

@given(items=st.lists(kit.mapped_items, max_size=8))
@ROUND_TRIP
def test_get_items_pairs_every_function_call_with_one_output(items):
    """By default the items read back follow the Responses API's pairing rule whatever was added; when they already
    did, they are the items added, an output separated from its call by a message moved next to it."""
    store = SessionTreeSession(kit.new_id(), InMemorySessionRepo())
    asyncio.run(store.add_items(items))
    got = asyncio.run(store.get_items())
    assert _pairing_breaks(got) == []
    if _pairing_breaks(items) == []:
        assert sorted(map(json.dumps, got)) == sorted(map(json.dumps, items))


def _pairing_breaks(items: list) -> list:
    """Each function call needs one output after it, an output its call before it, a call id one call."""
    calls, outputs, breaks = [], {}, []
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "function_call":
            breaks += ["repeated"] if item["call_id"] in calls else []
            calls.append(item["call_id"])
        elif kind == "function_call_output" and "call_id" in item:
            outputs[item["call_id"]] = outputs.get(item["call_id"], 0) + 1
            breaks += [] if item["call_id"] in calls else ["orphan"]
    return breaks + [c for c in calls if outputs.get(c) != 1]


def test_each_kind_is_stored_as_the_message_sessiontree_shows(tmp_path):
    """What the log holds for a typical turn: the texts once, in the typed message; the rest in the skeleton."""
    turn = [
        {"role": "user", "content": "Weather in Paris?"},
        {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Look it up."}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}',
         "status": "completed"},
        {"type": "function_call_output", "call_id": "call_1", "output": "Sunny"},
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}]},
        {"role": "user", "content": [{"type": "input_text", "text": "And this?"},
                                     {"type": "input_image", "image_url": "data:image/png;base64,iVBO", "detail": "auto"},
                                     {"type": "input_file", "file_id": "file-1"}]},
        {"role": "system", "content": "Be brief."},
    ]
    store = SessionTreeSession("typical", str(tmp_path))
    asyncio.run(store.add_items(turn))
    entries = store.session.get_branch()
    assert [e.type for e in entries] == ["message"] * 6 + ["custom"]
    user, reasoning, call, output, reply, mixed = (e.message for e in entries[:6])
    assert user == UserMessage("Weather in Paris?", timestamp=user.timestamp, extra={KEY: {}})
    assert reasoning.content == (ThinkingContent("Look it up."),)
    assert reasoning.extra[KEY] == {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text"}]}
    assert call.content == (ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}),)
    assert (call.stop_reason, call.extra[KEY]) == ("toolUse", {"type": "function_call", "id": "fc_1", "status": "completed"})
    assert isinstance(output, ToolResultMessage) and output.tool_name == "get_weather"  # named from its call
    assert output.content == (TextContent("Sunny"),)
    assert isinstance(reply, AssistantMessage) and reply.content == (TextContent("It is sunny."),)
    assert "It is sunny." not in json.dumps(reply.extra[KEY])
    assert mixed.content == (TextContent("And this?"), ImageContent("iVBO", "image/png"),
                             UnknownContent(type="input_file", data={"type": "input_file", "file_id": "file-1"}))
    assert entries[6].custom_type == CUSTOM_TYPE and entries[6].data == turn[6]


@pytest.mark.parametrize("arguments, note", [
    ('{"city":"Zürich"}', {}),                                   # as OpenAI's API writes them
    (json.dumps({"city": "Zürich"}), {KEY: {"arguments": "json.dumps"}}),  # as Python's json.dumps does
])
def test_tool_arguments_are_stored_parsed_with_a_note_on_their_spelling(arguments, note):
    item = {"type": "function_call", "call_id": "c", "name": "f", "arguments": arguments}
    message = to_message(item, {}, 0)
    assert message.content == (ToolCall(id="c", name="f", arguments={"city": "Zürich"}, extra=note),)
    assert "arguments" not in message.extra[KEY] and to_item(message) == item


@pytest.mark.parametrize("arguments", ['{"city": "Paris" }', "not json", "[1, 2]", '{"a": NaN}'])
def test_tool_arguments_spelt_otherwise_are_kept_as_they_are(arguments):
    """Any other spelling, or text that is no JSON object, stays in the skeleton; the call shows no arguments."""
    message = to_message({"type": "function_call", "call_id": "c", "name": "f", "arguments": arguments}, {}, 0)
    assert message.content[0].arguments == {} and message.extra[KEY]["arguments"] == arguments


def test_an_item_the_log_cannot_hold_is_refused_before_anything_is_written(tmp_path):
    """A batch with a NaN in its third item writes nothing, as a database transaction would."""
    store = SessionTreeSession("refused", str(tmp_path))
    ok = {"role": "user", "content": "hello"}
    with pytest.raises(Exception, match="not JSON"):
        asyncio.run(store.add_items([ok, ok, {"role": "user", "content": "x", "score": float("nan")}]))
    assert asyncio.run(store.get_items()) == [] and store.session.get_entries() == []
