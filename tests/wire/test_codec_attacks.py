"""Values that once made the wire model lose data or write a line its own reader refuses (a review of the one wire
model: tests/wire/test_codec_fixtures.py runs the real files; these are the ways found around it)."""

from __future__ import annotations

import math

import attrs
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sessiontree_codecpaths import CODECS, DIALECTS, SID, VERSION, assert_paths_agree, typed_accepts

from sessiontree import AssistantMessage, Cost, JsonlSessionRepo, Session, SessionError, Usage, UserMessage, open_session
from sessiontree.audit.verify import verify
from sessiontree.domain import events as ev
from sessiontree.domain import messages as m
from sessiontree.pi.pi import js_number
from sessiontree.storage.jsonl import JsonlSessionStorage


def _entry(message):
    return ev.MessageAppended(
        originator_id=SID, originator_version=VERSION, timestamp="2026-01-01T00:00:00.000Z", id="aaaa0001",
        parent_id=None, message=message,
    )


@pytest.mark.parametrize("amount", [math.nan, math.inf, -math.inf])
def test_a_cost_that_is_not_a_finite_number_is_refused_before_it_is_written(tmp_path, amount):
    """JSON has no NaN or infinity: msgspec writes them as null, which no reader takes for a number, so the whole
    session would read as corrupt. The append command refuses them (as it refuses them in tool arguments)."""
    session = JsonlSessionRepo(tmp_path).create(cwd="/w")
    first = session.append_message(UserMessage(content="kept", timestamp=1))
    usage = Usage(input=1, output=1, total_tokens=2, cost=Cost(total=amount))
    with pytest.raises(ValueError, match="finite"):
        session.append_message(AssistantMessage(content=[], provider="p", model="m", stop_reason="stop", timestamp=2,
                                                usage=usage))
    reopened = open_session(session.storage.location)
    assert [e.id for e in reopened.get_entries()] == [first]


@DIALECTS
@pytest.mark.parametrize("at", ["message", "block", "entry"])
def test_an_unknown_field_named_like_a_known_one_is_refused_not_written_over_it(dialect, at):
    """``extra`` holds fields this library does not know; one named like a known field (``content``, ``id``) would
    replace that field's value in the line, and the value read back would not be the one written. Reading never
    makes such an ``extra``; writing refuses it, whichever way the value came (the append command or encode_event)."""
    codec = CODECS[dialect]
    text = m.TextContent(text="x")
    if at == "message":
        event = _entry(m.UserMessage(content="x", timestamp=1, extra={"content": "y"}))
    elif at == "block":
        event = _entry(m.UserMessage(content=[attrs.evolve(text, extra={"text": "y"})], timestamp=1))
    else:
        event = attrs.evolve(_entry(m.UserMessage(content="x", timestamp=1)), extra={"id": "other"})
    with pytest.raises(SessionError, match="names a known field"):
        codec.encode_event(event)


def test_an_unknown_field_named_like_a_known_one_is_refused_by_append(tmp_path):
    """Through the public API: refused, and the log is as it was (no line was written)."""
    session = JsonlSessionRepo(tmp_path).create(cwd="/w")
    first = session.append_message(UserMessage(content="kept", timestamp=1))
    with pytest.raises(SessionError, match="names a known field"):
        session.append_message(UserMessage(content="x", timestamp=2, extra={"timestamp": 7}))
    assert [e.id for e in open_session(session.storage.location).get_entries()] == [first]
    assert session.append_message(UserMessage(content="after", timestamp=3))


@DIALECTS
@pytest.mark.parametrize("key", ["id", "cwd", "parent_session", "parentSession", "metadata"])
def test_a_header_whose_unknown_fields_name_a_known_one_is_refused(dialect, key):
    """The header too: an unknown field named like a known one would replace it (the session's id, its parent)."""
    codec = CODECS[dialect]
    header = ev.SessionStarted(originator_id=SID, timestamp="t", cwd="/w", version=3, parent_session=None, metadata={},
                               extra={key: "other"})
    known = {"id", "cwd", "metadata", "parent_session" if dialect == "native" else "parentSession"}
    if key in known:
        with pytest.raises(SessionError, match="names a known field"):
            codec.encode_event(header)
    else:  # another dialect's name: an unknown field like any other
        assert codec.decode_line(codec.encode_event(header), SID, 1).extra == {key: "other"}


def test_a_pi_leaf_marker_whose_unknown_fields_name_a_known_one_is_refused():
    """pi writes a leaf move as a custom entry under its target: an unknown ``parentId`` would move the leaf."""
    moved = ev.LeafMoved(originator_id=SID, originator_version=VERSION, timestamp="t", id="aaaa0001", parent_id="a",
                         target_id="b", extra={"parentId": "elsewhere"})
    with pytest.raises(SessionError, match="names a known field"):
        CODECS["pi"].encode_event(moved)
    kept = attrs.evolve(moved, extra={"xNew": 1})
    assert orjson.loads(CODECS["pi"].encode_event(kept))["xNew"] == 1


@DIALECTS
def test_a_header_that_repeats_a_key_is_corrupt_natively_and_warned_of_in_pis_dialect(dialect):
    """Entry lines already were: a native header with ``id`` twice is corrupt (which id is the session's is ambiguous),
    and pi's dialect reads the last value, as pi does, and says so."""
    codec = CODECS[dialect]
    parent = "parent_session" if dialect == "native" else "parentSession"
    line = ('{"type":"session","version":3,"id":"A","timestamp":"t","cwd":"/w","' + parent + '":null,"id":"B"}').encode()
    warned: list[str] = []
    if dialect == "native":
        with pytest.raises(SessionError, match="'id' appears twice"):
            codec.decode_line(line, SID, 1, warned.append)
    else:
        assert codec.decode_line(line, SID, 1, warned.append).originator_id == "B"
        assert warned and "'id'" in warned[0]
    plain = codec.encode_event(ev.SessionStarted(originator_id="A", timestamp="t", cwd="/w", version=3))
    assert codec.decode_line(plain, SID, 1, warned.append).originator_id == "A"


_EDGES = [1e-7, 9.999999e-8, 1e-4, 1e16, 1e21, 9.99999e20, -1e-7, -0.0, 5e-324, 1.7976931348623157e308, 0.1,
          123456789012345680000.0, 1.8446744073709552e19]
_FLOATS = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(_EDGES)


@settings(max_examples=300, deadline=None)
@given(_FLOATS, _FLOATS, _FLOATS)
def test_pi_lines_with_floats_of_every_range_are_read_alike_and_written_back(total, argument, tokens):
    """Floats as pi's JSON.stringify lays them out (plain from 1e-7 to 1e21, exponents beyond, ``-0`` as ``0``, big
    integral ones as bare digits beyond 64 bits) in a typed amount, a tool argument and a compaction's count and
    details: both paths read the same numbers and the line comes back byte for byte."""
    codec = CODECS["pi"]
    t, a, n = js_number(total), js_number(argument), js_number(tokens)
    usage = ('{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0,'
             '"cacheRead":0,"cacheWrite":0,"total":' + t + "}}")
    lines = [
        '{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"assistant","content":[{"type":'
        '"toolCall","id":"c","name":"n","arguments":{"x":' + a + '}}],"api":"a","provider":"p","model":"m","usage":'
        + usage + ',"stopReason":"stop","timestamp":1}}',
        '{"type":"compaction","id":"a2","parentId":null,"timestamp":"t","summary":"s","firstKeptEntryId":"k",'
        '"tokensBefore":' + n + ',"details":[' + a + "," + t + '],"fromHook":false}',
    ]
    for line in (x.encode() for x in lines):
        assert typed_accepts(codec, line)
        typed, via_dict = assert_paths_agree(codec, line)
        assert codec.encode_event(typed) == line == codec.encode_event(via_dict)


@attrs.frozen
class _Scored(m.TextContent):
    """An app's subclass of a block with a field of its own."""

    score: int = 0


class _Plain(m.TextContent):
    """An app's subclass that adds nothing (written as its base, read back as the base)."""


@DIALECTS
def test_an_apps_subclass_with_fields_of_its_own_is_refused_not_written_without_them(dialect, tmp_path):
    """A subclass is written as the class it extends; a field of its own has no place in that line, and the value
    read back would have lost it. Refused by the writer (so by the append command too); a subclass that adds no field
    is written as its base, as before."""
    codec = CODECS[dialect]
    with pytest.raises(SessionError, match="score"):
        codec.encode_event(_entry(m.UserMessage(content=[_Scored(text="x", score=3)], timestamp=1)))
    plain = codec.encode_event(_entry(m.UserMessage(content=[_Plain(text="x")], timestamp=1)))
    assert plain == codec.encode_event(_entry(m.UserMessage(content=[m.TextContent(text="x")], timestamp=1)))
    session = JsonlSessionRepo(tmp_path).create(cwd="/w")
    with pytest.raises(SessionError, match="score"):
        session.append_message(UserMessage(content=[_Scored(text="x", score=3)], timestamp=1))
    assert open_session(session.storage.location).get_entries() == []


@pytest.mark.parametrize(("metadata", "named"), [({"x": math.nan}, "nan"), ({"x": [math.inf]}, "inf"), ({1: "a"}, "1")])
def test_header_metadata_json_cannot_hold_is_refused_as_custom_data_is(tmp_path, metadata, named):
    """msgspec writes NaN and infinities as null and an int key as a string: the header read back would hold other
    metadata than the one given. Refused when the session is created, as in custom entries' data."""
    with pytest.raises(SessionError, match=named):
        JsonlSessionRepo(tmp_path).create(cwd="/w", metadata=metadata)
    assert list(tmp_path.glob("*.jsonl")) == []


@pytest.mark.parametrize(
    "message",
    [
        UserMessage(content="x", timestamp=True),
        m.CompactionSummaryMessage(summary="s", tokens_before=math.nan, timestamp=1),
        m.CompactionSummaryMessage(summary="s", tokens_before=math.inf, timestamp=1),
        m.CompactionSummaryMessage(summary="s", tokens_before=True, timestamp=1),
    ],
)
def test_message_numbers_the_reader_refuses_are_refused_by_the_append_command(tmp_path, message):
    """A bool is an int to Python and written as ``true``; NaN is written as ``null``: the reader takes neither for a
    number, so one such append made the whole session read as corrupt."""
    session = JsonlSessionRepo(tmp_path).create(cwd="/w")
    first = session.append_message(UserMessage(content="kept", timestamp=1))
    with pytest.raises((TypeError, ValueError)):
        session.append_message(message)
    assert [e.id for e in open_session(session.storage.location).get_entries()] == [first]


class _Blocks(tuple):
    """An app's tuple subclass holding content blocks."""


@pytest.mark.parametrize("redactors", [None, "default"])
def test_blocks_in_a_tuple_subclass_are_checked_too(tmp_path, redactors):
    """The block checks ran only for a plain tuple: without redactors (which failed on the int by chance), a block of
    a wrong field type in a tuple subclass was written, and the session read as corrupt."""
    path = tmp_path / "s.jsonl"
    storage = JsonlSessionStorage.create(path, cwd="/w")
    session = Session(storage) if redactors == "default" else Session(storage, redactors=None)
    with pytest.raises(TypeError, match=r"TextContent\.text"):
        session.append_message(UserMessage(content=_Blocks([m.TextContent(text=5)]), timestamp=1))
    assert open_session(path).get_entries() == []


@pytest.mark.parametrize(
    "message",
    [
        AssistantMessage(content=[], provider="p", model="m", stop_reason="stop", timestamp=1,
                         usage=Usage(input=2**70, cost=Cost(total=0.5))),
        AssistantMessage(content=[], provider="p", model="m", stop_reason="stop", timestamp=1,
                         usage=Usage(cost=Cost(total=-(2**64)))),
        UserMessage(content="x", timestamp=2**63),
    ],
)
def test_counts_and_times_beyond_64_bits_are_refused_so_that_an_erasure_verifies(tmp_path, message):
    """An erasure keeps a message's counts and times, and verify refuses a stub holding an integer beyond 64 bits (it
    could carry what was erased): so the append command refuses them, or an honest erasure would read as tampering.
    The widest 64-bit values are taken, and their erasure verifies."""
    session = JsonlSessionRepo(tmp_path).create(cwd="/w")
    with pytest.raises(ValueError, match="64 bits"):
        session.append_message(message)
    widest = AssistantMessage(content=[], provider="p", model="m", stop_reason="stop", timestamp=2**63 - 1,
                              usage=Usage(input=2**63 - 1, cost=Cost(total=-(2**63 - 1))))
    entry = session.append_message(widest)
    session.append_message(UserMessage(content="after", timestamp=2))
    session.redact(entry, reason="test")
    assert verify(session.storage.location).problems == []


def test_a_compactions_count_beyond_64_bits_is_refused(tmp_path):
    """The compaction entry's own tokens_before, which its erasure keeps too."""
    session = JsonlSessionRepo(tmp_path).create(cwd="/w")
    first = session.append_message(UserMessage(content="x", timestamp=1))
    with pytest.raises(ValueError, match="64 bits"):
        session.append_compaction("s", first, 2**64)
    entry = session.append_compaction("s", first, 2**63 - 1)
    session.redact(entry, reason="test")
    assert verify(session.storage.location).problems == []
