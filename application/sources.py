"""The source of a copy or a fork: verified first, so a copy never launders damage (docs/audit.md, *Copies keep
their provenance*), or, when asked, what salvage mode reads of it, held in memory."""

from __future__ import annotations

from hashlib import sha256
from typing import Any

import attrs

from sessiontree.audit.verify import verify
from sessiontree.content.blob_stores import digests_of
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry, SessionStarted
from sessiontree.storage.jsonl_salvage import salvage_log
from sessiontree.storage.memory import InMemorySessionStorage
from sessiontree.storage.storage import SessionStorage
from sessiontree.storage.store import SessionStore


def verified_source(
    store: SessionStore, session_id: str, salvage: bool
) -> tuple[SessionStorage, dict[str, Any], tuple[SessionStarted, list[Entry]] | None]:
    """The source's storage, what a copy records of it, and (salvaging a log that fails
    verify) the header and entries salvage mode reads from it; None when it verifies."""
    storage = store.attach(session_id)
    try:
        report = verify(storage)
        record: dict[str, Any] = {"session_id": session_id, "lines": report.lines, "head": report.head}
        if report.ok:
            return storage, {**record, "dialect": report.dialect}, None
        if not salvage:
            raise SessionError(
                "corrupt",
                f"session {session_id} at {storage.location} does not verify ({report.problems[0]}); it is not "
                "copied (salvage copies what can be read, and records what it skipped)",
            )
        header, entries, skipped = salvage_log(storage.read_lines(), storage.location, blobs=storage.blobs)
    except BaseException:
        storage.close()
        raise
    record["skipped"] = sorted({line for line, _ in skipped} | {p.line for p in report.problems if p.line})
    return storage, record, (header, entries)


def salvaged_copy(storage: SessionStorage, header: SessionStarted, entries: list[Entry]) -> SessionStorage:
    """The entries salvage mode read from ``storage``, as a session in memory."""
    storage.close()
    copy = InMemorySessionStorage(
        session_id=header.originator_id, cwd=header.cwd, timestamp=header.timestamp, metadata=header.metadata,
        parent_session=header.parent_session,
    )
    copy.save([attrs.evolve(e, originator_id=header.originator_id, originator_version=v) for v, e in enumerate(entries, 2)])
    return copy


def copied_lines(store: Any, storage: SessionStorage, session_id: str) -> SessionStorage:
    """The native log of ``storage`` stored in ``store`` byte for byte, with the content it keeps out of line (in a
    database, in the transaction of the lines; elsewhere put before the lines, and again after them: a collection
    meanwhile cannot take what the copy names; blob_gc.py). A blob missing or altered in the source is not copied."""
    lines = storage.read_lines()
    wanted, target = digests_of(lines), store.blobs
    if not wanted or target is None:
        return store.store_lines(session_id, lines)  # type: ignore[no-any-return]
    if getattr(store, "joins_blobs", False):
        held = [(d, data) for d in wanted if (data := storage.blobs.get(d)) is not None and sha256(data).hexdigest() == d]
        return store.store_lines(session_id, lines, held)  # type: ignore[no-any-return]
    with target.writing():
        storage.blobs.copy_to(target, wanted)
        copied = store.store_lines(session_id, lines)
    storage.blobs.copy_to(target, wanted)
    return copied  # type: ignore[no-any-return]


def removed(store: Any, session_id: str) -> list[str]:
    """Remove a session from ``store`` (if it is there); the digests of the blobs its log referred to."""
    digests: list[str] = []
    if store.blobs is not None:
        try:
            storage = store.attach(session_id)
        except SessionError as exc:
            if exc.code != "not_found":
                raise
        else:
            try:
                digests = digests_of(storage.read_lines())
            finally:
                storage.close()
    store.remove(session_id)
    return digests


__all__ = ["copied_lines", "removed", "salvaged_copy", "verified_source"]
