"""Every domain event survives the native wire format unchanged (SPEC 2.1 "nothing is dropped")."""

from __future__ import annotations

import orjson
import sessiontree_strategies as strat
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree.domain import events as ev
from sessiontree.domain import messages as m
from sessiontree.wire.codec import native_codec

codec = native_codec()


@settings(max_examples=300, deadline=None)
@given(strat.entry_events(version=7))
def test_every_entry_event_round_trips(event):
    """Encoding an entry and decoding the line gives an equal event, and the same bytes again."""
    line = codec.encode_event(event)
    back = codec.decode_line(line, strat.SESSION_ID, 7)
    assert back == event
    assert type(back) is type(event)
    assert codec.encode_event(back) == line


@settings(max_examples=100, deadline=None)
@given(strat.headers)
def test_the_header_round_trips(header):
    """The session header (cwd, parent, metadata, unknown fields) survives the wire."""
    line = codec.encode_event(header)
    back = codec.decode_line(line, header.originator_id, 1)
    assert back == header
    assert codec.encode_event(back) == line


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([*ev.ENTRY_CLASSES, ev.UnknownEntryAppended]), st.data())
def test_each_entry_type_round_trips(cls, data):
    """Each SPEC 2.2 type (and an unknown one) is drawn explicitly, so none is missed by chance."""
    event = data.draw(strat.entry_strategies(version=3)[cls])
    assert codec.decode_line(codec.encode_event(event), strat.SESSION_ID, 3) == event


def test_entries_use_the_snake_case_wire_names_of_the_spec():
    """A compaction is written with the field names of SPEC 2.2, unknown fields after them."""
    event = ev.ContextCompacted(
        originator_id="s", originator_version=2, timestamp="2026-11-29T11:30:20.123Z",
        id="c0ffee00", parent_id=None, summary="sum", first_kept_entry_id=None,
        tokens_before=5, extra={"xNew": 1},
    )
    assert orjson.loads(codec.encode_event(event)) == {
        "type": "compaction", "id": "c0ffee00", "parent_id": None,
        "timestamp": "2026-11-29T11:30:20.123Z", "summary": "sum", "first_kept_entry_id": None,
        "tokens_before": 5, "retained_tail": None, "details": None, "usage": None,
        "from_hook": False, "xNew": 1,
    }


def test_unknown_roles_and_blocks_are_written_back_with_their_tag():
    """An unknown message or block built without its tag in ``data`` still carries it on the wire."""
    message = m.UnknownMessage(role="bashExecution", data={"command": "ls"})
    block = m.UnknownContent(type="audio", data={"data": "..."})
    assert codec.message_to_dict(message) == {"command": "ls", "role": "bashExecution"}
    assert codec.message_to_dict(m.UserMessage(content=[block]))["content"] == [{"data": "...", "type": "audio"}]
