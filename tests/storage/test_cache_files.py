"""The one place caches are named and written (storage/folders.py): the user's cache folder, a file per cached
path named by its real path's SHA-256, and private, atomic writes that leave nothing behind."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from sessiontree.storage import folders


def test_a_cache_file_is_named_by_the_real_path_it_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two names of one file (a link) share a cache file; another file gets another; the name is the SHA-256 of the
    real path, under ``$XDG_CACHE_HOME/sessiontree/<kind>``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    target = tmp_path / "a.jsonl"
    target.write_text("")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    found = folders.cache_file("sidecars", link, ".idx", 40)
    key = hashlib.sha256(os.fsencode(os.path.realpath(target))).hexdigest()[:40]
    assert found == str(tmp_path / "cache" / "sessiontree" / "sidecars" / f"{key}.idx")
    assert folders.cache_file("sidecars", target, ".idx", 40) == found
    assert folders.cache_file("sidecars", tmp_path / "b.jsonl", ".idx", 40) != found


def test_no_usable_cache_folder_means_no_cache_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative ``$XDG_CACHE_HOME`` (the XDG spec ignores it), or no home folder: nothing is cached, nothing made."""
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    monkeypatch.setenv("HOME", str(tmp_path / "no-such-home"))
    assert folders.cache_folder() is None
    assert folders.cache_file("search", tmp_path, ".sqlite") is None
    assert not (tmp_path / "no-such-home").exists()


def test_a_cache_is_written_private_and_whole(tmp_path: Path) -> None:
    """The file is 0600 in new 0700 folders, holds exactly the bytes, and replaces an older one whole."""
    old = os.umask(0)
    try:
        path = tmp_path / "cache" / "kind" / "f.idx"
        assert folders.write_private(str(path), b"one")
        assert folders.write_private(str(path), b"two")
    finally:
        os.umask(old)
    assert path.read_bytes() == b"two"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == ["f.idx"]


def test_a_link_planted_at_the_temporary_name_is_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the temporary name guessed and a link planted there, the write fails (False), the link's target is
    untouched and the cache file is not made."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    path = tmp_path / "f.idx"
    monkeypatch.setattr(os, "urandom", lambda n: b"\0" * n)
    Path(f"{path}.{os.getpid()}.00000000.tmp").symlink_to(victim)
    assert not folders.write_private(str(path), b"data")
    assert victim.read_bytes() == b"precious" and not path.exists()


def test_an_unwritable_folder_keeps_nothing_and_leaves_nothing(tmp_path: Path) -> None:
    """A cache whose folder cannot be made (a file is in the way): False, and no temporary file anywhere."""
    (tmp_path / "blocked").write_text("a file, not a folder")
    assert not folders.write_private(str(tmp_path / "blocked" / "f.idx"), b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocked"]
