"""Conversion between pi's dialect and the native one keeps every field, both ways."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
import sessiontree_pi as pi
import sessiontree_strategies as strat
import sessiontree_testkit as kit
from hypothesis import HealthCheck, given, settings

from sessiontree import JsonlSessionStorage, Session, SessionError, UserMessage
from sessiontree.domain.ids import counter_ids, fixed_clock
from sessiontree.pi.pi_convert import export_pi, import_pi
from sessiontree.pi.pi_storage import PiSessionStorage


def reopen(path: Path) -> Session:
    return Session(JsonlSessionStorage.open(path))


@pytest.mark.parametrize("name", ["small", "compaction", "branches"])
def test_pi_to_native_to_pi_gives_back_the_same_bytes(name, tmp_path):
    """A file pi wrote, imported then exported, is byte for byte the file pi wrote."""
    src = pi.fixtures_dir() / f"{name}.jsonl"
    imported = import_pi(src, tmp_path / "native.jsonl")
    exported = export_pi(tmp_path / "native.jsonl", tmp_path / "back.jsonl")
    assert (imported.source_dialect, imported.dest_dialect, exported.dest_dialect) == ("pi", "native", "pi")
    assert (tmp_path / "back.jsonl").read_bytes() == src.read_bytes()
    native = reopen(tmp_path / "native.jsonl")
    assert not isinstance(native.storage, PiSessionStorage)
    assert b"parentId" not in (tmp_path / "native.jsonl").read_bytes()
    assert kit.snapshot(native) == kit.snapshot(reopen(src))


def test_our_appends_to_a_pi_file_survive_the_round_trip(tmp_path):
    """Leaf markers, cleared labels and other appends come back unchanged from a native copy."""
    path = tmp_path / "pi.jsonl"
    shutil.copyfile(pi.fixtures_dir() / "branches.jsonl", path)
    session = Session(JsonlSessionStorage.open(path), clock=fixed_clock(kit.T0), id_generator=counter_ids())
    target = session.get_branch()[3].id
    session.append_label_change(target, None)
    session.move_to(target, summary={"summary": "left a branch", "details": {"files": []}})
    session.move_to(None)
    import_pi(path, tmp_path / "native.jsonl")
    native = reopen(tmp_path / "native.jsonl")
    assert [e.type for e in native.get_entries()[-4:]] == ["label", "leaf", "branch_summary", "leaf"]
    export_pi(tmp_path / "native.jsonl", tmp_path / "back.jsonl")
    assert (tmp_path / "back.jsonl").read_bytes() == path.read_bytes()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(strat.operations(max_size=20))
def test_native_to_pi_to_native_keeps_the_session(tmp_path_factory, ops):
    """Any native session exported to pi and imported back has the same entries and answers."""
    folder = tmp_path_factory.mktemp("convert")
    session = Session(
        JsonlSessionStorage.create(folder / "native.jsonl", cwd="/w", metadata={"k": 1}),
        clock=fixed_clock(kit.T0),
        id_generator=counter_ids(),
    )
    for op in ops:
        strat.apply_operation(session, op)
    export_pi(folder / "native.jsonl", folder / "pi.jsonl")
    import_pi(folder / "pi.jsonl", folder / "again.jsonl")
    again = reopen(folder / "again.jsonl")
    assert again.get_entries() == session.get_entries()
    assert again.header.metadata == {"k": 1}
    assert kit.snapshot(again) == kit.snapshot(session)
    assert reopen(folder / "pi.jsonl").build_context() == session.build_context()


def test_exporting_what_pi_ignores_is_reported(tmp_path):
    """Fields pi does not read (retained_tail, active tools) are kept and listed in the notes."""
    session = Session(JsonlSessionStorage.create(tmp_path / "n.jsonl"), id_generator=counter_ids())
    first = session.append_message(UserMessage(content="hi", timestamp=1))
    session.append_active_tools_change(["read"])
    session.append_compaction("s", first, 1, retained_tail=[UserMessage(content="kept", timestamp=1)])
    report = export_pi(tmp_path / "n.jsonl", tmp_path / "p.jsonl")
    assert len(report.notes) == 2 and report.entries == 3
    last = orjson.loads((tmp_path / "p.jsonl").read_bytes().splitlines()[-1])
    assert last["retainedTail"] == [{"role": "user", "content": "kept", "timestamp": 1}]


def test_an_existing_destination_is_never_overwritten(tmp_path):
    """Converting onto an existing file is already_exists and leaves both files as they were."""
    dest = tmp_path / "dest.jsonl"
    dest.write_bytes(b"keep me\n")
    with pytest.raises(SessionError) as caught:
        import_pi(pi.fixtures_dir() / "small.jsonl", dest)
    assert caught.value.code == "already_exists"
    assert dest.read_bytes() == b"keep me\n"


def test_a_version_1_file_exports_as_version_3_with_its_derived_ids(tmp_path):
    """Exporting an old pi file writes the migrated version 3 session, ids included."""
    lines = [
        {"type": "session", "id": "old-session", "timestamp": "2025-12-01T00:00:00.000Z", "cwd": "/w"},
        {"type": "message", "timestamp": "2025-12-01T00:00:01.000Z", "message": {"role": "user", "content": "a", "timestamp": 1}},
        {"type": "session_info", "timestamp": "2025-12-01T00:00:02.000Z", "name": "old"},
    ]
    src = tmp_path / "v1.jsonl"
    src.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in lines))
    export_pi(src, tmp_path / "v3.jsonl")
    out = [orjson.loads(raw) for raw in (tmp_path / "v3.jsonl").read_bytes().splitlines()]
    assert out[0]["version"] == 3
    original, exported = reopen(src), reopen(tmp_path / "v3.jsonl")
    assert [e.id for e in exported.get_entries()] == [e.id for e in original.get_entries()]
    assert out[2]["parentId"] == out[1]["id"]
    assert kit.snapshot(exported) == kit.snapshot(original)


def test_converting_something_that_is_not_a_session_fails_cleanly(tmp_path):
    """A source that is no session file is a SessionError naming it; nothing is written."""
    src = tmp_path / "junk.jsonl"
    src.write_bytes(b'{"not":"a session"}\n')
    with pytest.raises(SessionError) as caught:
        export_pi(src, tmp_path / "out.jsonl")
    assert caught.value.path == str(src) and caught.value.line == 1
    assert not (tmp_path / "out.jsonl").exists()
