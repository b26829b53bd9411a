"""The search index is a cache of the logs, never a source (issue 32, items 4, 11 and 14; docs/reliability.md): a
row planted in it is never a hit, a line over the parse limit is never parsed to index it, and an index path that is
not a regular file is a clear ``SessionError``, never a raw ``OSError`` nor a write through a link."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import sessiontree_testkit as kit

from sessiontree import SessionError, open_repo, verify
from sessiontree.adapters.search_jsonl import INDEX_FILE, JsonlSearch
from sessiontree.adapters.search_state import Filters
from sessiontree.adapters.search_text import parse_query


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


def _many_keys_line(parent: bytes, count: int = 1_200_000) -> bytes:
    keys = b",".join(b'"k%d":1' % i for i in range(count))
    return (b'{"type":"custom","id":"big00001","parent_id":' + parent + b',"timestamp":"2026-01-01T00:00:00.000Z",'
            b'"custom_type":"x","data":{"note":"zebra",' + keys + b"}}")


def _peak(call: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        value = call()
        return value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_search_and_verify_never_parse_a_line_over_the_key_limit(tmp_path: Path) -> None:
    """A line of 1.2M keys (14 MB) in a session: searching the folder indexes the other entries and skips it, and
    neither the search nor ``verify`` parses it (a parse takes ~180 MB; the attempt stays under 60 MB). Before: the
    search parsed it (a 60 MB line of 5M keys peaked at 848 MB)."""
    root, sid = _folder(tmp_path)
    path = root / f"{sid}.jsonl"
    last = orjson.loads(path.read_bytes().splitlines()[-1])["id"]
    with open(path, "ab") as out:
        out.write(_many_keys_line(orjson.dumps(last)) + b"\n")
    searcher = JsonlSearch(root, watch=False)
    try:
        hits, peak = _peak(lambda: searcher.search(Filters(parse_query("zebra"), limit=10)))
    finally:
        searcher.close()
    assert [h.entry_id for h in hits] == [last]
    assert peak < 60 << 20, peak
    report, peak = _peak(lambda: verify(path))
    assert report.first_bad_line == 3 and "1,000,000 keys" in report.problems[0].message
    assert peak < 60 << 20, peak
