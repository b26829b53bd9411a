"""What an erasure does after the line is rewritten, so that no copy of what it erased stays on the disk
(docs/audit.md, *What is left on the disk*): the caches that quote a session (the listing index of a folder, the
search index of a folder or a database) are brought up to date at once rather than at their next use, and the files
a crash left (an earlier rewrite's copy, a blob's or the listing index's temporary file) are removed when their
process is gone. Each is a cache or a leftover: deleting or rebuilding it never loses anything of the log.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sessiontree.audit import row_replace
from sessiontree.content.blob_stores import folder_for
from sessiontree.search.search_jsonl import JsonlSearch, index_path
from sessiontree.storage import leftovers
from sessiontree.storage.jsonl_repo import DirectoryIndex


def scrub(storage: Any) -> None:
    """Bring up to date what quotes the session of ``storage`` (a file's folder, or its database store)."""
    path = getattr(storage, "path", None)
    if path is not None:
        _folder(Path(path))
    else:
        _store(getattr(storage, "owner", None))


def _folder(session_file: Path) -> None:
    root = session_file.parent
    blobs = folder_for(session_file)
    if blobs.folder.is_dir():
        blobs.sweep()
    index = DirectoryIndex(root)
    where = index.path
    if where is not None and os.path.exists(where):
        leftovers.remove(leftovers.dead(leftovers.index_temps(where)))
        index.refresh()  # the rewritten file is read again: its summary no longer quotes the erased line
    search, _ = index_path(str(root))
    if search is not None and os.path.exists(search):
        folder = JsonlSearch(root)
        try:
            folder.refresh()  # the erased entry's rows and terms are deleted (search_sqlite.py: secure delete)
        finally:
            folder.close()


def _store(store: Any) -> None:
    """A database store's search tables, caught up when it has them (an index in memory is no file; PostgreSQL keeps
    old row versions until ``redact --vacuum``)."""
    module = getattr(store, "module", None)
    if module == "eventsourcing.sqlite":
        row_replace.checkpoint(store.recorder)  # again: a crash after the rewrite's commit left the old pages in the WAL
        if not _has_table(store, "search_meta"):
            return
    elif module == "eventsourcing.postgres":
        if not _has_table(store, "sessiontree_search_meta"):
            return
    else:
        return
    from sessiontree.search.search_open import StoreSearch

    search = StoreSearch(store)
    try:
        search.catch_up()
    finally:
        search.close()


def vacuum(storage: Any) -> str:
    """Rewrite the files of the store ``storage`` lives in so no old version of a rewritten line is left in them (what
    ``sessiontree redact --vacuum`` runs; docs/audit.md); a sentence saying what was done. SQLite: ``VACUUM`` of the
    database; PostgreSQL: ``VACUUM FULL`` of the events, listing, blob and search tables (each locked meanwhile); a
    folder: ``VACUUM`` of its search index (its logs are rewritten whole by every erasure)."""
    path = getattr(storage, "path", None)
    if path is not None:
        search, _ = index_path(str(Path(path).parent))
        if search is None or not os.path.exists(search):
            return "nothing to vacuum: the folder's files are rewritten whole by every erasure"
        import sqlite3

        conn = sqlite3.connect(search, timeout=30, isolation_level=None)
        try:
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        return f"vacuumed the search index {search}"
    recorder = getattr(storage, "recorder", None)
    module = getattr(getattr(storage, "owner", None), "module", None)
    if recorder is None or module not in ("eventsourcing.sqlite", "eventsourcing.postgres"):
        return "nothing to vacuum: the sessions are held in memory"
    events = str(recorder.events_table_name)
    prefix = events.removesuffix("_events")
    tables = [events, getattr(recorder, "listing_table_name", prefix + "_listing"), prefix + "_blobs",
              "sessiontree_search_entries", "sessiontree_search_sources"]
    row_replace.vacuum(recorder, tables)
    return "vacuumed the database (VACUUM)" if module == "eventsourcing.sqlite" else (
        f"vacuumed the tables {', '.join(tables)} (VACUUM FULL); the server's WAL files and backups are not rewritten")


def _has_table(store: Any, name: str) -> bool:
    datastore = store.recorder.datastore
    with datastore.transaction(commit=False) as cursor:
        if store.module == "eventsourcing.sqlite":
            cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
            return cursor.fetchone() is not None
        cursor.execute("SELECT to_regclass(%s) AS found", (f'"{datastore.schema or "public"}"."{name}"',))
        row = cursor.fetchone()
        return (row["found"] if isinstance(row, dict) else row[0]) is not None
