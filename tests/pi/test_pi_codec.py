"""The pi dialect line by line: names, key order, omitted fields, leaf markers, headers."""

from __future__ import annotations

import re
from typing import Any

import attrs
import orjson
import pytest
import sessiontree_pi as pi
import sessiontree_strategies as strat
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import (
    AssistantMessage,
    Cost,
    ImageContent,
    SessionError,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from sessiontree.domain import events as ev
from sessiontree.pi.pi import LEAF_MARKER_TYPE, PiCodec, camel, is_pi_header, js_number, pi_codec

SID = "01a22719-3541-759d-a745-5e5f131c9378"
ISO = "2026-11-29T11:38:13.187Z"


def entry(cls: type, **fields: Any) -> Any:
    base = {"originator_id": SID, "originator_version": 2, "timestamp": ISO, "id": "aaaa0001", "parent_id": None}
    return cls(**{**base, **fields})


def line(event: Any) -> dict[str, Any]:
    return orjson.loads(pi_codec().encode_event(event))  # type: ignore[no-any-return]


def test_camel_case_names():
    """Snake_case attribute names become pi's camelCase wire names."""
    assert camel("first_kept_entry_id") == "firstKeptEntryId"
    assert camel("cache_write") == "cacheWrite"
    assert camel("summary") == "summary"


def test_message_roles_and_block_types_use_pi_names():
    """Tool results, tool calls, images and thinking signatures are written the way pi names them."""
    message = AssistantMessage(
        content=[ThinkingContent(thinking="t", signature="sig"), ToolCall(id="c1", name="read", arguments={"p": 1})],
        provider="anthropic",
        model="m",
        api="anthropic-messages",
        usage=Usage(input=1, output=2, cache_read=3, cache_write=4, total_tokens=10, cost=Cost(total=0.5)),
        stop_reason="toolUse",
        timestamp=1768467603692,
    )
    out = pi_codec().message_to_dict(message)
    assert list(out) == ["role", "content", "api", "provider", "model", "usage", "stopReason", "timestamp"]
    assert out["content"] == [
        {"type": "thinking", "thinking": "t", "thinkingSignature": "sig"},
        {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"p": 1}},
    ]
    assert list(out["usage"]) == ["input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"]
    assert list(out["usage"]["cost"]) == ["input", "output", "cacheRead", "cacheWrite", "total"]
    result = ToolResultMessage(
        tool_call_id="c1", tool_name="read", content=[ImageContent(data="AA==", mime_type="image/png")], timestamp=5
    )
    assert pi_codec().message_to_dict(result) == {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "read",
        "content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}],
        "isError": False,
        "timestamp": 5,
    }


@pytest.mark.parametrize(
    ("event", "keys"),
    [
        (entry(ev.MessageAppended, message=UserMessage(content="hi", timestamp=1)), ["type", "id", "parentId", "timestamp", "message"]),
        (entry(ev.ThinkingLevelChanged, thinking_level="high"), ["type", "id", "parentId", "timestamp", "thinkingLevel"]),
        (entry(ev.ModelChanged, provider="openai", model_id="gpt-5"), ["type", "id", "parentId", "timestamp", "provider", "modelId"]),
        (
            entry(ev.ContextCompacted, summary="s", first_kept_entry_id="x", tokens_before=3),
            ["type", "id", "parentId", "timestamp", "summary", "firstKeptEntryId", "tokensBefore", "fromHook"],
        ),
        (entry(ev.BranchSummarized, from_id="x", summary="s"), ["type", "id", "parentId", "timestamp", "fromId", "summary", "fromHook"]),
        (entry(ev.CustomEntryAppended, custom_type="ext"), ["type", "customType", "id", "parentId", "timestamp"]),
        (
            entry(ev.CustomMessageAppended, custom_type="ext", content="c"),
            ["type", "customType", "content", "display", "id", "parentId", "timestamp"],
        ),
        (entry(ev.LabelChanged, target_id="x", label=None), ["type", "id", "parentId", "timestamp", "targetId"]),
        (entry(ev.SessionRenamed, name="n"), ["type", "id", "parentId", "timestamp", "name"]),
        (entry(ev.ActiveToolsChanged, active_tool_names=("read",)), ["type", "id", "parentId", "timestamp", "activeToolNames"]),
    ],
)
def test_new_entries_have_pis_key_set_and_order(event, keys):
    """A new entry is written with pi's keys in pi's order, absent optional fields left out."""
    out = line(event)
    assert list(out) == keys
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", out["timestamp"])


def test_leaf_entry_is_written_as_a_custom_marker_under_its_target():
    """A leaf move is a custom entry whose parentId is the new leaf, so pi resumes there."""
    moved = entry(ev.LeafMoved, parent_id="old", target_id="new")
    out = line(moved)
    assert out == {
        "type": "custom",
        "customType": LEAF_MARKER_TYPE,
        "data": {"fromId": "old"},
        "id": "aaaa0001",
        "parentId": "new",
        "timestamp": ISO,
    }
    assert PiCodec.is_leaf_marker(out)
    assert pi_codec().decode_leaf_marker(out, SID, 2) == moved


def test_unknown_entry_types_are_copied_with_pis_parent_key():
    """An entry type neither side knows keeps every field; only its parent key follows the dialect."""
    data = {"type": "usage", "id": "u1", "parent_id": "p", "timestamp": ISO, "kind": "cache_warm", "usage": {"cacheRead": 1}}
    unknown = ev.UnknownEntryAppended(
        originator_id=SID, originator_version=2, timestamp=ISO, id="u1", parent_id="p", type="usage", data=data
    )
    out = line(unknown)
    assert list(out) == ["type", "id", "parentId", "timestamp", "kind", "usage"]
    assert pi_codec().decode_entry(out, SID, 2).data == out


def test_fixture_lines_round_trip_byte_for_byte():
    """Every line pi wrote in the shared fixtures is decoded and written back identically."""
    codec = pi_codec()
    for path in sorted(pi.fixtures_dir().glob("*.jsonl")):
        lines = path.read_bytes().splitlines()
        header = codec.decode_header(orjson.loads(lines[0]))
        assert codec.encode_event(header) == lines[0]
        for number, raw in enumerate(lines[1:], start=2):
            assert codec.encode_event(codec.decode_entry(orjson.loads(raw), header.id, number)) == raw, (path, number)


def test_explicit_nulls_and_omitted_labels_are_written_back_as_read():
    """A null pi wrote explicitly stays null; a label cleared by omission stays omitted."""
    codec = pi_codec()
    custom = {"type": "custom", "customType": "x", "data": None, "id": "c", "parentId": None, "timestamp": ISO}
    label = {"type": "label", "id": "l", "parentId": "c", "timestamp": ISO, "targetId": "c"}
    decoded = codec.decode_entry(label, SID, 3)
    assert decoded.label is None
    assert orjson.loads(codec.encode_event(codec.decode_entry(custom, SID, 2))) == custom
    assert orjson.loads(codec.encode_event(decoded)) == label


@pytest.mark.parametrize(
    ("header", "version"),
    [
        ({"type": "session", "id": "s", "timestamp": ISO, "cwd": "/w"}, 1),
        ({"type": "session", "version": 2, "id": "s", "timestamp": ISO, "cwd": "/w", "branchedFrom": "/p.jsonl"}, 2),
        ({"type": "session", "version": 3, "id": "s", "timestamp": ISO, "cwd": "/w", "parentSession": "/p.jsonl"}, 3),
    ],
)
def test_headers_of_every_pi_version_are_recognised_and_kept(header, version):
    """Headers of versions 1-3 are pi's; their version and every field are kept."""
    assert is_pi_header(header)
    decoded = pi_codec().decode_header(header)
    assert decoded.version == version
    out = orjson.loads(pi_codec().encode_event(decoded))
    assert {k: v for k, v in out.items() if k != "version"} == {k: v for k, v in header.items() if k != "version"}


def test_native_headers_are_not_pi_headers():
    """The native writer's header (parent_session, metadata) is never taken for pi's."""
    assert not is_pi_header({"type": "session", "version": 3, "id": "s", "timestamp": ISO, "cwd": "", "parent_session": None, "metadata": {}})


@pytest.mark.parametrize("version", [0, 4, "3", 3.5, None])
def test_unknown_pi_versions_are_refused(version):
    """A pi header with a version pi never wrote is unsupported_version."""
    with pytest.raises(SessionError) as caught:
        pi_codec().decode_header({"type": "session", "version": version, "id": "s", "timestamp": ISO, "cwd": ""})
    assert caught.value.code == "unsupported_version"


def _same_modulo_parent_key(decoded: Any, event: Any) -> bool:
    if isinstance(event, ev.UnknownEntryAppended):
        renamed = {("parentId" if k == "parent_id" else k): v for k, v in event.data.items()}
        return decoded.data == renamed and decoded.id == event.id and decoded.parent_id == event.parent_id
    return decoded == event  # type: ignore[no-any-return]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strat.entry_events())
def test_every_entry_event_round_trips_through_the_pi_dialect(event):
    """Encoding any entry event in pi's dialect and decoding it gives the same event back."""
    codec = pi_codec()
    line = codec.encode_event(event)
    data = orjson.loads(line)
    if PiCodec.is_leaf_marker(data):
        decoded = codec.decode_leaf_marker(data, strat.SESSION_ID, event.originator_version)
    else:
        decoded = codec.decode_entry(data, strat.SESSION_ID, event.originator_version)
        assert codec.decode_line(line, strat.SESSION_ID, event.originator_version) == decoded  # the typed path
    assert _same_modulo_parent_key(decoded, event)
    assert codec.encode_event(decoded) == codec.encode_event(attrs.evolve(decoded))


def test_text_blocks_keep_fields_pi_added():
    """Block fields this library does not model (pi's textSignature) are kept in place."""
    raw = {"role": "user", "content": [{"type": "text", "text": "x", "textSignature": "s"}], "timestamp": 1}
    message = pi_codec().message_from_dict(raw)
    assert message == UserMessage(content=[TextContent(text="x", extra={"textSignature": "s"})], timestamp=1)
    assert pi_codec().message_to_dict(message) == raw


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.00000375, "0.00000375"),
        (-3.75e-6, "-0.00000375"),
        (1e-7, "1e-7"),
        (0.1, "0.1"),
        (123.0, "123"),
        (1.5e20, "150000000000000000000"),
        (1e21, "1e+21"),
        (5e-324, "5e-324"),
        (0.009245100000000001, "0.009245100000000001"),
    ],
)
def test_numbers_are_laid_out_as_javascript_writes_them(value, text):
    """Floats are written the way pi's JSON.stringify writes them, so pi's lines round-trip."""
    assert js_number(value) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_javascript_number_layout_reads_back_exactly(value):
    """The JavaScript layout of a float reads back as the same float."""
    assert float(js_number(value)) == value
