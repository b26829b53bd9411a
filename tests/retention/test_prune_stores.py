"""What pruning deletes in each kind of store: a JSONL file with its checkpoints and index entry (never one of pi's
files, never while a writer holds it); a database session's events and listing row, in one transaction."""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sessiontree_pg as pg
import sessiontree_testkit as kit
from sessiontree_prunekit import NOW, SetClock, ids, make_session, stored

from sessiontree import PruneError, SessionError, open_repo, sign_checkpoint, verify
from sessiontree.audit.checkpoints import save_checkpoint, sidecar
from sessiontree.repository import SessionRepo
from sessiontree.storage import database_index as db_index
from sessiontree.storage.jsonl_repo import INDEX_FILE

KEY = b"k" * 32
PI_HEADER = {"type": "session", "version": 3, "id": "0194f0c2-pi00-7000-8000-000000000001",
             "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/p"}

jsonl_only = pytest.mark.parametrize("backend", ["jsonl"])
databases = pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])


@jsonl_only
def test_a_file_goes_with_its_checkpoints_and_index_entry(aged: SessionRepo, clock: SetClock) -> None:
    """The session file, its ``.checkpoints`` sidecar and its line in the listing index are all gone."""
    sid = make_session(aged, clock, 120)
    path = aged.path_for(sid)  # type: ignore[attr-defined]
    with aged.open(sid) as session:
        save_checkpoint(path, sign_checkpoint(session, KEY))
    aged.list()
    assert sid in (aged.root / INDEX_FILE).read_text()  # type: ignore[attr-defined]
    assert aged.prune(older_than="90d", now=NOW).pruned == (sid,)
    assert not path.exists() and not sidecar(path).exists()
    assert sid not in (aged.root / INDEX_FILE).read_text()  # type: ignore[attr-defined]
    assert ids(open_repo(aged.root)) == set()  # type: ignore[attr-defined]


@jsonl_only
def test_signed_checkpoints_go_with_the_archive(aged: SessionRepo, clock: SetClock, tmp_path: Path) -> None:
    """The archive keeps the session's checkpoints beside it: verify with the key passes on the archive."""
    sid = make_session(aged, clock, 120)
    with aged.open(sid) as session:
        save_checkpoint(aged.path_for(sid), sign_checkpoint(session, KEY))  # type: ignore[attr-defined]
    aged.prune(older_than="90d", archive=tmp_path / "a", now=NOW)
    archive = tmp_path / "a" / f"{sid}.jsonl.gz"
    report = verify(archive, key=KEY)
    assert report.ok and report.checkpoints == 1
    assert os.stat(sidecar(archive)).st_mode & 0o777 == 0o600


@jsonl_only
def test_a_session_locked_by_an_append_in_flight_is_kept(aged: SessionRepo, clock: SetClock) -> None:
    """A file whose lock an append holds (here: held on purpose, longer than prune waits) is not deleted under it."""
    sid = make_session(aged, clock, 120)
    other = make_session(aged, clock, 120)
    fd = os.open(aged.path_for(sid), os.O_RDONLY)  # type: ignore[attr-defined]
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        result = aged.prune(older_than="90d", now=NOW)
    finally:
        os.close(fd)
    assert result.pruned == (other,) and result.kept == ((sid, f"session {sid} is held by a writer since it was listed "
                                                          "for pruning; it is kept"),)
    assert ids(aged) == {sid}


@jsonl_only
def test_a_writer_open_on_a_pruned_session_is_told_not_found_and_loses_nothing(aged: SessionRepo, clock: SetClock) -> None:
    """A session object open on a file that prune deleted: its next append is ``not_found`` and writes nothing (never
    into the unlinked file, where an acknowledged entry would be lost)."""
    sid = make_session(aged, clock, 120)
    writer = aged.open(sid)
    clock.now = NOW - timedelta(days=100)
    writer.append_message(kit.user("typed before the prune"))
    assert aged.prune(older_than="90d", now=NOW).pruned == (sid,)
    with pytest.raises(SessionError) as caught:
        writer.append_message(kit.user("after the prune"))
    assert caught.value.code == "not_found" and "deleted" in caught.value.message
    writer.close()
    assert ids(aged) == set()


@jsonl_only
def test_a_folder_of_pi_sessions_is_refused(make_repo: Any, tmp_path: Path) -> None:
    """pi's folders are read-only for sessiontree: pruning one is refused, naming why, and nothing is deleted."""
    folder = tmp_path / "pi-sessions" / "--p--"
    folder.mkdir(parents=True)
    pi_file = folder / "2025-01-01_pi.jsonl"
    pi_file.write_text(json.dumps(PI_HEADER) + "\n")
    repo = open_repo(tmp_path / "pi-sessions")
    with pytest.raises(SessionError, match="pi's session files are read-only") as info:
        repo.prune(older_than="1d", now=NOW)
    assert info.value.code == "storage" and pi_file.exists()


@jsonl_only
def test_a_pi_file_in_our_own_folder_is_kept(aged: SessionRepo, clock: SetClock) -> None:
    """A pi session file someone copied into our repository is never pruned: it is listed as kept."""
    sid = make_session(aged, clock, 120)
    pi_file = aged.root / "copied.jsonl"  # type: ignore[attr-defined]
    pi_file.write_text(json.dumps(PI_HEADER) + "\n")
    result = aged.prune(older_than="90d", now=NOW)
    assert result.pruned == (sid,)
    assert result.protected == ((PI_HEADER["id"], "a pi session file (read-only for sessiontree)"),)
    assert pi_file.exists()


def _listing_rows(repo: Any) -> set[str]:
    """The session ids in the listing view's table, read straight from the database."""
    store = repo.store
    if store.module == "eventsourcing.sqlite":
        with sqlite3.connect(store.env["SQLITE_DBNAME"]) as db:
            return {row[0] for row in db.execute(f"SELECT session_id FROM {store.view.table}")}
    import psycopg

    with psycopg.connect(dbname=pg.DBNAME, host=pg.HOST, port=pg.PORT, user=pg.USER) as conn:
        schema, table = store.recorder.datastore.schema, store.recorder.listing_table_name  # the lock-free listing
        return {row[0] for row in conn.execute(f'SELECT session_id FROM "{schema}"."{table}"')}


@databases
def test_a_database_session_goes_with_its_listing_row(aged: SessionRepo, clock: SetClock, make_repo: Any) -> None:
    """The events and the listing row are gone at once, and a deletion marker tells other processes' listings."""
    sid, young = make_session(aged, clock, 120), make_session(aged, clock, 1)
    aged.list()
    assert _listing_rows(aged) == {sid, young}
    aged.prune(older_than="90d", now=NOW)
    assert _listing_rows(aged) == {young}
    assert aged.store.recorder.select_events(sid) == []  # type: ignore[attr-defined]
    if aged.store.module == "eventsourcing.sqlite":  # type: ignore[attr-defined]  # PostgreSQL's listing rows are the truth
        markers = aged.store.recorder.select_events(db_index.DELETIONS_STREAM)  # type: ignore[attr-defined]
        assert [json.loads(m.state)["id"] for m in markers] == [sid]
    assert ids(make_repo()) == {young}  # another repository on the same database


@databases
def test_a_failed_deletion_leaves_the_session_whole(
    aged: SessionRepo, clock: SetClock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the listing row cannot be deleted, the transaction rolls back: events, row and marker are as before."""
    sid = make_session(aged, clock, 120)
    before = stored(aged, sid)
    plan = aged.prune(older_than="90d", dry_run=True, now=NOW)
    if aged.store.module == "eventsourcing.sqlite":  # type: ignore[attr-defined]
        monkeypatch.setattr(aged.store.view, "table", "no_such_table", raising=False)  # type: ignore[attr-defined]
    else:
        monkeypatch.setattr(aged.store.recorder, "listing_table_name", "no_such_table")  # type: ignore[attr-defined]
    with pytest.raises(PruneError) as info:
        aged.apply_prune(plan)
    assert info.value.code == "storage" and info.value.result.pruned == ()
    monkeypatch.undo()
    assert stored(aged, sid) == before and ids(aged) == {sid} and _listing_rows(aged) == {sid}
    assert aged.store.recorder.select_events(db_index.DELETIONS_STREAM) == []  # type: ignore[attr-defined]


@jsonl_only
def test_a_session_that_cannot_be_read_is_kept(aged: SessionRepo, clock: SetClock) -> None:
    """A file whose header cannot be decoded is never deleted by pruning: it is listed as kept, with why."""
    sid = make_session(aged, clock, 120)
    other = make_session(aged, clock, 120)
    path = aged.path_for(sid)  # type: ignore[attr-defined]
    header, rest = path.read_bytes().split(b"\n", 1)
    path.write_bytes(header.replace(b'"version":3', b'"version":99') + b"\n" + rest)
    result = aged.prune(older_than="90d", now=NOW)
    assert result.pruned == (other,) and [i for i, _ in result.protected] == [sid] and path.exists()
    assert "cannot be read" in result.protected[0][1]
