"""Opening, reading and appending to pi session files through ``JsonlSessionStorage.open``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
import sessiontree_pi as pi
import sessiontree_strategies as strat
import sessiontree_testkit as kit
from hypothesis import HealthCheck, given, settings

from sessiontree import (
    AssistantMessage,
    JsonlSessionStorage,
    Session,
    SessionError,
    TextContent,
    UserMessage,
)
from sessiontree.domain.ids import counter_ids, fixed_clock
from sessiontree.pi.pi_storage import PiSessionStorage
from sessiontree.repository import JsonlSessionRepo

SID = pi.SESSION_ID
FIXTURE_NAMES = ("small", "compaction", "branches")
# Every shared fixture with its golden (a placeholder when the folder is missing: the test
# then fails in CI and is skipped elsewhere, through pi.fixtures_dir()).
ALL_FIXTURES = sorted(p.stem for p in pi.FIXTURES.glob("*.jsonl")) or ["(no fixtures)"]


def copy_fixture(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / f"{name}.jsonl"
    shutil.copyfile(pi.fixtures_dir() / f"{name}.jsonl", dest)
    return dest


def open_pi(path: Path, **kwargs: Any) -> Session:
    return Session(
        JsonlSessionStorage.open(path, **kwargs), clock=fixed_clock(kit.T0), id_generator=counter_ids("st", 8)
    )


# -- the shared fixtures ------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_fixtures_match_pis_goldens(name):
    """Each shared pi fixture opens as pi sees it: leaf, path, name, labels, tree and context."""
    folder = pi.fixtures_dir()
    assert (folder / f"{name}.expected.json").is_file(), f"fixture {name} has no golden"
    session = Session(JsonlSessionStorage.open(folder / f"{name}.jsonl"))
    expected = json.loads((folder / f"{name}.expected.json").read_text())
    assert isinstance(session.storage, PiSessionStorage)
    assert pi.pi_view(session) == pi.expected_view(expected)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_opening_and_reading_never_writes_the_file(name, tmp_path):
    """Opening a pi file and asking every question leaves its bytes and mtime untouched."""
    path = copy_fixture(name, tmp_path)
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns
    session = open_pi(path)
    session.build_context()
    session.get_session_stats()
    session.get_tree()
    list(session.replay())
    session.close()
    assert path.read_bytes() == before
    assert path.stat().st_mtime_ns == mtime


def test_session_queries_work_on_a_pi_file():
    """Stats, labels, children and the tree work on a pi file as on any session."""
    session = Session(JsonlSessionStorage.open(pi.fixtures_dir() / "branches.jsonl"))
    stats = session.get_session_stats()
    assistants = [e.message for e in session.find_entries("message") if isinstance(e.message, AssistantMessage)]
    assert stats.assistant_messages == len(assistants) == 12
    assert stats.input == sum(m.usage.input for m in assistants)
    assert stats.cost_total == pytest.approx(sum(m.usage.cost.total for m in assistants))
    assert stats.branch.entry_count == len(session.get_branch())
    assert sorted(session.get_labels().values()) == ["approach-b", "before-fork"]
    fork_points = [n for n in session.get_entries() if len(session.get_children(n.id)) > 1]
    assert len(fork_points) == 2


def test_time_travel_on_a_pi_file_equals_reading_a_prefix(tmp_path):
    """A view at version k of a pi file equals the session read from its first k lines."""
    path = copy_fixture("branches", tmp_path)
    session = open_pi(path)
    lines = path.read_bytes().splitlines(keepends=True)
    for version in (1, 5, 14, 20, 31):
        prefix = tmp_path / f"prefix{version}.jsonl"
        prefix.write_bytes(b"".join(lines[:version]))
        view, reread = session.at(version), Session(JsonlSessionStorage.open(prefix))
        assert view.leaf_id == reread.leaf_id
        assert view.build_context() == reread.build_context()
        assert view.get_labels() == reread.get_labels()
    middle = session.get_entries()[10]
    assert session.as_of(middle.timestamp).leaf_id is not None


def test_a_pi_session_forks_through_the_repo(tmp_path):
    """A pi session in a repository folder forks like any other: same ids, same context."""
    shutil.copyfile(pi.fixtures_dir() / "branches.jsonl", tmp_path / "01a22719-520e-73c5-90fe-20a5781271ca.jsonl")
    repo = JsonlSessionRepo(tmp_path)
    source = repo.open("01a22719-520e-73c5-90fe-20a5781271ca")
    target = source.get_branch()[-3].id
    fork = repo.fork(source.id, target, position="at")
    assert [e.id for e in fork.get_branch()][: len(source.get_branch(target))] == [e.id for e in source.get_branch(target)]
    assert fork.build_context().messages == source.build_context(leaf_id=target).messages


# -- appending ----------------------------------------------------------------------------


def test_appends_are_written_in_pis_dialect_and_read_back(tmp_path):
    """Entries appended to a pi file are pi lines, and reopening gives the same session."""
    path = copy_fixture("small", tmp_path)
    session = open_pi(path)
    first = session.get_entries()[2].id
    session.append_message(UserMessage(content=[TextContent(text="more")], timestamp=1768467700000))
    session.append_model_change("openai", "gpt-5")
    session.append_label_change(first, None)
    session.append_session_info("Renamed")
    session.append_compaction("sum", first, 100)
    new_lines = path.read_bytes().splitlines()[-5:]
    kinds = [orjson.loads(raw) for raw in new_lines]
    assert [k["type"] for k in kinds] == ["message", "model_change", "label", "session_info", "compaction"]
    assert all("parentId" in k and "parent_id" not in k and "chain" not in k for k in kinds)
    assert "label" not in kinds[2] and kinds[4]["firstKeptEntryId"] == first
    assert kinds[0]["timestamp"].endswith("Z") and kinds[0]["message"]["timestamp"] == 1768467700000
    reopened = Session(JsonlSessionStorage.open(path))
    assert kit.snapshot(reopened) == kit.snapshot(session)


def test_move_to_is_a_marker_that_reads_back_as_a_leaf_entry(tmp_path):
    """A leaf move is stored as pi's custom marker and read back as the same leaf entry."""
    path = copy_fixture("branches", tmp_path)
    session = open_pi(path)
    target = session.get_branch()[4].id
    session.move_to(target)
    marker = orjson.loads(path.read_bytes().splitlines()[-1])
    assert marker["type"] == "custom" and marker["parentId"] == target
    reopened = Session(JsonlSessionStorage.open(path))
    assert reopened.leaf_id == session.leaf_id == target
    assert reopened.get_entries()[-1] == session.get_entries()[-1]
    assert reopened.build_context() == session.build_context()
    log = reopened._agg.log  # the log's parent link is the leaf record's own (the leaf it left)
    assert log.parent_of(len(log) - 1) == reopened.get_entries()[-1].parent_id == session.get_entries()[-2].id


def test_a_pi_dialect_file_made_by_the_plain_jsonl_storage_records_leaf_moves_as_pi_does(tmp_path):
    """``JsonlSessionStorage.create(codec=pi_codec())`` writes a leaf move as pi's custom
    marker line (as ``PiSessionStorage`` does), which reads back as the leaf."""
    from sessiontree.pi.pi import pi_codec

    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path, codec=pi_codec()))
    first = session.append_message(UserMessage(content="hi"))
    session.append_message(UserMessage(content="again"))
    session.move_to(first)
    marker = orjson.loads(path.read_bytes().splitlines()[-1])
    assert (marker["type"], marker["customType"], marker["parentId"]) == ("custom", "sessiontree/leaf", first)
    reopened = Session(JsonlSessionStorage.open(path))
    assert reopened.leaf_id == first and reopened.get_entries() == session.get_entries()


def test_a_marker_pi_appended_under_becomes_the_node_pi_sees(tmp_path):
    """Once pi has continued from a marker it is an ordinary custom entry, and contexts still agree."""
    path = copy_fixture("branches", tmp_path)
    session = open_pi(path)
    target = session.get_branch()[4].id
    session.move_to(target)
    marker_id = session.get_entries()[-1].id
    expected = session.build_context().messages
    with path.open("ab") as f:  # what pi writes when it resumes at the marker
        f.write(orjson.dumps(pi.pi_node("message", "p1c0ffee", marker_id, message=pi.user_msg("from pi", 9))) + b"\n")
    reopened = Session(JsonlSessionStorage.open(path))
    assert reopened.get_entry(marker_id).type == "custom"
    assert [e.id for e in reopened.get_branch()][-2:] == [marker_id, "p1c0ffee"]
    assert reopened.build_context().messages[:-1] == expected


def test_an_append_after_pi_appended_takes_pis_line_in_first(tmp_path):
    """If pi appended since we read the file, our append takes pi's line in and goes after it (under our leaf);
    with ``if_version`` it is refused instead and the file is untouched."""
    path = copy_fixture("small", tmp_path)
    session = open_pi(path)
    leaf, read = session.leaf_id, session.version
    with path.open("ab") as f:
        f.write(orjson.dumps(pi.pi_node("session_info", "p1c0ffee", session.leaf_id, name="pi")) + b"\n")
    before = path.read_bytes()
    with pytest.raises(SessionError) as caught:
        session.append_session_info("ours", if_version=read)
    assert caught.value.code == "conflict"
    assert path.read_bytes() == before
    ours = session.append_session_info("ours")
    assert session.entry("p1c0ffee").parent_id == leaf and session.entry(ours).parent_id == leaf
    again = open_pi(path)
    assert [e.id for e in again.get_entries()][-2:] == ["p1c0ffee", ours] and again.get_session_name() == "ours"


def test_a_retained_tail_compaction_is_refused_on_a_pi_file(tmp_path):
    """pi ignores retained_tail, so a compaction carrying one is refused and nothing is written."""
    path = copy_fixture("small", tmp_path)
    session = open_pi(path)
    before = path.read_bytes()
    with pytest.raises(SessionError) as caught:
        session.append_compaction("s", None, 1, retained_tail=[UserMessage(content="kept", timestamp=1)])
    assert caught.value.code == "invalid_entry"
    assert path.read_bytes() == before
    assert len(session.get_entries()) == 13


def test_create_makes_a_new_pi_file(tmp_path):
    """PiSessionStorage.create writes pi's header and the session reopens as a pi session."""
    path = tmp_path / "new.jsonl"
    session = Session(PiSessionStorage.create(path, cwd="/w", session_id=SID, timestamp="2026-01-01T00:00:00.000Z"))
    session.append_message(UserMessage(content="hi", timestamp=1))
    assert orjson.loads(path.read_bytes().splitlines()[0]) == pi.pi_header()
    assert isinstance(JsonlSessionStorage.open(path), PiSessionStorage)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(strat.operations(max_size=20))
def test_random_work_on_a_pi_file_reopens_identically(tmp_path_factory, ops):
    """Whatever a session does to a pi file, reopening the file gives the same session."""
    path = tmp_path_factory.mktemp("pi") / "s.jsonl"
    session = Session(PiSessionStorage.create(path, cwd="/w"), clock=fixed_clock(kit.T0), id_generator=counter_ids())
    for op in ops:
        if op[0] == "compaction" and op[2] == "tail":
            continue  # refused on pi files (see the test above)
        strat.apply_operation(session, op)
    reopened = Session(JsonlSessionStorage.open(path))
    assert kit.snapshot(reopened) == kit.snapshot(session)


def test_a_torn_last_line_is_ignored_then_cut_before_our_append(tmp_path):
    """A pi file cut short mid-line opens without it (with a warning); our append removes it first."""
    from sessiontree.storage.jsonl_file import TornLineWarning

    path = copy_fixture("small", tmp_path)
    intact = path.read_bytes()
    path.write_bytes(intact + b'{"type":"message","id":"torn')
    with pytest.warns(TornLineWarning):
        session = open_pi(path)
    assert len(session.get_entries()) == 13
    with pytest.warns(TornLineWarning):
        session.append_session_info("after the tear")
    lines = path.read_bytes().splitlines()
    assert path.read_bytes().startswith(intact) and len(lines) == 15
    assert orjson.loads(lines[-1])["name"] == "after the tear"
