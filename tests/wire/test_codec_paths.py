"""The two ways of reading a line agree (``wire.py``): msgspec's typed path and the dict path, in the native and
in pi's dialect.

``Codec.decode_line`` tries the typed path first and falls back to the dict path
(``Codec.decode_entry``) for whatever it refuses. For every line the typed path accepts both
must give equal events *and* the same bookkeeping in every ``extra`` (``absent``: the known
fields the producer left out; ``nulls``: the fields it wrote as null where the dialect's
writer leaves a None out). Equality of the events cannot see that bookkeeping (an ``Extra``
compares as a plain dict), so :func:`bookkeeping` walks the decoded values and collects it.

Lines come from the strategies (``sessiontree_strategies``) as the writer lays them out, and
as other producers write them: optional fields left out, optional values written as null,
fields this library does not know added at every level.
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson
import pytest
import sessiontree_strategies as strat
from hypothesis import HealthCheck, given, settings
from sessiontree_codecpaths import (
    CODECS,
    DIALECTS,
    SETTINGS,
    SID,
    UNKNOWN_KEY,
    UNKNOWN_VALUE,
    VERSION,
    assert_paths_agree,
    bookkeeping,
    plain,
    plain_entries,
    typed_accepts,
)

from sessiontree.domain import events as ev
from sessiontree.domain import messages as m
from sessiontree.domain.errors import SessionError

# -- (a) lines as the writer lays them out ---------------------------------------------------------


@DIALECTS
@SETTINGS
@given(event=strat.entry_events(version=VERSION))
def test_both_paths_read_every_written_line_alike(dialect, event):
    """Any event the strategies draw (unknown fields and types included): the line decodes to
    the same event with the same bookkeeping both ways, and either event writes the line again."""
    codec = CODECS[dialect]
    line = codec.encode_event(event)
    typed, via_dict = assert_paths_agree(codec, line)
    assert codec.encode_event(typed) == line
    assert codec.encode_event(via_dict) == line


@DIALECTS
@SETTINGS
@given(event=plain_entries)
def test_lines_without_unknowns_are_read_by_the_typed_path(dialect, event):
    """A line with nothing unknown is decoded by the typed path itself, so the comparison above
    is not the dict path held to itself; what it gives equals the event written."""
    codec = CODECS[dialect]
    line = codec.encode_event(event)
    assert typed_accepts(codec, line), line
    typed, via_dict = assert_paths_agree(codec, line)
    if not (dialect == "pi" and isinstance(event, ev.LeafMoved)):  # pi writes a leaf as a custom entry, read as one
        assert typed == event
    assert codec.encode_event(typed) == line == codec.encode_event(via_dict)


@DIALECTS
@pytest.mark.parametrize("cls", ev.ENTRY_CLASSES, ids=lambda c: c.type)
def test_every_entry_type_reaches_the_typed_path(dialect, cls):
    """Each entry type, drawn without unknowns, is decoded by the typed path (none is always
    left to the fallback)."""
    codec = CODECS[dialect]
    strategy = strat.entry_strategies(version=VERSION)[cls].map(plain)

    @settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(strategy)
    def check(event: Any) -> None:
        line = codec.encode_event(event)
        assert typed_accepts(codec, line), line
        assert_paths_agree(codec, line)

    check()


@DIALECTS
def test_a_line_with_an_unknown_field_is_left_to_the_dict_path(dialect):
    """The typed path refuses an unknown field (it could not keep it); decode_line still gives
    the dict path's event, the field kept in ``extra``."""
    codec = CODECS[dialect]
    event = ev.SessionRenamed(originator_id=SID, originator_version=VERSION, timestamp="2026-01-01T00:00:00.000Z",
                              id="aaaa0001", parent_id=None, name="n", extra={UNKNOWN_KEY: UNKNOWN_VALUE})
    line = codec.encode_event(event)
    assert not typed_accepts(codec, line)
    typed, _ = assert_paths_agree(codec, line)
    assert typed.extra == {UNKNOWN_KEY: UNKNOWN_VALUE}
    assert typed_accepts(codec, codec.encode_event(plain(event)))


# -- differences the paths once had ---------------------------------------------------------------


@DIALECTS
def test_left_out_fields_the_writer_omits_when_none_are_recorded_alike(dialect):
    """An assistant message without ``api``/``usage``/``error_message`` (as every writer
    writes one that has none): neither path records them as absent (left out is how the
    writer writes None), and a copy made with ``attrs.evolve(message, api=...)`` keeps its
    ``api`` whichever path read the line."""
    codec = CODECS[dialect]
    event = ev.MessageAppended(originator_id=SID, originator_version=VERSION, timestamp="2026-01-01T00:00:00.000Z",
                               id="aaaa0001", parent_id=None, message=m.AssistantMessage(content=[m.TextContent(text="t")]))
    line = codec.encode_event(event)
    assert typed_accepts(codec, line)
    typed = codec.decode_line(line, SID, VERSION)
    via_dict = codec.decode_entry(orjson.loads(line), SID, VERSION)
    assert bookkeeping(typed) == bookkeeping(via_dict)
    for read in (typed, via_dict):
        edited = attrs.evolve(read, message=attrs.evolve(read.message, api="x"))
        assert codec.decode_line(codec.encode_event(edited), SID, VERSION).message.api == "x"


@DIALECTS
def test_an_edited_value_is_written_even_where_its_producer_left_the_field_out(dialect):
    """A field the producer left out is left out again only while it holds its default: a copy
    of the value with the field changed writes the change."""
    codec = CODECS[dialect]
    role, stop = ("assistant", "stop_reason") if dialect == "native" else ("assistant", "stopReason")
    parent = "parent_id" if dialect == "native" else "parentId"
    line = orjson.dumps({"type": "message", "id": "aaaa0001", parent: None, "timestamp": "2026-01-01T00:00:00.000Z",
                         "message": {"role": role, "content": [], "timestamp": 0}})
    for read in (codec.decode_line(line, SID, VERSION), codec.decode_entry(orjson.loads(line), SID, VERSION)):
        assert codec.encode_event(read) == line  # left out again
        edited = attrs.evolve(read, message=attrs.evolve(read.message, provider="openai", stop_reason="length"))
        again = orjson.loads(codec.encode_event(edited))["message"]
        assert again["provider"] == "openai" and again[stop] == "length"


_COMPACTION_SUMMARY = (
    b'{"type":"message","id":"aaaa0001","%s":null,"timestamp":"2026-01-01T00:00:00.000Z",'
    b'"message":{"role":"%s","summary":"s","%s":5.5,"timestamp":0}}'
)


@DIALECTS
def test_a_float_tokens_before_in_a_summary_message_is_read_alike(dialect):
    """``tokens_before`` is a number on the wire (some producers write a float): both paths
    read it as written."""
    codec = CODECS[dialect]
    names = (b"parent_id", b"compaction_summary", b"tokens_before") if dialect == "native" else (
        b"parentId", b"compactionSummary", b"tokensBefore")
    line = _COMPACTION_SUMMARY % names
    assert typed_accepts(codec, line)
    assert_paths_agree(codec, line)


@DIALECTS
def test_an_empty_entry_id_is_read_alike(dialect):
    """An entry whose ``id`` is "" is corrupt, whichever path reads it."""
    codec = CODECS[dialect]
    parent = "parent_id" if dialect == "native" else "parentId"
    line = orjson.dumps({"type": "session_info", "id": "", parent: None, "timestamp": "2026-01-01T00:00:00.000Z", "name": "n"})
    outcomes = []
    for read in (lambda: codec.decode_line(line, SID, VERSION), lambda: codec.decode_entry(orjson.loads(line), SID, VERSION)):
        try:
            outcomes.append(read())
        except SessionError as exc:
            outcomes.append(exc.code)
    assert outcomes[0] == outcomes[1]
