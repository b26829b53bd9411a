"""What pruning needs from a store: a survey of one session's log, and the deletion of a whole session.

A :class:`Survey` is read from the log's lines (entries, bytes, labels, name) plus a fingerprint of the log as it was
surveyed; :func:`delete_surveyed` deletes the session only if its log still has that fingerprint, so an append that
lands between the listing and the deletion keeps the session. JSONL deletes the file under the file's lock (the one
each append takes), with its signed checkpoints and its listing-index entry (a writer that appends later finds the
file gone and is told ``not_found``; nothing it is told was written is lost); the databases delete in one transaction
(``retention_db.py``).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from sessiontree.audit.checkpoints import sidecar
from sessiontree.domain.errors import SessionError
from sessiontree.retention.archive import ArchiveStore
from sessiontree.retention.retention_db import delete_rows
from sessiontree.storage import folders
from sessiontree.storage.database import DatabaseStore
from sessiontree.storage.files import open_regular
from sessiontree.storage.jsonl_repo import JsonlStore
from sessiontree.storage.storage import SessionStorage
from sessiontree.storage.store import SessionStore
from sessiontree.wire.jsontext import DECODE_ERRORS, loads
from sessiontree.wire.schema import is_pi_header, line_of


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
        storage = _attach(store, session_id)
        try:
            if fingerprint(storage.read_lines()) != expected.fingerprint:
                raise ChangedError(session_id, "changed")
        finally:
            storage.close()
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
