"""Whole-session passes in bounded memory (issue 19, part 4): verify, export and replay read a session once, keeping
no entry they went through, and give exactly what the whole reads they replace gave, damaged files included."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import sessiontree_strategies as strat
import sessiontree_testkit as kit
from sessiontree_streamkit import damaged, lines_of, salvage_reading, whole_conversion, whole_steps, write_session

from sessiontree import JsonlSessionStorage, Session, SessionError
from sessiontree.audit.verify import verify
from sessiontree.cli.replay_steps import fingerprint, mark_of, steps
from sessiontree.pi import pi_convert
from sessiontree.pi.pi import pi_codec
from sessiontree.wire.codec import native_codec

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture])
pytestmark = pytest.mark.filterwarnings("ignore::sessiontree.storage.jsonl_file.TornLineWarning",
                                        "ignore::sessiontree.storage.jsonl_scan.DuplicateKeyWarning")


@SETTINGS
@given(ops=strat.operations(), data=st.data())
def test_verify_of_a_pi_file_reports_what_salvage_reads(tmp_path_factory: Any, ops: list[tuple[Any, ...]], data: Any) -> None:
    """A pi file checked line by line gives salvage mode's report: the same bad lines with the same reasons, the same
    number of entries, the same repeated-key warnings; however the file was damaged."""
    folder = tmp_path_factory.mktemp("stream")
    lines = lines_of(write_session(folder / "made.jsonl", ops, "pi"))
    raw, _ = data.draw(damaged(lines))
    path = folder / "s.jsonl"
    path.write_bytes(raw)
    report = verify(path)
    if report.dialect != "pi":  # the header itself was damaged: nothing of pi's is read
        assert not report.ok and report.first_bad_line == 1
        return
    expected = salvage_reading(path, raw.split(b"\n")[: report.lines])
    assert [(p.line, p.message) for p in report.problems] == expected["problems"]
    assert report.entries == expected["entries"]
    assert [(w.line, w.message) for w in report.warnings if "twice" in w.message] == expected["duplicates"]


@SETTINGS
@given(ops=strat.operations(), source=st.sampled_from(["native", "pi"]), dest=st.sampled_from(["native", "pi"]),
       batch=st.integers(1, 5), data=st.data())
def test_export_writes_what_a_whole_read_wrote(tmp_path_factory: Any, ops: list[tuple[Any, ...]], source: str, dest: str,
                                               batch: int, data: Any) -> None:
    """Converting entry by entry, in batches of any size, writes the bytes the whole read wrote (chain included), or
    refuses a damaged file with the same error and leaves no file."""
    folder = tmp_path_factory.mktemp("stream")
    lines = lines_of(write_session(folder / "made.jsonl", ops, source))
    raw, _ = data.draw(damaged(lines))
    path = folder / "s.jsonl"
    path.write_bytes(raw)
    codec = pi_codec() if dest == "pi" else native_codec()
    try:
        expected: Any = whole_conversion(path, codec)
    except SessionError as exc:
        expected = exc
    out = folder / "out.jsonl"
    with mock.patch.object(pi_convert, "BATCH", batch):
        try:
            conversion = pi_convert.convert(path, out, codec)
        except SessionError as exc:
            assert isinstance(expected, SessionError), exc
            assert (exc.code, exc.line, exc.message) == (expected.code, expected.line, expected.message)
            assert not out.exists()
            return
    assert not isinstance(expected, SessionError), expected
    assert out.read_bytes() == expected[0] and conversion.entries == expected[1]


@SETTINGS
@given(ops=strat.operations(), dialect=st.sampled_from(["native", "pi"]), data=st.data())
def test_replay_steps_are_those_of_the_whole_read(tmp_path_factory: Any, ops: list[tuple[Any, ...]], dialect: str,
                                                    data: Any) -> None:
    """Stepping with the context kept as fingerprints, entries not kept, gives the steps the walk holding every
    message gave, from any first event to any last."""
    path = write_session(tmp_path_factory.mktemp("stream") / "s.jsonl", ops, dialect)
    with Session(JsonlSessionStorage.open(path)) as session:
        start = data.draw(st.integers(1, session.version), label="from")
        end = data.draw(st.integers(start, session.version), label="to")
        streamed = [(v, e.originator_id if v == 1 else e.id, b, a, r, added, n)
                    for v, e, b, a, r, added, n in steps(session, start, end)]
    with Session(JsonlSessionStorage.open(path)) as session:
        assert streamed == whole_steps(session, start, end)


def test_a_pass_keeps_no_entry_and_gives_back_what_reads_give(tmp_path: Path) -> None:
    """After a pass (replay) over a mapped file the log holds no entry but a pi leaf marker (its line reads as
    another entry); every entry read afterwards is the one a fresh open gives."""
    path = tmp_path / "s.jsonl"
    from sessiontree.pi.pi_storage import PiSessionStorage

    session = kit.open_session(PiSessionStorage.create(path, cwd="/p", session_id=kit.SESSION_ID))
    first = session.append_message(kit.user("q"))
    session.append_message(kit.assistant("a"))
    session.move_to(first)
    session.close()
    with Session(JsonlSessionStorage.open(path)) as fresh:
        expected = fresh.get_entries()
    with Session(JsonlSessionStorage.open(path)) as session:
        assert [step.event for step in session.replay()][1:] == expected
        items = session._agg.log._items
        assert [item is not None for item in items] == [False, False, True] and items[2].type == "leaf"
        assert session.get_entries() == expected and session.leaf_id == first


@settings(max_examples=200, deadline=None)
@given(a=strat.messages, b=strat.messages)
def test_fingerprints_are_equal_exactly_when_messages_are(a: Any, b: Any) -> None:
    """Equal messages share a fingerprint and a mark (dicts in any order, an Extra like its plain dict); unequal ones
    do not."""
    for mark in (fingerprint, mark_of):
        assert mark(a) == mark(copy.deepcopy(a))
        assert (mark(a) == mark(b)) == (a == b)


def test_fingerprints_follow_equality_not_layout() -> None:
    """A dict's order does not count, a list is not a tuple, and 1 == 1.0 as for ``==``."""
    assert fingerprint({"a": 1, "b": [2]}) == fingerprint({"b": [2], "a": 1.0})
    assert fingerprint([1, 2]) != fingerprint((1, 2))
    assert fingerprint({"a": 1}) != fingerprint({"a": 2}) and fingerprint({"a": 1}) != fingerprint({"b": 1})
    assert fingerprint(kit.user("x")) != fingerprint(kit.user("y"))
    call = kit.assistant("x", tool_calls=[strat.m.ToolCall(id="c", name="read", arguments={"path": "a"})])
    other = attrs.evolve(call, content=(call.content[0], attrs.evolve(call.content[1], arguments={"path": "b"})))
    assert fingerprint(call) != fingerprint(other) and mark_of(call) != mark_of(other) and call != other
    extra = strat.m.Extra({"z": 1, "y": [2]}, frozenset({"timestamp"}))
    assert mark_of(attrs.evolve(call, extra=extra)) == mark_of(attrs.evolve(call, extra={"y": [2], "z": 1}))
    assert mark_of(kit.user("x")) != mark_of(strat.m.CustomMessage(custom_type="x", content="x"))
