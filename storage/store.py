"""Where many sessions live: the port every repository backend implements, and the in-memory one.

A :class:`SessionStore` hands out storages: it stores a new header (or a whole log line for
line), attaches to an existing session, deletes one and summarises them all for listings.
The application's repository (``sessiontree.repository``) builds sessions on top of it;
stores never make sessions themselves.
"""

from __future__ import annotations

import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted
from sessiontree.storage.index import Summary, fold_line
from sessiontree.storage.memory_recorder import MemoryRecorder
from sessiontree.storage.recorder import InMemorySessionStorage
from sessiontree.storage.storage import SessionStorage

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


@attrs.frozen
class SessionInfo:
    """One row of ``repo.list()``: what a session picker shows."""

    id: str
    path: str  # where it lives: a file path, a database URL with ``#id``, ``memory:<id>``
    cwd: str
    created: str  # the header timestamp (ISO 8601)
    modified: str  # when it was last written: its last entry's timestamp, or its header's when later (a fork)
    name: str | None
    message_count: int  # message entries on every branch
    first_message: str | None  # text of the first user message in log order
    parent_session: str | None = None
    forked_at: str | None = None  # a fork's: the entry of the source its branch was copied up to (when recorded)

    @property
    def location(self) -> str:
        return self.path

    @classmethod
    def from_summary(cls, summary: Summary, path: str) -> SessionInfo:
        return cls(
            id=summary.id, path=path, cwd=summary.cwd, created=summary.created, modified=summary.modified, name=summary.name,
            message_count=summary.message_count, first_message=summary.first_message, parent_session=summary.parent_session,
            forked_at=summary.forked_at,
        )


def check_session_id(session_id: Any) -> str:
    """Refuse ids that could leave a directory or a table key: separators, ``..``, NUL."""
    if not isinstance(session_id, str):
        raise TypeError(f"session id must be a str, not {session_id!r}")
    if not _SAFE_ID.fullmatch(session_id):
        raise SessionError(
            "invalid_entry",
            f"invalid session id {session_id!r}: use letters, digits, '.', '_' and '-' "
            "(no path separators, no leading dot, at most 200 characters)",
        )
    return session_id


class SessionStore(ABC):
    """Many sessions in one place (see the module documentation)."""

    @abstractmethod
    def store_header(self, header: SessionStarted) -> SessionStorage:
        """Create the session's log holding ``header`` (``already_exists`` if taken)."""

    @abstractmethod
    def store_lines(self, session_id: str, lines: Sequence[bytes]) -> SessionStorage:
        """Create the session's log from whole lines, byte for byte (a verified copy)."""

    @abstractmethod
    def attach(self, session_id: str) -> SessionStorage:
        """The storage of an existing session (``not_found`` otherwise)."""

    @abstractmethod
    def remove(self, session_id: str) -> None:
        """Delete a session if it exists."""

    @abstractmethod
    def infos(self, cwd: str | None) -> Iterable[SessionInfo]:
        """Every session (with ``cwd`` given, only those started there), any order."""

    def page(self, query: Any) -> list[SessionInfo]:
        """The sessions a ``listing.ListQuery`` asks for, newest first (a ``listing.SessionList``). This one filters
        every summary in Python; a store that can ask its database does so instead."""
        from sessiontree.storage.listing import select

        if query.cwds is None:
            return select(self.infos(None), query)
        # infos(cwd) decides what "started there" means for this store (JSONL: as pi compares paths).
        rows = {i.id: i for cwd in query.cwds for i in self.infos(cwd)}
        return select(rows.values(), attrs.evolve(query, cwds=None))

    def unreadable(self) -> list[tuple[str, str]]:
        """(path, reason) of what the last listing could not read, and so left out (a file or folder without read
        permission); stores that read no files have none."""
        return []

    def exists(self, session_id: str) -> bool:
        try:
            self.attach(session_id).close()
        except SessionError as exc:
            if exc.code == "not_found":
                return False
            raise
        return True

    def stream_ids(self) -> list[str]:
        """Every session id the store holds lines of, listed or not (a session whose header is gone is not listed:
        verify checks these too). A store whose listing reads the logs themselves has none unlisted: []."""
        return []

    def storage_of(self, session_id: str) -> SessionStorage:
        """The storage of a stream, without reading it (verify's way to a session that cannot be opened)."""
        return self.attach(session_id)

    def parent_reference(self, storage: SessionStorage) -> str:
        """What a fork of the session in ``storage`` records as its ``parent_session``."""
        return storage.session_id

    def close(self) -> None:  # noqa: B027 - optional: most hold nothing to release
        """Release connections and handles."""

    @property
    def blobs(self) -> Any:
        """Where this store's sessions keep content out of line (``blob_stores.py``); None: it has no store."""
        from sessiontree.content.blob_tables import blobs_of

        recorder = getattr(self, "recorder", None)  # the stores over an eventsourcing recorder keep one beside it
        return blobs_of(recorder) if recorder is not None else None

    def set_blob_threshold(self, threshold: Any) -> None:
        """The longest text its sessions keep inline, in bytes (None: everything inline, images too)."""
        from sessiontree.content.blob_stores import check_threshold

        checked, blobs = check_threshold(threshold), self.blobs
        if blobs is not None:
            blobs.threshold = checked


class MemoryStore(SessionStore):
    """Sessions held in memory, in one recorder (``memory_recorder.py``; tests, ephemeral agents)."""

    def __init__(self) -> None:
        self.recorder = MemoryRecorder()
        self._lock = threading.RLock()
        self._ids: dict[str, None] = {}
        self._summaries: dict[str, Summary] = {}

    def store_header(self, header: SessionStarted) -> SessionStorage:
        return self._create(check_session_id(header.originator_id), lambda storage: storage.save([header]))

    def store_lines(self, session_id: str, lines: Sequence[bytes]) -> SessionStorage:
        return self._create(session_id, lambda storage: storage.write_lines(lines))

    def _create(self, session_id: str, write: Callable[[InMemorySessionStorage], None]) -> SessionStorage:
        with self._lock:
            if session_id in self._ids:
                raise SessionError("already_exists", f"session {session_id} already exists in memory")
            storage = InMemorySessionStorage.attach(self.recorder, session_id)
            storage.owner = self  # an erasure asks it to fold the session's listing again (refold)
            write(storage)
            self._ids[session_id] = None
        return storage

    def attach(self, session_id: str) -> SessionStorage:
        if session_id not in self._ids:
            raise SessionError("not_found", f"session {session_id} not found in memory")
        storage = InMemorySessionStorage.attach(self.recorder, session_id)
        storage.owner = self
        return storage

    def stream_ids(self) -> list[str]:
        return self.recorder.stream_ids()

    def storage_of(self, session_id: str) -> SessionStorage:
        storage = InMemorySessionStorage.attach(self.recorder, session_id)
        storage.owner = self
        return storage

    def refold(self, session_id: str) -> None:
        """A line of the session was rewritten (erasure): its listing summary is folded again from the start."""
        with self._lock:
            self._summaries.pop(session_id, None)

    def remove(self, session_id: str) -> None:
        with self._lock:
            self._ids.pop(session_id, None)
            self._summaries.pop(session_id, None)
            self.recorder.delete_stream(session_id)

    def infos(self, cwd: str | None) -> Iterable[SessionInfo]:
        out = []
        for sid in list(self._ids):
            summary = self._summary(sid)
            if summary is not None and (cwd is None or summary.cwd == cwd):
                out.append(SessionInfo.from_summary(summary, f"memory:{sid}"))
        return out

    def _summary(self, sid: str) -> Summary | None:
        summary = self._summaries.get(sid)
        for stored in self.recorder.select_events(sid, gt=summary.version if summary else None):
            summary = fold_line(summary, stored.state)
            if summary is None:
                return None
        if summary is not None:
            self._summaries[sid] = summary
        return summary
