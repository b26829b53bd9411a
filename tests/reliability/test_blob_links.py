"""Links under a repository's ``.blobs`` folder (issue 32, item 7; docs/reliability.md): the folder itself, its
``sha256`` folder or a ``sha256/xx`` sub-folder made a symbolic link never makes content be written, read or deleted
outside the repository; each is a ``SessionError('storage')`` naming the link, and ``verify`` reports it."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sessiontree import ImageContent, SessionError, TextContent, UserMessage, open_repo, verify


def _image() -> str:
    return base64.b64encode(os.urandom(3000)).decode("ascii")


def _message() -> UserMessage:
    return UserMessage([TextContent("look"), ImageContent(_image(), "image/png")])


def _blobs_folder(root: Path, outside: Path) -> None:
    os.rename(root / ".blobs", outside / "moved")
    (root / ".blobs").symlink_to(outside / "moved")


def _sha_folder(root: Path, outside: Path) -> None:
    (outside / "sha256").mkdir()
    for part in (root / ".blobs" / "sha256").iterdir():
        os.rename(part, outside / "sha256" / part.name)
    (root / ".blobs" / "sha256").rmdir()
    (root / ".blobs" / "sha256").symlink_to(outside / "sha256")


def _every_prefix(root: Path, outside: Path) -> None:
    """Every ``sha256/xx`` folder not made yet is a link out (the next blob's digest lands in one of them)."""
    sha = root / ".blobs" / "sha256"
    for number in range(256):
        part = sha / f"{number:02x}"
        if not part.exists():
            part.symlink_to(outside)


@pytest.mark.parametrize("attack", [_blobs_folder, _sha_folder, _every_prefix], ids=["blobs", "sha256", "prefix"])
def test_a_link_under_the_blob_folder_is_refused_and_reported(tmp_path: Path, attack: Callable[[Path, Path], None]) -> None:
    """An append that keeps an image out of line is ``storage`` naming the link and writes nothing outside; the
    session's earlier lines still read only what is inside, and ``verify`` names the link."""
    root, outside = tmp_path / "repo", tmp_path / "outside"
    outside.mkdir()
    repo = open_repo(root)
    session = repo.create(cwd="/w")
    session.append_message(_message())
    path = root / f"{session.id}.jsonl"
    attack(root, outside)
    before = sorted(p.relative_to(outside) for p in outside.rglob("*"))
    with pytest.raises(SessionError) as caught:
        session.append_message(_message())
    assert caught.value.code == "storage" and "symbolic link" in caught.value.message
    assert sorted(p.relative_to(outside) for p in outside.rglob("*")) == before  # nothing new written out there
    session.close()
    report = verify(path)
    assert not report.ok and any("symbolic link" in p.message for p in report.problems), report.problems
