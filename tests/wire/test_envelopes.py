"""The typed envelopes every reader of lines goes through (end of wire/schema.py): both dialects' keys, read as
the old dict lookups read them, and the listing fold's fast path agreeing with its careful one."""

from __future__ import annotations

import orjson

from sessiontree.search.search_text import entry_row
from sessiontree.storage.index import Summary, fold_lines
from sessiontree.wire.schema import LEAF_TARGET, envelope_decoder, header_of, is_pi_header, line_of, message_of

T = "2026-01-01T00:00:00.000Z"


def test_a_header_reads_either_dialects_parent_session_and_a_native_null_wins() -> None:
    assert header_of({"type": "session", "parent_session": "a"}).parent_session == "a"  # type: ignore[union-attr]
    assert header_of({"type": "session", "parentSession": "b"}).parent_session == "b"  # type: ignore[union-attr]
    # the native key present as null is the native header's "no parent", whatever else the line holds
    assert header_of({"type": "session", "parent_session": None, "parentSession": "b"}).parent_session is None  # type: ignore[union-attr]
    assert header_of([1]) is None
    assert is_pi_header({"type": "session", "parentSession": "b"})
    assert not is_pi_header({"type": "session", "parent_session": None})


def test_an_entry_reads_parent_target_and_tool_name_in_both_dialects() -> None:
    native = line_of({"type": "label", "id": "l", "parent_id": "p", "target_id": "t", "label": "x"})
    pi = line_of({"type": "label", "id": "l", "parentId": "p", "targetId": "t", "label": "x"})
    assert native is not None and pi is not None
    assert (native.parent, native.target) == (pi.parent, pi.target) == ("p", "t")
    assert line_of({"type": "message", "id": "m"}).parent is None  # type: ignore[union-attr]
    assert message_of({"role": "toolResult", "toolName": "bash"}).name_of_tool == "bash"  # type: ignore[union-attr]
    assert message_of({"role": "tool_result", "tool_name": "ls"}).name_of_tool == "ls"  # type: ignore[union-attr]


def test_pi_leaf_marker_is_read_as_a_move_of_the_leaf() -> None:
    marker = {"type": "custom", "customType": "sessiontree/leaf", "data": {"fromId": "old"}, "id": "m", "parentId": "new",
              "timestamp": T}
    row = entry_row(5, marker)
    assert row is not None and (row.parent_id, row.leaf) == ("old", "new")
    other = {**marker, "data": {"fromId": "old", "more": 1}}  # not a marker: an ordinary custom entry
    row = entry_row(5, other)
    assert row is not None and (row.parent_id, row.leaf) == ("new", "m")


def test_envelope_and_leaf_target_decoders_read_the_bytes() -> None:
    head = envelope_decoder("parentId").decode(b'{"type":"message","id":"a","parentId":null,"timestamp":"t","x":[1]}')
    assert (head.type, head.id, head.parent) == ("message", "a", None)
    assert LEAF_TARGET.decode(b'{"type":"leaf","target_id":"a"}').target == "a"
    assert LEAF_TARGET.decode(b'{"type":"leaf"}').target is None


def _line(data: object) -> bytes:
    return orjson.dumps(data)


def test_the_listing_fold_from_bytes_agrees_with_the_fold_of_parsed_lines() -> None:
    header = {"type": "session", "version": 3, "id": "s", "timestamp": T, "cwd": "/w", "parent_session": None}
    entries = [
        {"type": "message", "id": "a", "parent_id": None, "timestamp": T, "message": "not an object"},
        {"type": "message", "id": "b", "parent_id": "a", "timestamp": T,
         "message": {"role": "assistant", "content": [{"type": "text", "text": "no"}]}},
        {"type": "message", "id": "c", "parent_id": "b", "timestamp": "2026-01-02T00:00:00.000Z",
         "message": {"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "ask"}]}},
        {"type": "session_info", "id": "d", "parent_id": "c", "timestamp": "2026-01-03T00:00:00.000Z", "name": "  named  "},
        [1, 2],
    ]
    from_bytes = fold_lines([_line(header), *map(_line, entries), b"{not json"])
    parsed = Summary.from_header(header)
    assert parsed is not None
    for data in [*entries, None]:
        parsed.apply(data)
    assert from_bytes is not None and from_bytes.to_dict() == parsed.to_dict()
    assert (parsed.message_count, parsed.first_message, parsed.name, parsed.version) == (3, "first ask", "named", 7)
    assert parsed.modified == "2026-01-03T00:00:00.000Z"  # the last line's time
