"""Forking and copying: the entries of a new session made of a root-to-target path of another (SPEC 4), and the source
of a copy or a fork: verified first, so a copy never launders damage (docs/audit.md, *Copies keep their provenance*),
or, when asked, what salvage mode reads of it, held in memory."""

from __future__ import annotations

from hashlib import sha256
from typing import TYPE_CHECKING, Any

import attrs

from sessiontree.audit.verify import verify
from sessiontree.content.blob_stores import digests_of
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry, LabelChanged, SessionRenamed, SessionStarted
from sessiontree.domain.ids import IdGenerator
from sessiontree.projections.base import LabelsProjection, SessionNameProjection, fold
from sessiontree.storage.jsonl_scan import salvage_log
from sessiontree.storage.recorder import InMemorySessionStorage
from sessiontree.storage.storage import SessionStorage
from sessiontree.storage.store import SessionStore

if TYPE_CHECKING:
    from sessiontree.session import Session


def fork_leaf(source: Session, entry_id: str | None, position: str) -> str | None:
    """The last entry of the path a fork copies (checked: ``"before"`` needs a user message)."""
    if entry_id is None:
        return source.leaf_id
    target = source.entry(entry_id)
    if position == "at":
        return entry_id
    role = getattr(getattr(target, "message", None), "role", "")
    if target.type != "message" or role != "user":
        kind = f"{target.type} ({role})" if target.type == "message" else target.type
        raise SessionError(
            "invalid_fork_target",
            f"cannot fork session {source.id} before entry {entry_id!r}: it is a {kind} entry, "
            "not a user message (use position='at')",
        )
    return target.parent_id


def fork_entries(source: Session, path: list[Entry], new_id: str, new_entry_id: IdGenerator, now: str) -> list[Entry]:
    """The path (same ids, versions renumbered), then the label and name entries that make the fork's labels and name the
    source's current ones. Label entries whose target is not on the path are left out (their target does not exist in
    the fork); their children are re-parented to the label's parent, as pi does."""
    out = _copied_path(path, new_id)
    _add_labels(out, source, new_id)
    name = source.get_session_name()
    if fold(SessionNameProjection(), out) != name:  # the fork carries the source's name (None clears one on the path)
        used = {e.id for e in out}
        entry_id = new_entry_id()
        while entry_id in used:
            entry_id = new_entry_id()
        renamed = SessionRenamed(
            originator_id=new_id, originator_version=len(out) + 2, timestamp=now, id=entry_id, parent_id=_last_id(out), name=name
        )
        out.append(renamed)
    return out


def _last_id(entries: list[Entry]) -> str | None:
    return entries[-1].id if entries else None


def _copied_path(path: list[Entry], new_id: str) -> list[Entry]:
    """The path's entries for the fork, without the labels whose target is not on it."""
    out: list[Entry] = []
    dropped = _labels_off_the_path(path)
    replaced: dict[str, str | None] = {}  # dropped label -> the parent its children get
    successor: dict[str, str | None] = {}  # dropped label -> the next entry kept after it
    pending: list[str] = []
    for entry in path:
        parent = entry.parent_id
        while parent in replaced:
            parent = replaced[parent]
        if entry.id in dropped:
            replaced[entry.id] = parent
            pending.append(entry.id)
            continue
        for label_id in pending:
            successor[label_id] = entry.id
        pending.clear()
        changes: dict[str, Any] = {"originator_id": new_id, "originator_version": len(out) + 2, "parent_id": parent}
        kept = getattr(entry, "first_kept_entry_id", None)
        if entry.type == "compaction" and kept in dropped:
            # The compaction kept from a label that cannot come along: keep from the entry
            # after it instead (labels are not context, so the context is the same).
            after = successor.get(kept)
            changes["first_kept_entry_id"] = after if after is not None and after != entry.id else None
        out.append(attrs.evolve(entry, **changes))
    return out


def _add_labels(out: list[Entry], source: Session, new_id: str) -> None:
    """Append to ``out`` the label entries that make its labels the source's current ones: each is the source's own latest
    label entry for the target, re-created after the path (its id and time kept, as pi does)."""
    on_path = {e.id for e in out}
    have, want = fold(LabelsProjection(), out), source.get_labels()
    latest = {e.target_id: e for e in source.find_entries("label") if isinstance(e, LabelChanged) and e.target_id in on_path}
    used = set(on_path)
    for target, label_entry in sorted(latest.items(), key=lambda kv: kv[1].originator_version):
        if want.get(target) == have.get(target) or label_entry.id in used:
            continue
        label = LabelChanged(
            originator_id=new_id, originator_version=len(out) + 2, timestamp=label_entry.timestamp, id=label_entry.id,
            parent_id=_last_id(out), target_id=target, label=want.get(target),
        )
        out.append(label)
        used.add(label_entry.id)


def _labels_off_the_path(path: list[Entry]) -> set[str]:
    """Label entries on the path whose target is not (or no longer) in the fork."""
    kept = {e.id for e in path}
    dropped: set[str] = set()
    changed = True
    while changed:
        changed = False
        for entry in path:
            if isinstance(entry, LabelChanged) and entry.id not in dropped and entry.target_id not in kept:
                dropped.add(entry.id)
                kept.discard(entry.id)
                changed = True
    return dropped


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
    meanwhile cannot take what the copy names; blob_stores.py). A blob missing or altered in the source is not copied."""
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
