"""The search index is a cache of the logs, never a source (issue 32, items 4, 11 and 14; docs/reliability.md): a
row planted in it is never a hit, a line over the parse limit is never parsed to index it, and an index path that is
not a regular file is a clear ``SessionError``, never a raw ``OSError`` nor a write through a link."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import sessiontree_pg as pg
import sessiontree_testkit as kit

from sessiontree import SessionError, open_repo, verify
from sessiontree.search.search_index import Filters
from sessiontree.search.search_stores import INDEX_FILE, JsonlSearch
from sessiontree.search.search_text import parse_query


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
    searcher = JsonlSearch(root)
    try:
        hits, peak = _peak(lambda: searcher.search(Filters(parse_query("zebra"), limit=10)))
    finally:
        searcher.close()
    assert [h.entry_id for h in hits] == [last]
    assert peak < 60 << 20, peak
    report, peak = _peak(lambda: verify(path))
    assert report.first_bad_line == 3 and "1,000,000 keys" in report.problems[0].message
    assert peak < 60 << 20, peak


def _plant_sqlite(db: Path, source: str) -> None:
    """Rows added by hand to an SQLite search index: an entry the log does not hold, and the id of a real line's
    entry given another text."""
    with sqlite3.connect(db) as conn:
        for seq, entry_id in ((9, "planted1"), (2, "planted2")):
            cursor = conn.execute("INSERT INTO search_entries (source, seq, entry_id, parent_id, kind, ts, text, at) "
                                  "VALUES (?, ?, ?, NULL, 'user', '2026-01-01T00:00:00.000Z', 'a zebra planted', 0)",
                                  (source, seq, entry_id))
            conn.execute("INSERT INTO search_fts (rowid, words) VALUES (?, 'a zebra planted')", (cursor.lastrowid,))


def test_a_row_planted_in_a_folder_search_index_is_never_a_hit(tmp_path: Path) -> None:
    """Two rows planted in ``.sessiontree-search.sqlite`` naming a session file of the folder: the search returns the
    log's one entry only (before: the planted rows came back as hits for entries the log does not hold)."""
    root, sid = _folder(tmp_path)
    with open_repo(root) as repo:
        [real] = repo.search("zebra")
    _plant_sqlite(root / INDEX_FILE, f"{sid}.jsonl")
    with open_repo(root) as repo:
        assert [h.entry_id for h in repo.search("zebra")] == [real.entry_id]
        assert repo.search("planted") == []


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_row_planted_in_a_database_search_index_is_never_a_hit(tmp_path: Path, backend: str) -> None:
    """The same rows planted in the search tables of an SQLite or PostgreSQL repository: never a hit."""
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            url = f"sqlite:{tmp_path / 'sessions.db'}"
        else:
            schema = stack.enter_context(pg.temp_schema("plant"))
            url = pg.url(schema)
        repo = stack.enter_context(open_repo(url))
        session = repo.create(cwd="/w")
        session.append_message(kit.user("the zebra crossing"))
        [real] = repo.search("zebra")
        if backend == "sqlite":
            _plant_sqlite(tmp_path / "sessions.db", session.id)
        else:
            import psycopg

            with psycopg.connect(host=pg.HOST, port=pg.PORT, user=pg.USER, dbname=pg.DBNAME, autocommit=True) as conn:
                for seq, entry_id in ((9, "planted1"), (2, "planted2")):
                    conn.execute(f'INSERT INTO "{schema}".sessiontree_search_entries (source, seq, entry_id, kind, ts, '
                                 "text, words) VALUES (%s, %s, %s, 'user', '2026-01-01T00:00:00.000Z', 'a zebra planted', "
                                 "'''a'' ''zebra'' ''planted''')", (session.id, seq, entry_id))
        fresh = stack.enter_context(open_repo(url))
        assert [h.entry_id for h in fresh.search("zebra")] == [real.entry_id]
        assert fresh.search("planted") == []


@pytest.mark.parametrize("url", ["memory:", "sqlite", "jsonl"])
def test_a_database_never_stores_a_line_over_the_key_limit(tmp_path: Path, url: str) -> None:
    """An entry of 1.2M keys appended to a repository is ``invalid_entry`` and not stored, so no reader (the search
    included) ever meets it (before: stored, and parsed whole by every later search; on JSONL the file then no
    longer opened, its line refused as ``corrupt``)."""
    repo = open_repo({"memory:": "memory:", "sqlite": f"sqlite:{tmp_path / 's.db'}", "jsonl": str(tmp_path / "j")}[url])
    session = repo.create(cwd="/w")
    kept = session.append_message(kit.user("the zebra crossing"))
    with pytest.raises(SessionError) as caught:
        session.append_custom_entry("x", {"note": "zebra", **{f"k{i}": 1 for i in range(1_200_000)}})
    assert caught.value.code == "invalid_entry" and "1,000,000 keys" in caught.value.message
    hits, peak = _peak(lambda: repo.search("zebra"))
    assert [h.entry_id for h in hits] == [kept] and peak < 60 << 20
    assert [e.id for e in repo.open(session.id).get_entries()] == [kept]  # the session still opens, whole
    repo.close()
