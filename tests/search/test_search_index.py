"""The search index as a cache of the logs: rebuilt when missing, stale or damaged, caught up with files that grow,
shrink or are replaced, private, and kept out of folders that are not sessiontree's."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import sessiontree_searchkit as sk
import sessiontree_testkit as kit

from sessiontree import open_repo
from sessiontree.search.search_stores import INDEX_FILE


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "sessions"
    repo = open_repo(folder)
    sk.build_corpus(repo)
    repo.close()
    return folder


def _ids(folder: Path | str, query: str) -> set[tuple[str, str]]:
    with open_repo(folder) as repo:
        return {(h.session_id, h.entry_id) for h in repo.search(query, limit=1000)}


def test_the_index_is_private_and_beside_our_sessions(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    assert _ids(folder, "zebra")
    made = sorted(folder.glob(INDEX_FILE + "*"))
    assert made and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in made)


def test_a_missing_damaged_or_stale_index_is_built_again(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    expected = _ids(folder, "zebra")
    index = folder / INDEX_FILE
    index.unlink()
    assert _ids(folder, "zebra") == expected
    for suffix in ("-wal", "-shm"):
        Path(f"{index}{suffix}").unlink(missing_ok=True)
    index.write_bytes(b"this is not a database" * 100)
    assert _ids(folder, "zebra") == expected
    with sqlite3.connect(index) as conn:  # an index of another format
        conn.execute("UPDATE search_meta SET value = '0' WHERE key = 'format'")
        conn.execute("DELETE FROM search_fts")  # what it holds is not trusted
    assert _ids(folder, "zebra") == expected


def test_a_file_replaced_or_cut_short_is_read_again(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    path = folder / "s-beta.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    assert ("s-beta", "e-custom") in _ids(folder, "lynx")
    path.write_bytes(b"".join(lines[:1]))  # only the header is left
    assert _ids(folder, "lynx") == set()
    path.write_bytes(b"".join(lines))
    assert ("s-beta", "e-custom") in _ids(folder, "lynx")
    replacement = folder / "new.jsonl"
    replacement.write_bytes(lines[0])
    os.replace(replacement, path)  # another file (another inode) in its place
    assert _ids(folder, "lynx") == set()
    path.unlink()
    assert {sid for sid, _ in _ids(folder, "zebra")} == {"s-alpha"}


def test_a_torn_last_line_waits_until_it_is_whole(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    repo = open_repo(folder)
    session = repo.open("s-beta")
    session.append_message(kit.user("the okapi line"), entry_id="e-okapi")
    session.close()
    path = folder / "s-beta.jsonl"
    whole = path.read_bytes()
    last = whole.rstrip(b"\n").rsplit(b"\n", 1)[1] + b"\n"
    path.write_bytes(whole[: -len(last)] + last[:20])  # a writer mid-append
    assert repo.search("okapi") == []
    path.write_bytes(whole)
    assert [h.entry_id for h in repo.search("okapi")] == ["e-okapi"]
    repo.close()


def test_files_that_are_not_sessions_are_never_searched(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "notes.jsonl").write_text('{"type": "message", "id": "x", "message": {"role": "user", "content": "zebra"}}\n')
    (folder / "empty.jsonl").write_text("")
    assert {sid for sid, _ in _ids(folder, "zebra")} == {"s-alpha", "s-beta"}


def test_a_database_index_dropped_is_built_again(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    repo = open_repo(url)
    sk.build_corpus(repo)
    expected = {(h.session_id, h.entry_id) for h in repo.search("zebra")}
    repo.close()
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute("DROP TABLE search_meta")
    assert _ids(url, "zebra") == expected
    assert stat.S_IMODE((tmp_path / "s.db").stat().st_mode) == 0o600


def test_appends_by_another_process_and_new_sub_folders_are_found(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    repo = open_repo(folder)
    assert repo.search("okapi") == []
    code = ("import sys; sys.path.insert(0, sys.argv[2]); import sessiontree_testkit as kit; from sessiontree import open_repo; "
            "s = open_repo(sys.argv[1]).open('s-beta'); s.append_message(kit.user('an okapi'), entry_id='e-okapi'); s.close()")
    support = str(Path(__file__).resolve().parents[1] / "support")
    subprocess.run([sys.executable, "-c", code, str(folder), support], check=True)
    assert [h.entry_id for h in repo.search("okapi")] == ["e-okapi"]
    pi_like = folder / "--srv-app--"
    pi_like.mkdir()
    (folder / "s-beta.jsonl").rename(pi_like / "moved.jsonl")  # a session moved into a new sub-folder
    assert [(h.session_id, h.entry_id) for h in repo.search("okapi")] == [("s-beta", "e-okapi")]
    (pi_like / "moved.jsonl").unlink()
    assert repo.search("okapi") == []
    assert repo.search("zebra") and repo.search("lynx") == []
    repo.close()
