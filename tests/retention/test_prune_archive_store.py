"""A folder of archives opened as a repository (``open_repo("archive:DIR")``): it lists the archived sessions as their
own repository listed them, opens and verifies them, and refuses every write."""

from __future__ import annotations

import gzip
from pathlib import Path

import attrs
import pytest
import sessiontree_testkit as kit
from sessiontree_prunekit import NOW, SetClock, make_session

from sessiontree import SessionError, open_repo, verify
from sessiontree.repository import SessionRepo


def _archive_all(repo: SessionRepo, clock: SetClock, folder: Path) -> dict[str, object]:
    """Two old sessions (two working directories) pruned into ``folder``; their listing rows before."""
    make_session(repo, clock, 120, name="first", cwd="/work/a")
    make_session(repo, clock, 150, cwd="/work/b")
    before = {info.id: info for info in repo.list()}
    assert len(repo.prune(older_than="90d", archive=folder, now=NOW).pruned) == 2
    return before  # type: ignore[return-value]


def test_archives_list_and_open_as_a_repository(aged: SessionRepo, clock: SetClock, tmp_path: Path) -> None:
    """Each archived session is listed with what its repository listed (bar its location), and opens the same."""
    folder = tmp_path / "archive"
    before = _archive_all(aged, clock, folder)
    with open_repo(f"archive:{folder}") as archives:
        listed = {info.id: info for info in archives.list()}
        assert set(listed) == set(before)
        for sid, info in listed.items():
            assert info.path == str(folder / f"{sid}.jsonl.gz")
            assert attrs.evolve(info, path="") == attrs.evolve(before[sid], path="")  # type: ignore[misc]
            with archives.open(sid) as session:
                assert verify(session).ok and len(session.get_entries()) == 2 + (info.name is not None)
        assert [i.id for i in archives.list(cwd="/work/a")] == [i for i, v in before.items() if v.cwd == "/work/a"]


def test_an_archive_folder_refuses_every_write(aged: SessionRepo, clock: SetClock, tmp_path: Path) -> None:
    """Creating, copying into, deleting and pruning an archive folder are refused; its files stay as they were."""
    folder = tmp_path / "archive"
    _archive_all(aged, clock, folder)
    files = {p.name: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    archives = open_repo(f"archive:{folder}")
    sid = archives.list()[0].id
    with pytest.raises(SessionError, match="read-only"):
        archives.create(cwd="/p")
    with pytest.raises(SessionError, match="read-only"):
        archives.delete(sid)
    with pytest.raises(SessionError, match="read-only"):
        archives.prune(older_than="0s")
    with pytest.raises(SessionError, match="read-only"):
        archives.open(sid).append_message(kit.user("more"))
    assert {p.name: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == files


def test_unreadable_or_misnamed_archives_are_left_out_of_the_listing(tmp_path: Path) -> None:
    """A damaged archive, or one under another session's name, is not listed (opening it by id says why)."""
    repo = open_repo(tmp_path / "live")
    session = repo.create(cwd="/p")
    session.append_message(kit.user("hello"))
    session.close()
    lines = repo.store.attach(session.id).read_lines()
    folder = tmp_path / "archive"
    folder.mkdir()
    good = gzip.compress(b"".join(line + b"\n" for line in lines))
    (folder / f"{session.id}.jsonl.gz").write_bytes(good)
    (folder / "0194f0c2-0000-7000-8000-000000000001.jsonl.gz").write_bytes(good)  # another id's name
    (folder / "0194f0c2-0000-7000-8000-000000000002.jsonl.gz").write_bytes(good[:20])  # cut short
    archives = open_repo(f"archive:{folder}")
    assert [i.id for i in archives.list()] == [session.id]
    with pytest.raises(SessionError) as info:
        archives.open("0194f0c2-0000-7000-8000-000000000001")
    assert info.value.code == "corrupt"


def test_a_missing_archive_folder_is_not_found(tmp_path: Path) -> None:
    """archive: naming no folder is a not_found error, not an empty repository."""
    with pytest.raises(SessionError) as info:
        open_repo(f"archive:{tmp_path / 'nowhere'}")
    assert info.value.code == "not_found"
