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
    UnknownMessage,
    UserMessage,
)
from sessiontree.adapters.jsonl_repo import JsonlSessionRepo
from sessiontree.adapters.pi_storage import PiSessionStorage
from sessiontree.domain.ids import counter_ids, fixed_clock

SID = "01a22719-3541-759d-a745-5e5f131c9378"
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


def write_lines(path: Path, objs: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in objs))
    return path


def header(version: int | None = 3, **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "session"}
    if version is not None:
        out["version"] = version
    return {**out, "id": SID, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w", **more}


def node(entry_type: str, entry_id: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {"type": entry_type, "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z", **fields}


def user_msg(text: str, ts: int = 1) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}


def assistant_msg(text: str, ts: int = 2) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "a",
        "provider": "p",
        "model": "m",
        "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                  "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.3}},
        "stopReason": "stop",
        "timestamp": ts,
    }


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


def test_a_marker_pi_appended_under_becomes_the_node_pi_sees(tmp_path):
    """Once pi has continued from a marker it is an ordinary custom entry, and contexts still agree."""
    path = copy_fixture("branches", tmp_path)
    session = open_pi(path)
    target = session.get_branch()[4].id
    session.move_to(target)
    marker_id = session.get_entries()[-1].id
    expected = session.build_context().messages
    with path.open("ab") as f:  # what pi writes when it resumes at the marker
        f.write(orjson.dumps(node("message", "p1c0ffee", marker_id, message=user_msg("from pi", 9))) + b"\n")
    reopened = Session(JsonlSessionStorage.open(path))
    assert reopened.get_entry(marker_id).type == "custom"
    assert [e.id for e in reopened.get_branch()][-2:] == [marker_id, "p1c0ffee"]
    assert reopened.build_context().messages[:-1] == expected


def test_an_append_after_pi_appended_is_a_conflict(tmp_path):
    """If pi appended since we read the file, our append is refused and the file is untouched."""
    path = copy_fixture("small", tmp_path)
    session = open_pi(path)
    with path.open("ab") as f:
        f.write(orjson.dumps(node("session_info", "p1c0ffee", session.leaf_id, name="pi")) + b"\n")
    before = path.read_bytes()
    with pytest.raises(SessionError) as caught:
        session.append_session_info("ours")
    assert caught.value.code == "conflict"
    assert path.read_bytes() == before


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
    assert orjson.loads(path.read_bytes().splitlines()[0]) == header()
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


# -- versions 1 and 2 ---------------------------------------------------------------------


def v1_file(path: Path) -> Path:
    return write_lines(
        path,
        [
            header(None, branchedFrom="/old.jsonl"),
            {"type": "message", "timestamp": "2025-12-01T00:00:01.000Z", "message": user_msg("one", 1)},
            {"type": "message", "timestamp": "2025-12-01T00:00:02.000Z", "message": assistant_msg("two", 2)},
            {"type": "message", "timestamp": "2025-12-01T00:00:03.000Z", "message": user_msg("three", 3)},
            {"type": "message", "timestamp": "2025-12-01T00:00:04.000Z", "message": assistant_msg("four", 4)},
            {"type": "compaction", "timestamp": "2025-12-01T00:00:05.000Z", "summary": "S", "firstKeptEntryIndex": 3, "tokensBefore": 9},
            {"type": "message", "timestamp": "2025-12-01T00:00:06.000Z",
             "message": {"role": "hookMessage", "customType": "h", "content": "hook", "display": True, "timestamp": 6}},
        ],
    )


def test_version_1_is_migrated_in_memory_deterministically(tmp_path):
    """A v1 file opens as one chain with ids derived from (session id, line), the same every time."""
    path = v1_file(tmp_path / "v1.jsonl")
    before = path.read_bytes()
    first, second = Session(JsonlSessionStorage.open(path)), Session(JsonlSessionStorage.open(path))
    ids = [e.id for e in first.get_entries()]
    assert ids == [e.id for e in second.get_entries()]
    assert all(len(i) == 8 for i in ids) and len(set(ids)) == 6
    assert [e.parent_id for e in first.get_entries()] == [None, *ids[:-1]]
    compaction = first.get_entries()[4]
    assert compaction.first_kept_entry_id == ids[2]
    roles = [m.role for m in first.build_context().messages]
    assert roles == ["compaction_summary", "user", "assistant", "custom"]
    assert first.header.version == 1 and first.header.extra == {"branchedFrom": "/old.jsonl"}
    assert path.read_bytes() == before


def test_version_1_ids_depend_on_the_session_id(tmp_path):
    """Two v1 files that differ only in their session id get different entry ids."""
    a = Session(JsonlSessionStorage.open(v1_file(tmp_path / "a.jsonl")))
    other = tmp_path / "b.jsonl"
    other.write_bytes(v1_file(tmp_path / "tmp.jsonl").read_bytes().replace(SID.encode(), b"other-session"))
    b = Session(JsonlSessionStorage.open(other))
    assert {e.id for e in a.get_entries()}.isdisjoint({e.id for e in b.get_entries()})


def test_version_1_files_are_read_only(tmp_path):
    """Appending to a v1 file is refused (pi would give every entry a new id) and writes nothing."""
    path = v1_file(tmp_path / "v1.jsonl")
    before = path.read_bytes()
    session = Session(JsonlSessionStorage.open(path))
    with pytest.raises(SessionError) as caught:
        session.append_session_info("x")
    assert caught.value.code == "storage" and "version 1" in caught.value.message
    assert path.read_bytes() == before


def test_version_2_renames_hook_messages_and_accepts_appends(tmp_path):
    """A v2 file's hookMessage role reads as custom, and appends keep the file readable."""
    path = write_lines(
        tmp_path / "v2.jsonl",
        [
            header(2),
            node("message", "a1", None, message=user_msg("hi")),
            node("message", "a2", "a1", message={"role": "hookMessage", "customType": "h", "content": "x", "display": False, "timestamp": 3}),
        ],
    )
    session = open_pi(path)
    assert session.get_entry("a2").message.role == "custom"
    assert path.read_bytes().count(b"hookMessage") == 1
    session.append_message(UserMessage(content="more", timestamp=4))
    reopened = Session(JsonlSessionStorage.open(path))
    assert kit.snapshot(reopened) == kit.snapshot(session)


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "code", "line"),
    [
        ([b'{"hello":"world"}'], "corrupt", 1),
        ([b'{"kind":"header","version":4,"id":"x","createdAt":1,"cwd":"/"}'], "corrupt", 1),
        ([b"not json at all"], "corrupt", 1),
        ([orjson.dumps(header(7))], "unsupported_version", 1),
        ([orjson.dumps(header()), orjson.dumps(node("message", "a1", "nope", message=user_msg("x")))], "corrupt", 2),
        (
            [orjson.dumps(header()), orjson.dumps(node("message", "a1", None, message=user_msg("x"))),
             orjson.dumps(node("label", "a1", "a1", targetId="a1"))],
            "corrupt",
            3,
        ),
        ([orjson.dumps(header()), orjson.dumps({"type": "message", "id": "a1", "parent_id": None, "timestamp": "t"})], "corrupt", 2),
        ([orjson.dumps(header()), b'{"type":"message",'], "corrupt", 2),
    ],
    ids=["neither-dialect", "pi-v4-log", "not-json", "unknown-version", "missing-parent", "duplicate-id", "snake-case-entry", "bad-json-line"],
)
def test_bad_files_raise_session_errors_naming_file_and_line(tmp_path, lines, code, line):
    """Bad input is a SessionError with the file and line, and the file is not rewritten."""
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    before = path.read_bytes()
    with pytest.raises(SessionError) as caught:
        Session(JsonlSessionStorage.open(path))
    assert (caught.value.code, caught.value.path, caught.value.line) == (code, str(path), line)
    assert path.read_bytes() == before


# -- pi 1.x context rules -------------------------------------------------------------------


def test_context_edits_follow_pis_rules(tmp_path):
    """The latest context_edit per target hides or replaces it, on the branch holding the edit."""
    path = write_lines(
        tmp_path / "edits.jsonl",
        [
            header(),
            node("message", "u1", None, message=user_msg("question")),
            node("message", "a1", "u1", message=assistant_msg("answer")),
            node("context_edit", "e1", "a1", targetId="u1", replacement={"content": "first edit"}),
            node("context_edit", "e2", "e1", targetId="u1", replacement={"content": [{"type": "text", "text": "second"}]}),
            node("context_edit", "e3", "e2", targetId="a1", replacement={"content": "short"}),
            node("message", "u2", "e3", message=user_msg("next")),
            node("context_edit", "e4", "u2", targetId="u2", replacement=None),
            node("context_edit", "x1", "a1", targetId="a1", replacement=None),
        ],
    )
    session = Session(JsonlSessionStorage.open(path))
    assert session.leaf_id == "x1"
    # On x1's branch only x1 applies (it hides a1); e1-e4 sit on another branch.
    assert [m.content for m in session.build_context().messages] == [(TextContent(text="question"),)]
    edited = session.build_context(leaf_id="e4").messages
    assert [(m.role, m.content) for m in edited] == [
        ("user", (TextContent(text="second"),)),
        ("assistant", (TextContent(text="short"),)),
    ]


def test_compaction_system_message_leads_and_kept_system_messages_drop(tmp_path):
    """A compaction's systemMessage comes before its summary; system messages it keeps are dropped."""
    system = {"role": "system", "content": "You are terse.", "timestamp": 5}
    path = write_lines(
        tmp_path / "system.jsonl",
        [
            header(),
            node("message", "s1", None, message={"role": "system", "content": "You are kind.", "timestamp": 1}),
            node("message", "u1", "s1", message=user_msg("q")),
            node("message", "s2", "u1", message={"role": "system", "content": "old", "timestamp": 2}),
            node("message", "a1", "s2", message=assistant_msg("a")),
            node("compaction", "c1", "a1", summary="S", firstKeptEntryId="u1", tokensBefore=3, systemMessage=system),
            node("usage", "g1", "c1", kind="cache_warm", provider="p", model="m", usage={"input": 1}),
            node("message", "s3", "g1", message={"role": "system", "content": "new", "timestamp": 6}),
        ],
    )
    session = Session(JsonlSessionStorage.open(path))
    messages = session.build_context().messages
    assert [m.role for m in messages] == ["system", "compaction_summary", "user", "assistant", "system"]
    assert messages[0] == UnknownMessage(role="system", data=system)
    assert session.get_session_stats().entries_by_type["usage"] == 1


def test_pi_context_rules_apply_to_native_copies_when_asked(tmp_path):
    """A native copy keeps context_edit entries verbatim; pi_context_options gives them pi's meaning."""
    from sessiontree.adapters.pi_convert import import_pi
    from sessiontree.adapters.pi_storage import pi_context_options

    src = write_lines(
        tmp_path / "edits.jsonl",
        [header(), node("message", "u1", None, message=user_msg("q")), node("context_edit", "e1", "u1", targetId="u1", replacement=None)],
    )
    import_pi(src, tmp_path / "native.jsonl")
    plain = Session(JsonlSessionStorage.open(tmp_path / "native.jsonl"))
    assert len(plain.build_context().messages) == 1
    assert plain.build_context(pi_context_options()).messages == []


def test_a_torn_last_line_is_ignored_then_cut_before_our_append(tmp_path):
    """A pi file cut short mid-line opens without it (with a warning); our append removes it first."""
    from sessiontree.adapters.jsonl_file import TornLineWarning

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
