"""The search index is a cache of the logs, never a source (issue 32, items 4, 11 and 14; docs/reliability.md): a
row planted in it is never a hit, a line over the parse limit is never parsed to index it, and an index path that is
not a regular file is a clear ``SessionError``, never a raw ``OSError`` nor a write through a link."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
import sessiontree_testkit as kit

from sessiontree import SessionError, open_repo
from sessiontree.adapters.search_jsonl import INDEX_FILE


def _folder(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "repo"
    with open_repo(root) as repo:
        session = repo.create(cwd="/w")
        session.append_message(kit.user("the zebra crossing"))
        sid = session.id
        session.close()
    return root, sid


@pytest.mark.parametrize("kind", ["directory", "symlink", "fifo", "wal-symlink"])
def test_a_search_index_that_is_not_a_regular_file_is_a_session_error(tmp_path: Path, kind: str) -> None:
    """A directory (or a link, or a FIFO) at the index's name: ``SessionError('storage')`` naming it; nothing is
    written through the link (before: a raw ``IsADirectoryError``)."""
    root, _ = _folder(tmp_path)
    index = root / INDEX_FILE
    outside = tmp_path / "elsewhere.sqlite"
    if kind == "directory":
        index.mkdir()
    elif kind == "symlink":
        index.symlink_to(outside)
    elif kind == "wal-symlink":  # SQLite would follow it to write its journal elsewhere
        Path(f"{index}-wal").symlink_to(outside)
    else:
        os.mkfifo(index)
    with open_repo(root) as repo, pytest.raises(SessionError) as caught:
        repo.search("zebra")
    assert caught.value.code == "storage"
    assert INDEX_FILE in caught.value.message and "not a regular file" in caught.value.message
    assert not outside.exists()
