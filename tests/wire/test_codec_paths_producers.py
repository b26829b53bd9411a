"""The two ways of reading a line agree on lines other producers write: optional fields left out, optional values
written as null, fields this library does not know added at every level (see test_codec_paths.py for the paths)."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st
from sessiontree_codecpaths import (
    CODECS,
    DIALECTS,
    SETTINGS,
    SID,
    UNKNOWN_KEY,
    VERSION,
    assert_paths_agree,
    bookkeeping,
    entry_class,
    message_heavy,
    ordered,
    plain,
    rewrite,
    typed_accepts,
    wire_objects,
)

from sessiontree.domain import events as ev
from sessiontree.domain import messages as m
from sessiontree.wire.codec import Codec

# -- (b) lines other producers write: fields left out, nulls, unknown fields -------------------------


@st.composite
def producer_lines(draw: Any, codec: Codec, events: Any, *, add_unknown: bool) -> tuple[bytes, bytes, int]:
    """(the writer's line, the line as another producer wrote it, how many objects got xNew).
    Each optional field (``required=False`` in the schema) may be left out; each field the
    writer omits when None (``omit_none``) may be written as null instead."""
    event = draw(events)
    line = codec.encode_event(event)
    data = orjson.loads(line)
    for _path, cls, obj in wire_objects(codec, data, entry_class(codec, data)):
        schema = codec.schemas[cls]
        drop: set[str] = set()
        null: set[str] = set()
        for f in schema.fields:
            choices = ["keep"]
            if not f.required and f.wire in obj:
                choices.append("drop")
            if f.omit_none:
                choices.append("null")
            choice = draw(st.sampled_from(choices))
            if choice == "drop":
                drop.add(f.wire)
            elif choice == "null":
                null.add(f.wire)
        add = add_unknown and draw(st.booleans())
        rewrite(codec, cls, obj, drop, null, add)
    changed = orjson.dumps(data)
    # Count after every change: an object may have gone with a dropped parent.
    added = sum(UNKNOWN_KEY in obj for _, _, obj in wire_objects(codec, orjson.loads(changed), entry_class(codec, data)))
    return line, changed, added


def assert_written_back(codec: Codec, written: bytes, original: bytes, changed: bytes) -> None:
    """``written`` (the decoded event encoded again) is ``changed``: byte for byte, or, where
    orjson lays out some number of the original line otherwise than the dialect's writer
    (pi writes numbers as JavaScript does, and ``changed`` was re-serialised with orjson),
    the same keys in the same order with the same values."""
    if orjson.dumps(orjson.loads(original)) == original:
        assert written == changed
    else:
        assert ordered(orjson.loads(written)) == ordered(orjson.loads(changed))


def _line_strategy(dialect: str, add_unknown: bool) -> Any:
    codec = CODECS[dialect]
    # Without unknowns to start with: a line the typed path takes, until xNew is added.
    return producer_lines(codec, message_heavy.map(plain), add_unknown=add_unknown)


@DIALECTS
@SETTINGS
@given(data=st.data())
def test_fields_left_out_or_null_are_read_alike_and_written_back(dialect, data):
    """Optional fields left out and omitted-when-None fields written as null: both paths agree
    (bookkeeping included), and writing the decoded event gives the producer's line again. The typed path takes
    only what its writer lays out (the complete reading remembers the rest)."""
    codec = CODECS[dialect]
    original, changed, _ = data.draw(_line_strategy(dialect, add_unknown=False))
    assert typed_accepts(codec, original), original
    typed, via_dict = assert_paths_agree(codec, changed)
    assert_written_back(codec, codec.encode_event(typed), original, changed)
    assert_written_back(codec, codec.encode_event(via_dict), original, changed)


@DIALECTS
@SETTINGS
@given(data=st.data())
def test_unknown_fields_at_every_level_are_kept_and_written_back(dialect, data):
    """``xNew`` added to the entry, message, blocks, usage or cost (with fields left out or
    null around it): it is kept in that value's ``extra`` by decode_line and by the dict
    path, and written back in place."""
    codec = CODECS[dialect]
    original, changed, added = data.draw(_line_strategy(dialect, add_unknown=True))
    if added:
        assert not typed_accepts(codec, changed)  # the fallback is what reads it
    typed, via_dict = assert_paths_agree(codec, changed)
    for decoded in (typed, via_dict):
        holders = [row for row in bookkeeping(decoded) if UNKNOWN_KEY in row[4]]
        assert len(holders) == added, (holders, changed)
        assert_written_back(codec, codec.encode_event(decoded), original, changed)


@DIALECTS
def test_every_optional_field_left_out_and_every_omitted_one_null(dialect):
    """One line per entry type and message role, every optional field left out (or every
    omit-when-None field null, and the rest left out): both paths agree, the typed path takes
    the writer's own line (the complete reading remembers what another producer left out or wrote as null), and it is
    written back byte for byte."""
    codec = CODECS[dialect]
    usage = m.Usage(input=1, output=2, cache_read=3, cache_write=4, total_tokens=10, cost=m.Cost(input=1, total=2))
    blocks = (m.TextContent(text="t"), m.ThinkingContent(thinking="th", signature="sig"),
              m.ToolCall(id="c", name="n", arguments={"a": 1}), m.ImageContent(data="AA==", mime_type="image/png"))
    msgs = [
        m.UserMessage(content=[blocks[0]], timestamp=1),
        m.AssistantMessage(content=blocks, provider="p", model="mo", api="api", usage=usage, stop_reason="stop",
                           error_message="e", timestamp=2),
        m.ToolResultMessage(tool_call_id="c", tool_name="n", content=[blocks[0]], is_error=True, details={"d": 1}, timestamp=3),
        m.CustomMessage(custom_type="ct", content="c", display=False, details=[1], timestamp=4),
        m.CompactionSummaryMessage(summary="s", tokens_before=5, timestamp=5),
        m.BranchSummaryMessage(summary="s", from_id="f", timestamp=6),
    ]
    base = {"originator_id": SID, "originator_version": VERSION, "timestamp": "2026-01-01T00:00:00.000Z",
            "id": "aaaa0001", "parent_id": "p"}
    events = [ev.MessageAppended(**base, message=x) for x in msgs] + [
        ev.ContextCompacted(**base, summary="s", first_kept_entry_id="k", tokens_before=3, retained_tail=tuple(msgs[:2]),
                            details={"x": 1}, usage=usage, from_hook=True),
        ev.BranchSummarized(**base, from_id="f", summary="s", details={"x": 1}, usage=usage, from_hook=True),
        ev.CustomEntryAppended(**base, custom_type="ct", data={"x": 1}),
        ev.CustomMessageAppended(**base, custom_type="ct", content="c", details={"x": 1}, display=False),
        ev.LabelChanged(**base, target_id="t", label="l"),
        ev.SessionRenamed(**base, name="n"),
    ]
    for event in events:
        line = codec.encode_event(event)
        for nulls_too in (False, True):
            data = orjson.loads(line)
            for _path, cls, obj in wire_objects(codec, data, entry_class(codec, data)):
                fields = codec.schemas[cls].fields
                null = {f.wire for f in fields if f.omit_none} if nulls_too else set()
                rewrite(codec, cls, obj, {f.wire for f in fields if not f.required} - null, null, add=False)
            changed = orjson.dumps(data)
            assert typed_accepts(codec, line), line
            typed, via_dict = assert_paths_agree(codec, changed)
            assert codec.encode_event(typed) == changed == codec.encode_event(via_dict), changed
