"""Retention: prune whole sessions whose last change is older than a cut-off, deleting or archiving them.

``repo.prune(older_than=...)`` first computes the complete plan, every session it selects with its name, working
directory, last change, entries and size, and only then acts on it, one session at a time: archive (written whole
and fsynced) and delete. ``dry_run=True`` returns the plan and touches nothing; ``repo.apply_prune(plan)`` carries
out a plan shown earlier (the command line asks first). A session that changed since it was listed is kept. The
first failure stops the pruning: :class:`PruneError` carries what was done. See docs/repositories.md.

Each session is surveyed once (:class:`Survey`: entries, bytes, labels, and a fingerprint of the log) and deleted only
if its log still has that fingerprint, so an append that lands between the listing and the deletion keeps it. JSONL
deletes the file under its lock (the one each append takes), with its signed checkpoints and its listing-index entry
(a writer that appends later is told ``not_found``; nothing it is told was written is lost). A database deletes the
session's events and listing row in one transaction that first inserts a marker in the ``~deletions`` stream (so every
other process's listing view drops it too, ``database_index.py``) by the events insert we own
(``blob_tables.insert_events``: eventsourcing's own commits by itself); that takes PostgreSQL's events-table lock or
SQLite's write lock, keeping appends out, and the line count is checked inside it.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
from eventsourcing.persistence import IntegrityError, PersistenceError, StoredEvent

from sessiontree.audit.checkpoints import SIDECAR_SUFFIX, sidecar
from sessiontree.content.blob_stores import collect, digests_of, scope_of
from sessiontree.content.blob_tables import insert_events
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import format_timestamp, parse_timestamp
from sessiontree.domain.ids import now_iso
from sessiontree.retention.archive import ArchiveStore, archive_name, write_archive
from sessiontree.storage import database_index as db_index
from sessiontree.storage import folders
from sessiontree.storage.database import DatabaseStore
from sessiontree.storage.files import open_regular
from sessiontree.storage.jsonl_repo import JsonlStore
from sessiontree.storage.storage import SessionStorage
from sessiontree.storage.store import SessionInfo, SessionStore
from sessiontree.wire.jsontext import DECODE_ERRORS, dumps, loads
from sessiontree.wire.schema import is_pi_header, line_of

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE = re.compile(r"(\d+)([smhdw])")


def parse_age(text: str) -> timedelta:
    """``90d``, ``12h``, ``2w``, ``30m``, ``45s`` (or several: ``1w3d``) as a timedelta; ``ValueError`` otherwise."""
    compact = text.strip().lower().replace(" ", "")
    if not compact or _AGE.sub("", compact):
        raise ValueError(f"not an age: {text!r} (use a number and a unit: 90d, 12h, 2w, 30m, 45s)")
    return timedelta(seconds=sum(int(n) * _UNITS[unit] for n, unit in _AGE.findall(compact)))


@attrs.frozen
class PrunedSession:
    """One session a pruning selects: what a user needs to recognise it, and where its archive goes."""

    id: str
    name: str | None
    cwd: str
    modified: str  # its last change (ISO 8601)
    entries: int
    bytes: int | None  # its log's size (a file's size; a database's stored lines)
    location: str
    archive: str | None = None  # the archive file (to be) written, with archive=DIR
    survey: Survey | None = attrs.field(default=None, repr=False, eq=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in attrs.asdict(self, recurse=False).items() if k != "survey"}


@attrs.frozen
class PruneResult:
    """A pruning's plan (``dry_run``) or outcome: ``sessions`` lists every session selected, ``pruned`` the ids
    deleted (and archived), ``kept`` the selected ones left in place and why, ``protected`` the old sessions the rule
    keeps (labelled, named, pi's files) and why."""

    cutoff: str  # sessions whose last change is before this are selected
    older_than: timedelta
    dry_run: bool
    archive: str | None
    keep_labelled: bool
    keep_named: bool
    sessions: tuple[PrunedSession, ...]
    protected: tuple[tuple[str, str], ...] = ()
    pruned: tuple[str, ...] = ()
    kept: tuple[tuple[str, str], ...] = ()
    error: str | None = None

    @property
    def bytes(self) -> int:
        """The size of the sessions selected (what is known of it)."""
        return sum(s.bytes or 0 for s in self.sessions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cutoff": self.cutoff, "older_than_seconds": self.older_than.total_seconds(), "dry_run": self.dry_run,
            "archive": self.archive, "keep_labelled": self.keep_labelled, "keep_named": self.keep_named,
            "sessions": [s.to_dict() for s in self.sessions], "bytes": self.bytes,
            "protected": [{"id": i, "why": w} for i, w in self.protected], "pruned": list(self.pruned),
            "kept": [{"id": i, "why": w} for i, w in self.kept], "error": self.error,
        }


class PruneError(SessionError):
    """A pruning stopped at a failure; ``result`` lists what was done before it (nothing further was deleted)."""

    def __init__(self, error: SessionError, result: PruneResult) -> None:
        done = len(result.pruned)
        super().__init__(error.code, f"pruning stopped after {done} of {len(result.sessions)} session(s): {error.message}",
                         path=error.path, line=error.line)
        self.result = result


def prune(
    repo: Any, older_than: timedelta | str, *, keep_labelled: bool = True, keep_named: bool = False,
    dry_run: bool = False, archive: str | os.PathLike[str] | None = None, cwd: str | None = None,
    now: datetime | None = None,
) -> PruneResult:
    """Delete (with ``archive=DIR``: archive, then delete) every session of ``repo`` whose last change is older than
    ``older_than`` (a timedelta, or an age such as ``"90d"``), counted back from ``now`` (default: the repository's
    clock). Sessions with a label are kept unless ``keep_labelled=False``; a name protects one only with
    ``keep_named=True`` (apps often name every session); ``cwd`` limits it to sessions started there. The whole plan is
    computed first; ``dry_run=True`` returns it and changes nothing."""
    plan = plan_prune(repo, older_than, keep_labelled=keep_labelled, keep_named=keep_named, archive=archive, cwd=cwd,
                      now=now)
    return plan if dry_run else apply_prune(repo, plan)


def plan_prune(
    repo: Any, older_than: timedelta | str, *, keep_labelled: bool = True, keep_named: bool = False,
    archive: str | os.PathLike[str] | None = None, cwd: str | None = None, now: datetime | None = None,
) -> PruneResult:
    """Every session ``repo.prune`` would delete (see the module documentation); nothing is changed."""
    age = _age(older_than)
    moment = now if now is not None else repo._clock()
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise TypeError(f"now must be a timezone-aware datetime, not {moment!r}")
    why = foreign_reason(repo.store)
    if why is not None:
        raise SessionError("storage", f"not pruned: {why}")
    cutoff = moment - age
    folder = None if archive is None else os.fspath(archive)
    if folder is not None and folders.is_ours(folder):
        raise SessionError("storage", f"not pruned: {folder} is a sessiontree repository; archives go into a folder of "
                           "their own (they keep their content beside them, which the repository would collect)")
    chosen, protected = _select(repo, repo.list(cwd), cutoff, keep_labelled, keep_named, folder)
    return PruneResult(format_timestamp(cutoff), age, True, folder, keep_labelled, keep_named, tuple(chosen), tuple(protected))


def _age(older_than: Any) -> timedelta:
    if isinstance(older_than, str):
        older_than = parse_age(older_than)
    if not isinstance(older_than, timedelta):
        raise TypeError(f"older_than must be a timedelta (or an age such as '90d'), not {older_than!r}")
    if older_than < timedelta(0):
        raise ValueError(f"older_than must not be negative, not {older_than}")
    return older_than


def _select(
    repo: Any, infos: Iterable[SessionInfo], cutoff: datetime, keep_labelled: bool, keep_named: bool, folder: str | None,
) -> tuple[list[PrunedSession], list[tuple[str, str]]]:
    chosen, protected = [], []
    for info in infos:
        try:
            if parse_timestamp(info.modified) >= cutoff:
                continue
        except (ValueError, TypeError):
            protected.append((info.id, f"its last change {info.modified!r} is not a time: kept"))
            continue
        if keep_named and info.name:
            protected.append((info.id, f"named {info.name!r}"))
            continue
        try:
            surveyed = survey(repo.store, info.id)
        except SessionError as exc:
            if exc.code == "not_found":
                continue  # deleted since the listing
            if exc.code not in ("corrupt", "unsupported_version"):
                raise
            protected.append((info.id, f"cannot be read ({exc}): kept, run verify"))
            continue
        if surveyed.pi_dialect:
            protected.append((info.id, "a pi session file (read-only for sessiontree)"))
        elif keep_labelled and surveyed.labelled:
            protected.append((info.id, "labelled"))
        else:
            where = None if folder is None else os.path.join(folder, archive_name(info.id))
            chosen.append(PrunedSession(info.id, info.name, info.cwd, info.modified, surveyed.lines - 1, surveyed.bytes,
                                        info.path, where, surveyed))
    return chosen, protected


def apply_prune(repo: Any, plan: PruneResult) -> PruneResult:
    """Carry out ``plan`` (from ``repo.prune(..., dry_run=True)``): archive, then delete, each session in turn."""
    pruned: list[str] = []
    kept: list[tuple[str, str]] = []
    try:
        for item in plan.sessions:
            try:
                _prune_one(repo.store, item, plan.archive)
            except ChangedError as exc:
                kept.append((item.id, exc.message))
                continue
            pruned.append(item.id)
    except (SessionError, OSError) as exc:
        error = exc if isinstance(exc, SessionError) else SessionError("storage", f"{exc.strerror or exc}")
        done = attrs.evolve(plan, dry_run=False, pruned=tuple(pruned), kept=tuple(kept), error=str(error))
        raise PruneError(error, done) from exc
    finally:
        finish(repo.store)
    return attrs.evolve(plan, dry_run=False, pruned=tuple(pruned), kept=tuple(kept))


def _prune_one(store: Any, item: PrunedSession, folder: str | None) -> None:
    surveyed = item.survey
    if surveyed is None:
        raise SessionError("invalid_entry", f"session {item.id}: this plan was not made by plan_prune; make a new one")
    written = None
    lines = lines_for_archive(store, item.id, surveyed)
    if folder is not None:
        written = write_archive(folder, item.id, lines, checkpoints_of(surveyed), store.blobs)
    try:
        delete_surveyed(store, item.id, surveyed)
    except ChangedError:
        if written is not None:  # the session stays: its archive would only be a stale copy
            written.unlink(missing_ok=True)
            Path(f"{written}{SIDECAR_SUFFIX}").unlink(missing_ok=True)
        raise
    collect(store.blobs, scope_of(store), digests_of(lines))  # its content goes too, unless another session names it


class ChangedError(SessionError):
    """The session changed (or a writer holds it) since it was surveyed: it is kept."""

    def __init__(self, session_id: str, why: str) -> None:
        super().__init__("conflict", f"session {session_id} {why} since it was listed for pruning; it is kept")


@attrs.frozen
class Survey:
    """One session's log as pruning saw it."""

    lines: int  # the header included
    bytes: int  # the log's size: its lines with their newlines (for a file, the file's size)
    labelled: bool  # some entry carries a label now
    fingerprint: str  # a digest of the line count and the last line
    path: str | None = None  # the session file (JSONL)
    pi_dialect: bool = False  # a pi file: never pruned (pi's files are read-only for sessiontree)


def survey(store: SessionStore, session_id: str) -> Survey:
    """Read the session's log once and summarise it (``not_found`` if it is gone)."""
    storage = store.attach(session_id)
    try:
        lines = storage.read_lines()
        path = getattr(storage, "path", None)
    finally:
        storage.close()
    size = sum(len(line) + 1 for line in lines)
    if path is not None:
        size = _size(Path(path), size)
    where = None if path is None else os.fspath(path)
    return Survey(len(lines), size, _labelled(lines), fingerprint(lines), where, bool(lines) and _is_pi(lines[0]))


def _is_pi(header_line: bytes) -> bool:
    try:
        header = loads(header_line)
    except DECODE_ERRORS:
        return False
    return isinstance(header, dict) and is_pi_header(header)


def _size(path: Path, default: int) -> int:
    try:
        return os.stat(path, follow_symlinks=False).st_size
    except OSError:
        return default


def fingerprint(lines: Sequence[bytes]) -> str:
    last = lines[-1] if lines else b""
    return hashlib.sha256(b"%d\n" % len(lines) + last).hexdigest()


def _labelled(lines: Sequence[bytes]) -> bool:
    """Does any entry carry a label after the whole log (latest label per target wins; empty clears)?"""
    labels: dict[Any, bool] = {}
    for line in lines[1:]:
        if b'"label"' not in line:
            continue  # cheap: most lines are not label entries
        try:
            data = loads(line)
        except DECODE_ERRORS:
            continue
        entry = line_of(data)
        if entry is not None and entry.type == "label":
            label = entry.label
            labels[entry.target] = isinstance(label, str) and bool(label.strip())
    return any(labels.values())


def foreign_reason(store: SessionStore) -> str | None:
    """Why pruning refuses this store (a folder of someone else's sessions, such as pi's, or of archives), or None."""
    if isinstance(store, ArchiveStore):
        return f"{store.root} is a folder of archives, read-only: archives are not pruned again"
    if not isinstance(store, JsonlStore) or folders.is_ours(store.root) or not store.root.exists():
        return None
    why = folders.foreign_reason(store.root)
    if why is None:
        return None
    return (f"{store.root} is not sessiontree's own folder: it {why}. sessiontree deletes only in folders of its own, "
            "and pi's session files are read-only for it; prune pi's sessions with pi, or import them into a repository "
            "of ours")


def _attach(store: SessionStore, session_id: str) -> SessionStorage:
    try:
        return store.attach(session_id)
    except SessionError as exc:
        if exc.code == "not_found":
            raise ChangedError(session_id, "was deleted") from None
        raise


def lines_for_archive(store: SessionStore, session_id: str, expected: Survey) -> list[bytes]:
    """The log's lines, checked to be the ones surveyed."""
    storage = _attach(store, session_id)
    try:
        lines = storage.read_lines()
    finally:
        storage.close()
    if fingerprint(lines) != expected.fingerprint:
        raise ChangedError(session_id, "changed")
    return lines


def checkpoints_of(expected: Survey) -> bytes | None:
    """The signed checkpoints kept beside the session's file, as they are (None: there are none)."""
    if expected.path is None:
        return None
    try:
        fd = open_regular(sidecar(expected.path), follow=False)
    except OSError:
        return None
    try:
        return os.pread(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)


def delete_surveyed(store: SessionStore, session_id: str, expected: Survey) -> None:
    """Delete the whole session if its log is still as surveyed (else ``ChangedError``)."""
    if isinstance(store, JsonlStore):
        _delete_file(store, session_id, expected)
    elif isinstance(store, DatabaseStore):
        delete_rows(store, session_id, expected.lines, lambda: ChangedError(session_id, "changed or was deleted"))
    else:
        lines_for_archive(store, session_id, expected)  # still as surveyed
        store.remove(session_id)


def _delete_file(store: JsonlStore, session_id: str, expected: Survey) -> None:
    """Unlink the file while holding its lock (no append can land meanwhile: one in flight is waited for, briefly), then
    its checkpoints; the listing index drops it at :func:`finish`."""
    if expected.path is None:
        raise ChangedError(session_id, "moved")
    path = Path(expected.path)
    try:
        fd = open_regular(path, follow=False)
    except FileNotFoundError:
        raise ChangedError(session_id, "was deleted") from None
    except OSError as exc:
        raise SessionError("storage", f"cannot open the file to delete it: {exc.strerror or exc}", path=str(path)) from exc
    try:
        deadline = time.monotonic() + 2.0  # an append holds the lock for microseconds
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                if time.monotonic() >= deadline:
                    raise ChangedError(session_id, "is held by a writer") from None
                time.sleep(0.001)
        if os.fstat(fd).st_size != expected.bytes or not os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False)):
            raise ChangedError(session_id, "changed")
        try:
            path.unlink()
            sidecar(path).unlink(missing_ok=True)
        except OSError as exc:
            raise SessionError("storage", f"cannot delete the file: {exc.strerror or exc}", path=str(path)) from exc
    finally:
        os.close(fd)  # the lock goes with the descriptor


def finish(store: SessionStore) -> None:
    """Write down what pruning changed: a JSONL directory's listing index (which quotes first messages) is rewritten
    without the deleted files now, not at the next listing."""
    if isinstance(store, JsonlStore):
        store.index.refresh()


_TRIES = 20


def delete_rows(store: DatabaseStore, session_id: str, lines: int, changed: Callable[[], SessionError]) -> None:
    """Delete the session if it still has ``lines`` lines (else raise ``changed()``), in one transaction."""
    if store.module == "eventsourcing.popo":
        _delete_popo(store, session_id, lines, changed)
        return
    if hasattr(store.recorder, "delete_session"):  # PostgreSQL's lock-free recorder keeps its own listing table
        try:
            if not store.recorder.delete_session(session_id, lines):
                raise changed()
        except PersistenceError as exc:
            raise SessionError("storage", f"could not delete session {session_id} in {store.url}: {exc}") from exc
        return
    state = dumps({"type": "deleted", "id": session_id, "timestamp": now_iso()})
    for _ in range(_TRIES):
        marker = StoredEvent(db_index.DELETIONS_STREAM, _next_marker(store), db_index.DELETED_TOPIC, state)
        try:
            if store.module == "eventsourcing.sqlite":
                _delete_sqlite(store, session_id, marker, lines, changed)
            else:
                _delete_postgres(store, session_id, marker, lines, changed)
            return
        except IntegrityError:
            continue  # another process recorded a deletion with that version: take the next one
        except PersistenceError as exc:
            raise SessionError("storage", f"could not delete session {session_id} in {store.url}: {exc}") from exc
    raise SessionError("conflict", f"could not record the deletion of session {session_id} in {store.url}")


def _delete_popo(store: DatabaseStore, session_id: str, lines: int, changed: Callable[[], SessionError]) -> None:
    recorder: Any = store.recorder
    with recorder.lock:  # the in-memory recorder's own lock: nothing is appended meanwhile
        if len(recorder.select_events(session_id)) != lines:
            raise changed()
        recorder.delete_stream(session_id)
        view: Any = store.view
        view.forget(session_id)
    store.recorder.insert_events([StoredEvent(db_index.DELETIONS_STREAM, _next_marker(store), db_index.DELETED_TOPIC,
                                              dumps({"type": "deleted", "id": session_id, "timestamp": now_iso()}))])


def _next_marker(store: DatabaseStore) -> int:
    last = store.recorder.select_events(db_index.DELETIONS_STREAM, desc=True, limit=1)
    return last[0].originator_version + 1 if last else 1


def _delete_sqlite(store: DatabaseStore, session_id: str, marker: StoredEvent, lines: int,
                   changed: Callable[[], SessionError]) -> None:
    recorder: Any = store.recorder
    table = recorder.events_table_name
    with recorder.datastore.transaction(commit=True) as c:
        insert_events(recorder, c, [marker])  # first: it takes the write lock and the highest notification id
        c.execute(f"SELECT COUNT(*) FROM {table} WHERE originator_id = ?", (session_id,))
        if c.fetchone()[0] != lines:
            raise changed()  # rolls the marker back
        c.execute(f"DELETE FROM {table} WHERE originator_id = ?", (session_id,))
        c.execute(f"DELETE FROM {store.view.table} WHERE session_id = ?", (session_id,))  # type: ignore[attr-defined]  # the SQLite view


def _delete_postgres(store: DatabaseStore, session_id: str, marker: StoredEvent, lines: int,
                     changed: Callable[[], SessionError]) -> None:
    from psycopg.sql import SQL, Identifier

    recorder: Any = store.recorder
    view: Any = store.view
    events = (Identifier(recorder.datastore.schema), Identifier(recorder.events_table_name))
    with recorder.datastore.transaction(commit=True) as curs:
        insert_events(recorder, curs, [marker])  # locks the events table: no append to the session meanwhile
        curs.execute(SQL("SELECT COUNT(*) AS n FROM {0}.{1} WHERE originator_id = %s").format(*events), (session_id,))
        if curs.fetchone()["n"] != lines:
            raise changed()  # rolls the marker back
        curs.execute(SQL("DELETE FROM {0}.{1} WHERE originator_id = %s").format(*events), (session_id,))
        curs.execute(SQL("DELETE FROM {0}.{1} WHERE session_id = %s").format(*view._names), (session_id,))
