"""The JSONL persistence module against eventsourcing's own recorder test cases, and its line format.

Of ``eventsourcing.tests.persistence`` only ``AggregateRecorderTestCase`` applies: the
module has no application recorder (files have no global order: no notification log),
so ``ApplicationRecorderTestCase``, ``ProcessRecorderTestCase``,
``NonInterleavingNotificationIDsBaseCase`` and ``InfrastructureFactoryTestCase`` (which
builds all four recorders) do not (docs/architecture.md).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from uuid import uuid4

import orjson
import pytest
from eventsourcing.persistence import InfrastructureFactory, IntegrityError, StoredEvent
from eventsourcing.tests.persistence import AggregateRecorderTestCase

import sessiontree_testkit as kit
from sessiontree.adapters.jsonl_recorder import (
    GENERIC_TYPE,
    JsonlAggregateRecorder,
    JsonlFactory,
    decode_stored,
    encode_stored,
    line_type,
)
from sessiontree.adapters.storage import SessionMapper
from sessiontree.domain.aggregate import SessionAggregate


class TestJsonlAggregateRecorder(AggregateRecorderTestCase):
    """eventsourcing's AggregateRecorderTestCase, run against a directory of JSONL files."""

    def setUp(self) -> None:
        self.folder = Path(tempfile.mkdtemp())

    def tearDown(self) -> None:
        shutil.rmtree(self.folder)

    def create_recorder(self) -> JsonlAggregateRecorder:
        return JsonlAggregateRecorder(self.folder)


class TestJsonlAggregateRecorderWithFsync(TestJsonlAggregateRecorder):
    """The same test cases with an fsync after every append."""

    def create_recorder(self) -> JsonlAggregateRecorder:
        return JsonlAggregateRecorder(self.folder, durability="fsync")


def session_events() -> list[object]:
    agg = SessionAggregate.create(session_id=kit.SESSION_ID, timestamp=kit.T0_ISO, cwd="/p")
    first = agg.append_message(kit.user("hi"), id="aaaaaaaa", timestamp=kit.T0_ISO)
    agg.append_label_change(first, "x", id="bbbbbbbb", timestamp=kit.T0_ISO)
    return agg.collect_events()


def test_session_lines_are_stored_verbatim_with_topics_from_their_type(tmp_path: Path) -> None:
    """A session event's state is written as its line; reading derives version and topic from the line."""
    mapper = SessionMapper()
    stored = [mapper.to_stored_event(e) for e in session_events()]
    recorder = JsonlAggregateRecorder(tmp_path)
    recorder.insert_events(stored)
    path = tmp_path / f"{kit.SESSION_ID}.jsonl"
    assert path.read_bytes() == b"".join(s.state + b"\n" for s in stored)
    again = recorder.select_events(kit.SESSION_ID)
    assert again == stored
    assert [s.topic for s in again] == ["sessiontree:session", "sessiontree:message", "sessiontree:label"]
    assert [mapper.to_domain_event(s) for s in again] == session_events()


def test_other_states_become_readable_generic_lines(tmp_path: Path) -> None:
    """A stored event that is not a session line is one readable JSON line keeping topic and state."""
    recorder = JsonlAggregateRecorder(tmp_path)
    oid = uuid4()
    events = [
        StoredEvent(oid, 0, "app.module:Created", b'{"name":"x"}'),
        StoredEvent(oid, 1, "app.module:Renamed", b"\xff\x00binary"),
        StoredEvent(oid, 2, "sessiontree:message", b'{"type":"label","id":"x"}'),
    ]
    recorder.insert_events(events)
    lines = (tmp_path / f"{oid}.jsonl").read_bytes().splitlines()
    first = orjson.loads(lines[0])
    assert first == {"type": GENERIC_TYPE, "originator_version": 0, "topic": "app.module:Created", "state": '{"name":"x"}'}
    assert "state_b64" in orjson.loads(lines[1])
    assert orjson.loads(lines[2])["topic"] == "sessiontree:message"  # its type says label: kept generic
    assert recorder.select_events(oid) == events
    assert recorder.select_events(oid, gt=0, lte=1) == events[1:2]


def test_a_file_starting_past_version_one_keeps_its_versions(tmp_path: Path) -> None:
    """A first event that is not version 1 is written as a generic line, so later line numbers still give versions."""
    mapper = SessionMapper()
    stored = [mapper.to_stored_event(e) for e in session_events()]
    shifted = [StoredEvent(s.originator_id, s.originator_version + 4, s.topic, s.state) for s in stored]
    recorder = JsonlAggregateRecorder(tmp_path)
    recorder.insert_events(shifted)
    lines = (tmp_path / f"{kit.SESSION_ID}.jsonl").read_bytes().splitlines()
    assert orjson.loads(lines[0])["type"] == GENERIC_TYPE and lines[1:] == [s.state for s in stored[1:]]
    assert JsonlAggregateRecorder(tmp_path).select_events(kit.SESSION_ID) == shifted


def test_line_type_reads_the_prefix_or_parses(tmp_path: Path) -> None:
    """The type comes from the leading bytes, or from parsing when the key order differs."""
    assert line_type(b'{"type":"message","id":"x"}') == "message"
    assert line_type(b'{"id":"x","type":"leaf"}') == "leaf"
    with pytest.raises(ValueError):
        line_type(b'{"id":"x"}')
    generic = encode_stored(StoredEvent("o", 7, "t", b"s"))
    assert decode_stored(generic, "o", 7) == StoredEvent("o", 7, "t", b"s")
    with pytest.raises(ValueError):
        decode_stored(generic, "o", 8)


def test_stale_or_gapped_versions_raise_integrity_error(tmp_path: Path) -> None:
    """A taken version or a gap raises eventsourcing's IntegrityError and writes nothing."""
    a = JsonlAggregateRecorder(tmp_path)
    b = JsonlAggregateRecorder(tmp_path)
    a.insert_events([StoredEvent("s1", 1, "t", b"one")])
    b.insert_events([StoredEvent("s1", 2, "t", b"two")])  # b catches up under the lock
    with pytest.raises(IntegrityError, match="taken"):
        a.insert_events([StoredEvent("s1", 2, "t", b"again")])
    with pytest.raises(IntegrityError, match="not the next one"):
        a.insert_events([StoredEvent("s1", 5, "t", b"gap")])
    assert [s.state for s in a.select_events("s1")] == [b"one", b"two"]
    assert a.select_events("s1", desc=True, limit=1)[0].state == b"two"


def test_append_lines_checks_versions_like_insert_events(tmp_path: Path) -> None:
    """``append_lines`` (session lines a storage holds already) takes the same lock, catches
    up with other writers and refuses a taken or skipped version; a file starts at 1."""
    a = JsonlAggregateRecorder(tmp_path)
    b = JsonlAggregateRecorder(tmp_path)
    line = b'{"type":"custom","id":"%d"}'
    with pytest.raises(IntegrityError, match=r"not the next one \(1 is\)"):
        a.append_lines("s1", 2, [line % 2])
    a.append_lines("s1", 1, [line % 1, line % 2])
    b.append_lines("s1", 3, [line % 3])  # b catches up under the lock
    with pytest.raises(IntegrityError, match="taken"):
        a.append_lines("s1", 3, [line % 9])
    with pytest.raises(IntegrityError, match="not the next one"):
        a.append_lines("s1", 5, [line % 5])
    a.append_lines("s1", 4, [line % 4])  # a caught up too
    assert [s.state for s in b.select_events("s1")] == [line % i for i in range(1, 5)]
    assert [s.topic for s in b.select_events("s1")] == ["sessiontree:custom"] * 4


def test_select_reads_a_whole_last_line_without_newline_but_not_a_torn_one(tmp_path: Path) -> None:
    """A complete last line lacking its newline is an event; a torn one is not."""
    recorder = JsonlAggregateRecorder(tmp_path)
    recorder.insert_events([StoredEvent("s1", 1, "t", b"one"), StoredEvent("s1", 2, "t", b"two")])
    path = tmp_path / "s1.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole[:-1])
    assert [s.state for s in JsonlAggregateRecorder(tmp_path).select_events("s1")] == [b"one", b"two"]
    path.write_bytes(whole[:-5])
    assert [s.state for s in JsonlAggregateRecorder(tmp_path).select_events("s1")] == [b"one"]


def test_unsafe_originator_ids_are_refused(tmp_path: Path) -> None:
    """An originator id that is not a plain file name never becomes a path."""
    recorder = JsonlAggregateRecorder(tmp_path)
    with pytest.raises(Exception, match="safe file name"):
        recorder.insert_events([StoredEvent("../escape", 1, "t", b"x")])
    assert not (tmp_path.parent / "escape.jsonl").exists()


def test_the_factory_is_a_persistence_module(tmp_path: Path) -> None:
    """PERSISTENCE_MODULE=sessiontree.adapters.jsonl_recorder gives JSONL recorders for events and snapshots."""
    factory = InfrastructureFactory.construct(
        {"PERSISTENCE_MODULE": "sessiontree.adapters.jsonl_recorder", "JSONL_DIRECTORY": str(tmp_path), "JSONL_DURABILITY": "fsync"}
    )
    assert isinstance(factory, JsonlFactory)
    events = factory.aggregate_recorder()
    snapshots = factory.aggregate_recorder("snapshots")
    assert isinstance(events, JsonlAggregateRecorder) and events.durability == "fsync"
    assert isinstance(snapshots, JsonlAggregateRecorder) and snapshots.directory == tmp_path / "snapshots"
    events.insert_events([StoredEvent("x", 1, "t", b"s")])
    assert (tmp_path / "x.jsonl").exists()
    assert factory.tracking_recorder().max_tracking_id("app") is None
