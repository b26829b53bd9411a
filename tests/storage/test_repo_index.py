"""The JSONL listing index: cached summaries, incremental reads, rebuilt when missing or stale."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import sessiontree_testkit as kit

from sessiontree.domain.ids import fixed_clock
from sessiontree.repository import JsonlSessionRepo
from sessiontree.storage import index as index_module
from sessiontree.storage import jsonl_repo
from sessiontree.storage.index import Summary
from sessiontree.storage.jsonl_repo import INDEX_FILE, DirectoryIndex

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "pi"


@pytest.fixture
def repo(tmp_path: Path) -> JsonlSessionRepo:
    return JsonlSessionRepo(tmp_path / "s", clock=fixed_clock(kit.T0))


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts whole-file folds and file scans done by the index."""
    counts = {"full": 0, "scan": 0}
    real_fold, real_scan = index_module.fold_lines, DirectoryIndex._scan

    def fold(lines: Any) -> Any:
        counts["full"] += 1
        return real_fold(lines)

    def scan(self: Any, *args: Any) -> Any:
        counts["scan"] += 1
        return real_scan(self, *args)

    monkeypatch.setattr(index_module, "fold_lines", fold)
    monkeypatch.setattr(DirectoryIndex, "_scan", scan)
    return counts


def fill(repo: JsonlSessionRepo, n: int) -> list[Any]:
    sessions = []
    for i in range(n):
        session = repo.create(cwd=f"/p{i % 2}")
        session.append_message(kit.user(f"question {i}"))
        sessions.append(session)
    return sessions


def test_unchanged_files_are_not_read_again(repo: JsonlSessionRepo, spy: dict[str, int]) -> None:
    """A second list() over unchanged files reads no session file."""
    fill(repo, 4)
    first = repo.list()
    spy.update(full=0, scan=0)
    assert repo.list() == first
    assert spy == {"full": 0, "scan": 0}


def test_a_grown_file_is_read_from_where_the_index_stopped(repo: JsonlSessionRepo, spy: dict[str, int]) -> None:
    """Appends are folded incrementally: no whole-file fold, one scan for the one file."""
    sessions = fill(repo, 3)
    repo.list()
    spy.update(full=0, scan=0)
    sessions[0].append_message(kit.assistant("answer"))
    sessions[0].append_session_info("named later")
    info = {i.id: i for i in repo.list()}[sessions[0].id]
    assert (info.message_count, info.name) == (2, "named later")
    assert spy == {"full": 0, "scan": 1}


def test_another_repo_object_reuses_the_index_file(repo: JsonlSessionRepo, spy: dict[str, int]) -> None:
    """The index persists: a new repository object (another process) lists without reading logs."""
    fill(repo, 3)
    expected = repo.list()
    assert (repo.root / INDEX_FILE).is_file()
    spy.update(full=0, scan=0)
    assert JsonlSessionRepo(repo.root).list() == expected
    assert spy["scan"] == 0


@pytest.mark.parametrize("damage", ["missing", "garbage", "other-format"])
def test_a_missing_or_unreadable_index_is_rebuilt(repo: JsonlSessionRepo, damage: str) -> None:
    """Deleting or corrupting the index loses nothing: it is rebuilt from the logs."""
    fill(repo, 3)
    expected = repo.list()
    path = repo.root / INDEX_FILE
    if damage == "missing":
        path.unlink()
    elif damage == "garbage":
        path.write_bytes(b"{not json")
    else:
        path.write_text(json.dumps({"format": 999, "files": {}}))
    assert JsonlSessionRepo(repo.root).list() == expected
    assert json.loads(path.read_bytes())["format"] == jsonl_repo.INDEX_FORMAT


def test_a_replaced_or_shrunk_file_is_folded_again(repo: JsonlSessionRepo) -> None:
    """A file rewritten in place (not appended) is summarised from its first line."""
    a, b = fill(repo, 2)
    repo.list()
    a.append_message(kit.assistant("one"))
    path_a, path_b = repo.path_for(a.id), repo.path_for(b.id)
    lines = path_a.read_bytes().splitlines(keepends=True)
    path_a.write_bytes(b"".join(lines[:1]))  # shrunk to the header
    replacement = path_b.with_suffix(".tmp")
    replacement.write_bytes(path_b.read_bytes())
    os.replace(replacement, path_b)  # same bytes, new inode
    infos = {i.id: i for i in repo.list()}
    assert infos[a.id].message_count == 0
    assert infos[b.id].message_count == 1


def test_a_torn_last_line_is_left_out_until_it_is_whole(repo: JsonlSessionRepo) -> None:
    """A half-written line is not counted; once completed, it is."""
    [session] = fill(repo, 1)
    path = repo.path_for(session.id)
    whole = b'{"type":"message","id":"abcd1234","parent_id":null,"timestamp":"2026-11-29T12:00:00.000Z",' \
        b'"message":{"role":"user","content":"later","timestamp":0}}\n'
    with open(path, "ab") as handle:
        handle.write(whole[:40])
    assert repo.list()[0].message_count == 1
    with open(path, "ab") as handle:
        handle.write(whole[40:])
    info = repo.list()[0]
    assert (info.message_count, info.modified) == (2, "2026-11-29T12:00:00.000Z")


def test_files_that_are_not_sessions_are_skipped(repo: JsonlSessionRepo) -> None:
    """Other files, hidden files and JSONL files without a header are not listed."""
    [session] = fill(repo, 1)
    (repo.root / "notes.txt").write_text("hello")
    (repo.root / "data.jsonl").write_text('{"type":"message"}\n')
    (repo.root / "empty.jsonl").write_bytes(b"")
    (repo.root / ".hidden.jsonl").write_bytes(repo.path_for(session.id).read_bytes())
    assert [i.id for i in repo.list()] == [session.id]


def test_a_directory_that_does_not_exist_lists_empty(tmp_path: Path) -> None:
    """Listing a missing directory gives [] and creates nothing."""
    repo = JsonlSessionRepo(tmp_path / "nothing-here")
    assert repo.list() == []
    assert not (tmp_path / "nothing-here").exists()


def test_sessions_in_foreign_file_names_are_found_by_id(repo: JsonlSessionRepo) -> None:
    """A session file named pi's way (<time>_<id>.jsonl) is listed, opened and deleted by id."""
    [session] = fill(repo, 1)
    pi_name = repo.root / f"2026-11-29T11-30-00-000Z_{session.id}.jsonl"
    repo.path_for(session.id).rename(pi_name)
    assert [i.path for i in repo.list()] == [str(pi_name)]
    assert repo.open(session.id).get_entries()[0].message.content[0].text == "question 0"
    repo.delete(session.id)
    assert not pi_name.exists() and repo.list() == []


def test_summary_reads_both_dialects() -> None:
    """The fold understands native and pi (camelCase) headers and text-block content."""
    pi = Summary.from_header({"type": "session", "id": "x", "timestamp": "t", "cwd": "/c", "parentSession": "/f"})
    native = Summary.from_header({"type": "session", "id": "x", "timestamp": "t", "cwd": "/c", "parent_session": "/f"})
    assert pi == native and pi is not None and pi.parent_session == "/f"
    pi.apply({"type": "message", "timestamp": "t2", "message": {"role": "user", "content": [
        {"type": "text", "text": "a"}, {"type": "image", "data": ""}, {"type": "text", "text": "b"}]}})
    assert (pi.first_message, pi.message_count, pi.modified) == ("a b", 1, "t2")
    assert Summary.from_header({"type": "message"}) is None


def _pi_peer() -> Path | None:
    home = Path(os.environ.get("SESSIONTREE_PI_PEER") or Path(os.environ.get("TMPDIR", "/tmp")) / "sessiontree-pi-peer")
    ok = (home / "pi-peer.mjs").is_file() and (home / "node_modules").is_dir() and shutil.which("node")
    return home if ok else None


@pytest.mark.pi
def test_listing_agrees_with_pi_on_its_own_files(tmp_path: Path) -> None:
    """On pi's sample files, ids, cwd, names, counts and first messages match pi's list."""
    home = _pi_peer()
    if home is None:
        pytest.skip("the pi peer harness is not installed (scripts/install-pi-peer.sh)")
    if not FIXTURES.is_dir():
        pytest.skip("pi fixtures not present")
    for src in FIXTURES.glob("*.jsonl"):
        shutil.copy(src, tmp_path / src.name)
    out = subprocess.run(["node", "pi-peer.mjs", "list", str(tmp_path)], cwd=home, capture_output=True, check=True)
    theirs = {s["id"]: s for s in json.loads(out.stdout)["sessions"]}
    ours = {i.id: i for i in JsonlSessionRepo(tmp_path).list()}
    assert set(ours) == set(theirs)
    for sid, info in ours.items():
        pi = theirs[sid]
        assert (info.cwd, info.name, info.message_count, info.created) == (
            pi["cwd"], pi["name"], pi["messageCount"], pi["created"]
        )
        assert (info.first_message or "").startswith(pi["firstMessage"].rstrip("…"))
