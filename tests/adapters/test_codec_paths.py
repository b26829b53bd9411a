"""The two ways of reading a line agree: msgspec's typed path (``wire.py``) and the dict path
(``structure.py``), in the native and in pi's dialect.

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
from hypothesis import strategies as st

from sessiontree.adapters.codec import Codec, native_codec
from sessiontree.adapters.pi import pi_codec
from sessiontree.adapters.schema import BLOCK_CLASSES, MESSAGE_CLASSES
from sessiontree.domain import events as ev
from sessiontree.domain import messages as m
from sessiontree.domain.errors import SessionError

SID = strat.SESSION_ID
VERSION = 5
CODECS = {"native": native_codec(), "pi": pi_codec()}
DIALECTS = pytest.mark.parametrize("dialect", sorted(CODECS))
UNKNOWN_KEY, UNKNOWN_VALUE = "xNew", [1, {"a": None}]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- the bookkeeping of decoded values -----------------------------------------------------------


def bookkeeping(value: Any, path: str = "$") -> list[tuple[str, str, frozenset[str], frozenset[str], tuple[str, ...]]]:
    """``(path, class, absent, nulls, unknown keys)`` of every attrs value under ``value`` (itself
    included) that has an ``extra``: the entry, its message(s), content blocks, usage, cost."""
    found: list[tuple[str, str, frozenset[str], frozenset[str], tuple[str, ...]]] = []
    if not attrs.has(type(value)):
        return found
    if "extra" in attrs.fields_dict(type(value)):
        extra = value.extra
        found.append((
            path, type(value).__name__, frozenset(getattr(extra, "absent", ())), frozenset(getattr(extra, "nulls", ())),
            tuple(extra),
        ))
    for a in attrs.fields(type(value)):
        if a.name == "extra":
            continue
        item = getattr(value, a.name)
        if isinstance(item, tuple):
            for i, x in enumerate(item):
                found += bookkeeping(x, f"{path}.{a.name}[{i}]")
        else:
            found += bookkeeping(item, f"{path}.{a.name}")
    return found


def assert_paths_agree(codec: Codec, line: bytes) -> tuple[Any, Any]:
    """Decode ``line`` both ways; the events, their classes and their bookkeeping must agree.
    Returns (what ``decode_line`` gave, what the dict path gave)."""
    typed = codec.decode_line(line, SID, VERSION)
    via_dict = codec.decode_entry(orjson.loads(line), SID, VERSION)
    assert type(typed) is type(via_dict)
    assert typed == via_dict
    assert bookkeeping(typed) == bookkeeping(via_dict)
    return typed, via_dict


def typed_accepts(codec: Codec, line: bytes) -> bool:
    """Does the typed path itself (not the fallback) decode this line?"""
    return (codec._wire or codec._typed()).decode(line, SID, VERSION) is not None


# -- events the typed path must accept -------------------------------------------------------


def plain(value: Any) -> Any:
    """``value`` without anything the typed path refuses: every ``extra`` emptied, unknown
    blocks and messages dropped from lists, an unknown message replaced by a user message."""
    if isinstance(value, tuple):
        return tuple(plain(x) for x in value if not isinstance(x, (m.UnknownContent, m.UnknownMessage)))
    if isinstance(value, m.UnknownMessage):
        return m.UserMessage(content="stood in for an unknown role", timestamp=1)
    if not attrs.has(type(value)):
        return value
    changes: dict[str, Any] = {}
    for a in attrs.fields(type(value)):
        if not a.init:
            continue
        changes[a.name] = {} if a.name == "extra" else plain(getattr(value, a.name))
    return attrs.evolve(value, **changes)


known_entries = strat.entry_events(version=VERSION).filter(lambda e: not isinstance(e, ev.UnknownEntryAppended))
plain_entries = known_entries.map(plain)
# Half the draws are messages: they hold most of the nested values (blocks, usage, cost).
message_heavy = st.one_of(strat.entry_strategies(version=VERSION)[ev.MessageAppended], known_entries)


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


# -- (b) lines other producers write: fields left out, nulls, unknown fields -------------------------


def _tag_classes(codec: Codec, classes: tuple[type, ...]) -> dict[str, type]:
    return {codec.schemas[c].tag: c for c in classes}  # type: ignore[misc]


def wire_objects(codec: Codec, data: Any, cls: type, path: str = "$") -> list[tuple[str, type, dict[str, Any]]]:
    """``(path, class, dict)`` of every object of a known class in a parsed line: the entry,
    message(s), blocks, usage, cost (objects of unknown tags hold no bookkeeping: skipped)."""
    if not isinstance(data, dict):
        return []
    found = [(path, cls, data)]
    blocks, msgs = _tag_classes(codec, BLOCK_CLASSES), _tag_classes(codec, MESSAGE_CLASSES)
    for f in codec.schemas[cls].fields:
        value = data.get(f.wire)
        where = f"{path}.{f.wire}"
        if f.kind in ("value", "opt_value"):
            found += wire_objects(codec, value, f.nested, where)  # type: ignore[arg-type]
        elif f.kind == "message" and isinstance(value, dict) and value.get("role") in msgs:
            found += wire_objects(codec, value, msgs[value["role"]], where)
        elif f.kind in ("blocks", "content", "messages") and isinstance(value, list):
            tags, key = (msgs, "role") if f.kind == "messages" else (blocks, "type")
            for i, x in enumerate(value):
                if isinstance(x, dict) and x.get(key) in tags:
                    found += wire_objects(codec, x, tags[x[key]], f"{where}[{i}]")
    return found


def entry_class(codec: Codec, data: dict[str, Any]) -> type:
    return {codec.schemas[c].tag: c for c in ev.ENTRY_CLASSES}[data["type"]]  # type: ignore[return-value]


def rewrite(codec: Codec, cls: type, data: dict[str, Any], drop: set[str], null: set[str], add: bool) -> None:
    """Change one wire object in place, as another producer would have written it: the known
    keys in the writer's order (the tag first), ``drop`` left out, ``null`` written as null,
    the unknown keys after them and ``xNew`` last when ``add``."""
    schema = codec.schemas[cls]
    known = ([schema.tag_key] if schema.tag_key else []) + [f.wire for f in schema.fields]
    out: dict[str, Any] = {}
    for key in known:
        if key in drop:
            continue
        if key in null:
            out[key] = None
        elif key in data:
            out[key] = data[key]
    out.update((k, v) for k, v in data.items() if k not in schema.known)
    if add:
        out[UNKNOWN_KEY] = UNKNOWN_VALUE
    data.clear()
    data.update(out)


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


def ordered(value: Any) -> Any:
    """A parsed JSON value with its key order made part of equality."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [ordered(x) for x in value]
    return value


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
    (bookkeeping included), the typed path still takes the line, and writing the decoded
    event gives the producer's line again."""
    codec = CODECS[dialect]
    original, changed, _ = data.draw(_line_strategy(dialect, add_unknown=False))
    assert typed_accepts(codec, changed), changed
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
    the line, and it is written back byte for byte."""
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
            assert typed_accepts(codec, changed), changed
            typed, via_dict = assert_paths_agree(codec, changed)
            assert codec.encode_event(typed) == changed == codec.encode_event(via_dict), changed


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
