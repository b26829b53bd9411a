"""JSONL repositories on folders that are not sessiontree's: pi's layout, the marker, the cached index."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import sessiontree_testkit as kit
from sessiontree_pi import fixtures_dir

from sessiontree.repository import JsonlSessionRepo, open_repo
from sessiontree.storage import folders
from sessiontree.storage.jsonl_repo import INDEX_FILE

BRANCHES = "01a22719-520e-73c5-90fe-20a5781271ca"
SMALL = "01a22719-3541-759d-a745-5e5f131c9378"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "sessiontree" / "indexes"


def pi_layout(root: Path) -> Path:
    """Two of the shared pi fixtures filed the way pi files them: one sub-folder per working directory."""
    for fixture, sid in (("branches", BRANCHES), ("small", SMALL)):
        folder = root / "--home-user-project--"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(fixtures_dir() / f"{fixture}.jsonl", folder / f"2026-11-29T11-38-20-559Z_{sid}.jsonl")
    return root


def files_under(root: Path) -> dict[str, tuple[bytes | None, int]]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_a_folder_sessiontree_creates_is_marked_and_keeps_its_index(tmp_path: Path, cache: Path) -> None:
    """A new repository folder gets the marker; its index lives in it, not in the cache."""
    repo = JsonlSessionRepo(tmp_path / "new")
    repo.create(cwd="/p").append_message(kit.user("hello"))
    repo.list()
    assert folders.is_ours(tmp_path / "new") and (tmp_path / "new" / INDEX_FILE).is_file()
    assert not cache.exists()


def test_pi_s_layout_is_listed_and_opened_without_a_write(tmp_path: Path, cache: Path) -> None:
    """Sessions in sub-folders are listed and opened by id; the folder is unchanged and the index is cached, private,
    naming the folder it belongs to. A new repository object reuses it."""
    root = pi_layout(tmp_path / "pi")
    before = files_under(root)
    repo = open_repo(root)
    infos = repo.list()
    assert {i.id for i in infos} == {BRANCHES, SMALL}
    assert {Path(i.path).parent.name for i in infos} == {"--home-user-project--"}
    assert repo.open(SMALL).get_session_name() == "Explain the leaf pointer"
    assert [i.id for i in repo.list(cwd="/home/user/project/")] != []
    assert files_under(root) == before and not folders.is_ours(root)
    [index] = cache.iterdir()
    assert index.stat().st_mode & 0o777 == 0o600 and cache.stat().st_mode & 0o777 == 0o700
    assert json.loads(index.read_bytes())["root"] == os.path.realpath(root)
    assert open_repo(root).list() == infos


def test_the_cached_index_is_per_folder_and_checked(tmp_path: Path, cache: Path) -> None:
    """A cached index that names another folder (a hash collision, a copied cache) is not used."""
    root = pi_layout(tmp_path / "pi")
    open_repo(root).list()
    [index] = cache.iterdir()
    data = json.loads(index.read_bytes())
    data["root"] = "/elsewhere"
    data["files"] = {}
    index.write_text(json.dumps(data))
    assert {i.id for i in open_repo(root).list()} == {BRANCHES, SMALL}
    assert json.loads(index.read_bytes())["root"] == os.path.realpath(root)


def test_without_a_cache_directory_listing_still_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No usable cache directory (a relative XDG_CACHE_HOME, no home): the folder is listed, nothing is kept."""
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    monkeypatch.setenv("HOME", "")
    monkeypatch.chdir(tmp_path)
    root = pi_layout(tmp_path / "pi")
    before = files_under(tmp_path)
    assert {i.id for i in open_repo(root).list()} == {BRANCHES, SMALL}
    assert files_under(tmp_path) == before


def test_a_folder_of_native_sessions_is_adopted_on_the_first_write(tmp_path: Path, cache: Path) -> None:
    """A folder made elsewhere that holds only native sessions is read without a write, and marked as ours when a
    session is created in it (a repository made before markers existed)."""
    made = JsonlSessionRepo(tmp_path / "old")
    made.create(cwd="/p")
    (tmp_path / "old" / folders.MARKER).unlink()
    (tmp_path / "old" / INDEX_FILE).unlink(missing_ok=True)
    before = files_under(tmp_path / "old")
    assert len(open_repo(tmp_path / "old").list()) == 1
    assert files_under(tmp_path / "old") == before
    repo = open_repo(tmp_path / "old")
    repo.create(cwd="/q")
    assert folders.is_ours(tmp_path / "old") and len(repo.list()) == 2
    assert (tmp_path / "old" / INDEX_FILE).is_file()


@pytest.mark.parametrize("layout", ["pi file", "sub-folders"])
def test_a_folder_holding_pi_s_sessions_is_never_marked(tmp_path: Path, cache: Path, layout: str) -> None:
    """Creating a session in a folder with pi's files in it (a library call may) does not make the folder ours."""
    root = tmp_path / "mixed"
    if layout == "pi file":
        root.mkdir()
        shutil.copyfile(fixtures_dir() / "small.jsonl", root / f"{SMALL}.jsonl")
    else:
        pi_layout(root)
    assert folders.foreign_reason(root) is not None
    JsonlSessionRepo(root).create(cwd="/p")
    assert not folders.is_ours(root) and not (root / INDEX_FILE).exists()


def test_a_nested_session_is_deleted_and_forgotten(tmp_path: Path, cache: Path) -> None:
    root = pi_layout(tmp_path / "pi")
    repo = open_repo(root)
    repo.list()
    repo.delete(SMALL)
    assert [i.id for i in repo.list()] == [BRANCHES] and not repo.exists(SMALL)


def test_fork_into_another_repository(tmp_path: Path, cache: Path) -> None:
    """``fork(..., into=other)`` writes the new session into ``other``; the source names the file it came from."""
    root = pi_layout(tmp_path / "pi")
    before = files_under(root)
    ours = JsonlSessionRepo(tmp_path / "ours")
    fork = open_repo(root).fork(BRANCHES, into=ours)
    assert Path(fork.storage.location).parent == tmp_path / "ours"
    assert fork.header.parent_session is not None and fork.header.parent_session.endswith(f"_{BRANCHES}.jsonl")
    assert [i.id for i in ours.list()] == [fork.id] and files_under(root) == before


def test_list_resolves_cwd_as_pi_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``list(cwd=...)``: ``~`` expanded, a relative path taken from the current directory, a trailing slash ignored;
    a header naming the directory as written still matches."""
    repo = JsonlSessionRepo(tmp_path / "r")
    here = tmp_path / "work"
    here.mkdir()
    ids: dict[str, Any] = {cwd: repo.create(cwd=cwd).id for cwd in (str(here), "/home/me/app", "rel")}
    monkeypatch.chdir(here)
    monkeypatch.setenv("HOME", "/home/me")
    assert [i.id for i in repo.list(cwd=".")] == [ids[str(here)]]
    assert [i.id for i in repo.list(cwd="~/app/")] == [ids["/home/me/app"]]
    assert [i.id for i in repo.list(cwd="rel")] == [ids["rel"]]
    assert len(repo.list(cwd=None)) == 3


def test_a_session_header_too_long_to_read_whole_makes_the_folder_foreign(tmp_path: Path) -> None:
    """pi's header with a huge cwd cannot be read within the limit: when in doubt, the folder is not ours."""
    header = {"type": "session", "version": 3, "id": "hh-1", "timestamp": "2026-11-29T11:38:13.186Z",
              "cwd": "/" + "d" * (folders.HEADER_LIMIT + 10)}
    (tmp_path / "2025_hh-1.jsonl").write_text(json.dumps(header) + "\n")
    assert folders.foreign_reason(tmp_path) is not None
    (tmp_path / "2025_hh-1.jsonl").write_text("x" * (folders.HEADER_LIMIT + 10) + "\n")  # not a session: not pi's
    assert folders.foreign_reason(tmp_path) is None
