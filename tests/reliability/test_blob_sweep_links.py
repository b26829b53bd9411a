"""A sweep of dead writers' blob temporary files never follows a link out of the repository (issue 32, item 7: found by
the round-three review of the blob sweep)."""

from __future__ import annotations

import os
from pathlib import Path

from sessiontree.storage import leftovers


def _dead_temp(folder: Path) -> Path:
    part = folder / "sha256" / "ab"
    part.mkdir(parents=True)
    temp = part / ".cdef0123.999999999.00aa11bb.tmp"  # pid 999999999: no such process
    temp.write_bytes(b"outside content")
    os.utime(temp, (0, 0))
    return temp


def test_a_linked_blob_folder_is_not_swept(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    temp = _dead_temp(outside)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".blobs").symlink_to(outside)
    assert leftovers.blob_temps(repo / ".blobs") == []
    assert leftovers.remove(leftovers.stale(leftovers.blob_temps_in(repo / ".blobs" / "sha256" / "ab"), 0)) == []
    assert temp.exists()


def test_a_linked_sha256_folder_is_not_swept(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    temp = _dead_temp(outside)
    blobs = tmp_path / "repo" / ".blobs"
    blobs.mkdir(parents=True)
    (blobs / "sha256").symlink_to(outside / "sha256")
    assert leftovers.blob_temps(blobs) == []
    assert temp.exists()


def test_a_real_folder_is_swept(tmp_path: Path) -> None:
    temp = _dead_temp(tmp_path / "repo" / ".blobs")
    assert leftovers.remove(leftovers.dead(leftovers.blob_temps(tmp_path / "repo" / ".blobs"))) == [temp]
    assert not temp.exists()
