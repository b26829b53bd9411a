"""Archives of pruned sessions on every backend: the archive holds the log byte for byte, verifies, opens read-only
with the same context; a failure to write one stops the pruning before that session is deleted."""

from __future__ import annotations

import gzip
import os
import stat
from pathlib import Path

import pytest
import sessiontree_testkit as kit
from sessiontree_prunekit import SetClock, ids, make_session, stored

from sessiontree import PruneError, SessionError, open_session, verify
from sessiontree.repository import SessionRepo
from sessiontree.retention import archive as archive_module
from sessiontree.retention import prune as store_retention


def test_the_archive_holds_the_log_and_verifies(aged: SessionRepo, clock: SetClock, tmp_path: Path) -> None:
    """Each archive is the session's stored lines, gzip-compressed, 0600 in a 0700 folder; verify passes on it with
    the head the live log had."""
    sid = make_session(aged, clock, 120, name="kept for audit", label=True)
    lines = stored(aged, sid)
    with aged.open(sid) as live:
        head = verify(live).head
    result = aged.prune(older_than="90d", keep_labelled=False, archive=tmp_path / "archive", now=kit.T0)
    path = Path(result.sessions[0].archive)
    assert path == tmp_path / "archive" / f"{sid}.jsonl.gz" and result.pruned == (sid,)
    assert gzip.decompress(path.read_bytes()) == b"".join(line + b"\n" for line in lines)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    report = verify(path)
    assert report.ok and report.chained and report.head == head and report.entries == len(lines) - 1


def test_the_archive_opens_read_only_with_the_same_context(aged: SessionRepo, clock: SetClock, tmp_path: Path) -> None:
    """open_session(archive) gives the same entries, name, labels and context; an append is refused, clearly."""
    clock.now = kit.T0
    session = aged.create(cwd="/p", name="to archive")
    ids_ = kit.conversation(session)
    session.move_to(ids_["u1"], {"summary": "back to the start"})
    before = (session.get_entries(), session.get_session_name(), session.get_labels(), session.build_context())
    session.close()
    result = aged.prune(older_than="1d", keep_labelled=False, archive=tmp_path / "a", now=kit.T0.replace(year=2027))
    with open_session(result.sessions[0].archive) as archived:
        assert (archived.get_entries(), archived.get_session_name(), archived.get_labels(),
                archived.build_context()) == before
        assert verify(archived).ok
        with pytest.raises(SessionError, match="archive, read-only") as info:
            archived.append_message(kit.user("more"))
        assert info.value.code == "storage"


def test_a_dry_run_with_an_archive_writes_nothing(aged: SessionRepo, clock: SetClock, tmp_path: Path) -> None:
    """The dry run names each archive it would write, and writes none (not even the folder)."""
    sid = make_session(aged, clock, 120)
    plan = aged.prune(older_than="90d", archive=tmp_path / "a", dry_run=True, now=kit.T0)
    assert plan.sessions[0].archive == os.path.join(tmp_path / "a", f"{sid}.jsonl.gz")
    assert not (tmp_path / "a").exists() and ids(aged) == {sid}


def _failing_after(monkeypatch: pytest.MonkeyPatch, good: int, error: OSError) -> list[Path]:
    """Make archive writes fail after ``good`` whole archives; the paths of those written."""
    real = archive_module._place
    written: list[Path] = []

    def place(folder: Path, target: Path, data: bytes) -> None:
        if len(written) >= good:
            raise error
        real(folder, target, data)
        written.append(target)

    monkeypatch.setattr(archive_module, "_place", place)
    return written


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), OSError(5, "Input/output error")])
def test_an_archive_that_cannot_be_written_stops_before_its_session_is_deleted(
    aged: SessionRepo, clock: SetClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: OSError,
) -> None:
    """The first session is archived and deleted; the second's archive fails: it and every later one stay whole, and
    the error carries what was done."""
    sessions = [make_session(aged, clock, days) for days in (300, 200, 100)]
    before = {sid: stored(aged, sid) for sid in sessions}
    plan = aged.prune(older_than="90d", archive=tmp_path / "a", dry_run=True, now=kit.T0)
    order = [s.id for s in plan.sessions]
    written = _failing_after(monkeypatch, 1, error)
    with pytest.raises(PruneError) as info:
        aged.apply_prune(plan)
    assert info.value.code == "storage" and error.strerror in info.value.message
    assert info.value.result.pruned == (order[0],) and info.value.result.error is not None
    assert written == [tmp_path / "a" / f"{order[0]}.jsonl.gz"]
    assert ids(aged) == set(order[1:])
    assert {sid: stored(aged, sid) for sid in order[1:]} == {sid: before[sid] for sid in order[1:]}
    # no partial file (the blob folder holds the archived session's content kept out of line)
    assert sorted(p.name for p in (tmp_path / "a").iterdir() if p.name != ".blobs") == [f"{order[0]}.jsonl.gz"]


def test_an_archive_that_fails_its_fsync_deletes_nothing(
    aged: SessionRepo, clock: SetClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An archive is durable before its session is deleted: a failing fsync stops the pruning, the session stays."""
    sid = make_session(aged, clock, 120)

    def fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(archive_module.os, "fsync", fsync)
    with pytest.raises(PruneError) as info:
        aged.prune(older_than="90d", archive=tmp_path / "a", now=kit.T0)
    assert info.value.result.pruned == () and ids(aged) == {sid}
    assert [p for p in (tmp_path / "a").rglob("*") if p.is_file()] == []  # no archive, no blob, no temporary file


def test_an_existing_archive_is_never_overwritten(aged: SessionRepo, clock: SetClock, tmp_path: Path) -> None:
    """A file already at the archive's name stops the pruning (already_exists); it and the session stay as they are."""
    sid = make_session(aged, clock, 120)
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / f"{sid}.jsonl.gz").write_bytes(b"someone else's")
    with pytest.raises(PruneError) as info:
        aged.prune(older_than="90d", archive=folder, now=kit.T0)
    assert info.value.code == "already_exists"
    assert (folder / f"{sid}.jsonl.gz").read_bytes() == b"someone else's" and ids(aged) == {sid}


def _archived(aged: SessionRepo, clock: SetClock, folder: Path) -> tuple[Path, list[bytes]]:
    sid = make_session(aged, clock, 120)
    lines = stored(aged, sid)
    aged.prune(older_than="90d", archive=folder, now=kit.T0)
    return folder / f"{sid}.jsonl.gz", lines


def test_a_changed_line_in_an_archive_fails_verify(aged: SessionRepo, clock: SetClock, tmp_path: Path) -> None:
    """Recompressing an edited log does not fool verify: the changed line is named."""
    path, lines = _archived(aged, clock, tmp_path / "a")
    lines[2] = lines[2].replace(b'"message":{', b'"message":{"x":1,', 1)  # the answer changed (inline or a reference)
    path.write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines)))
    report = verify(path)
    assert not report.ok and report.problems[0].line == 3


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_archive_is_reported_not_read(aged: SessionRepo, clock: SetClock, tmp_path: Path, damage: str) -> None:
    """A cut or corrupted archive is a verify problem and a corrupt error on open, never a partial session."""
    path, _ = _archived(aged, clock, tmp_path / "a")
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert not verify(path).ok
    with pytest.raises(SessionError) as info:
        open_session(path)
    assert info.value.code == "corrupt"


def test_a_decompression_bomb_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An archive that expands past the limit is refused, not read into memory."""
    monkeypatch.setattr(archive_module, "MAX_EXPANDED", 1000)
    path = tmp_path / "bomb.jsonl.gz"
    path.write_bytes(gzip.compress(b"x" * 100_000))
    with pytest.raises(SessionError, match="expands past"):
        open_session(path)


def test_the_archive_of_a_database_session_is_native_jsonl(aged: SessionRepo, clock: SetClock, tmp_path: Path) -> None:
    """Whatever the backend, the archive is the native JSONL log: it reads as a session file once decompressed."""
    path, lines = _archived(aged, clock, tmp_path / "a")
    plain = path.parent / "plain.jsonl"  # beside the archive, whose folder holds its content kept out of line
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    with open_session(plain) as session:
        assert session.storage.read_lines() == lines and verify(session).ok


def test_a_pruning_stopped_after_archiving_can_be_run_again(
    aged: SessionRepo, clock: SetClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the deletion fails after the archive was written, the next run finds that same archive, keeps it and
    deletes the session; an archive of other lines is never taken for it."""
    sid = make_session(aged, clock, 120)
    lines = stored(aged, sid)
    real = store_retention.delete_surveyed

    def fail(*args: object) -> None:
        raise SessionError("storage", "the connection was lost")

    monkeypatch.setattr(store_retention, "delete_surveyed", fail)
    with pytest.raises(PruneError):
        aged.prune(older_than="90d", archive=tmp_path / "a", now=kit.T0)
    assert ids(aged) == {sid} and (tmp_path / "a" / f"{sid}.jsonl.gz").exists()
    monkeypatch.setattr(store_retention, "delete_surveyed", real)
    assert aged.prune(older_than="90d", archive=tmp_path / "a", now=kit.T0).pruned == (sid,)
    assert gzip.decompress((tmp_path / "a" / f"{sid}.jsonl.gz").read_bytes()) == b"".join(x + b"\n" for x in lines)
