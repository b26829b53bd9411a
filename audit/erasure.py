"""Erasure: ``session.redact(entry_id, reason=...)`` removes one entry's content and keeps the log verifiable.

The entry's line is rewritten as a *stub*: the same entry (type, id, parent, timestamp, roles and tool-call ids, so the
tree and the shape of the context stay) with its content replaced by ``[redacted]`` and a top-level ``"redacted": true``.
The stub keeps the chain digest the original line recorded, so every later line still chains, and signed checkpoints
stay valid. Before the line is rewritten, a *redaction record* is appended (a ``custom`` entry of type
``sessiontree.redaction``): which entry, the digest it had, why, and who asked. verify accepts a stub only when such a
record names its entry and digest; anything else that changes a line still fails. docs/audit.md explains what this
proves.

After the rewrite, ``scrub`` leaves no copy of what was erased on the disk (docs/audit.md, *What is left on the disk*):
the caches that quote the session (a folder's listing index, the search index of a folder or a database) are brought
up to date at once, and the files a crash left are removed when their process is gone; each is a cache or a leftover,
so deleting or rebuilding it never loses anything of the log. ``vacuum`` is ``sessiontree redact --vacuum``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sessiontree.audit import row_replace
from sessiontree.content.blob_stores import collect, digests_of, folder_for
from sessiontree.content.blobs import is_digest
from sessiontree.domain import aggregate as commands
from sessiontree.domain.erasure import PLACEHOLDER, RECORD_TYPE, STUB_KEY, erased, is_stub
from sessiontree.domain.errors import SessionError
from sessiontree.search.search_stores import JsonlSearch, index_path
from sessiontree.storage import leftovers
from sessiontree.storage.jsonl_repo import DirectoryIndex


def records(session: Any) -> dict[str, Any]:
    """The redaction records of a session by the id of the entry each erased (the last record counts)."""
    found = {}
    for entry in session.find_entries("custom"):
        data = entry.data
        if entry.custom_type == RECORD_TYPE and isinstance(data, dict) and isinstance(data.get("entry_id"), str):
            found[data["entry_id"]] = entry
    return found


def redact(session: Any, entry_id: str, reason: str, by: str | None = None) -> str:
    """Erase the content of ``entry_id`` (see the module's docstring); returns the redaction record's id. Redacting an
    entry again completes an erasure that was recorded but interrupted, and otherwise changes nothing."""
    if not isinstance(reason, str) or not reason.strip():
        raise SessionError("invalid_entry", "a redaction needs a reason (reason='...')")
    if by is not None and not isinstance(by, str):
        raise TypeError(f"by must be a str or None, not {by!r}")
    storage = session.storage
    storage.check_writable()
    if not storage.can_replace_lines:
        raise SessionError("storage", f"session {session.id} at {storage.location} cannot be redacted in place: "
                           f"{storage.why_no_replace}")
    with session._lock:
        entry = session.entry(entry_id)
        if entry.version == 1:
            raise SessionError("invalid_entry", "the session header cannot be erased")
        digest = storage.recorded_digest(entry.version)
        known = records(session).get(entry.id)
        if known is not None and (known.data.get("digest") != digest or known.data.get("version") != entry.version):
            known = None  # a record that does not vouch for this line (its digest or version differs) is not reused
        if is_stub(entry):
            if known is None:
                raise SessionError("corrupt", f"entry {entry.id} is a redaction stub that no redaction record names")
            _collect(storage, known.data.get("blobs"))  # an erasure interrupted after its line was rewritten
            scrub(storage)
            return str(known.id)
        stub = storage.codec.encode_event(erased(entry))
        gone = digests_of([storage.line_before(entry.version + 1)[0]])
        if known is None:
            data = {"entry_id": entry.id, "version": entry.version, "digest": digest, "reason": reason,
                    "by": by if by is not None else _who()}
            if gone:  # its content kept out of line: what is deleted once the line is rewritten
                data["blobs"] = gone
            # The record is written as it is (the pipeline's redact step passes it by): a redactor must not rewrite the
            # digest it vouches with.
            record_id = session._run(lambda agg, id, now: commands.append_custom_entry(
                agg, RECORD_TYPE, data, id=id, timestamp=now), None)
        else:
            record_id = known.id
        storage.replace_line(entry.version, stub, digest)
        _collect(storage, gone)
        scrub(storage)  # the caches that quote the session, and what a crash left
        session.reload()
        return str(record_id)


def _collect(storage: Any, digests: Any) -> None:
    """Delete the erased entry's blobs unless another entry of a log sharing the store still refers to them."""
    if isinstance(digests, list) and digests:
        path = getattr(storage, "path", None)  # the logs sharing the store: the file's folder, or the recorder
        collect(storage.blobs, path.parent if path is not None else getattr(storage, "recorder", None),
                [d for d in digests if is_digest(d)])


def _who() -> str | None:
    import getpass  # here, not at import: it loads the terminal modules, which a reader never needs

    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (a container without passwd entry)
        return None


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
            folder.refresh()  # the erased entry's rows and terms are deleted (search_index.py: secure delete)
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
    from sessiontree.search.search_stores import StoreSearch

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


__all__ = ["PLACEHOLDER", "RECORD_TYPE", "STUB_KEY", "erased", "is_stub", "records", "redact"]
