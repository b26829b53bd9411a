"""The session storage every eventsourcing recorder can back (in memory, SQLite, PostgreSQL).

Each event is one ``StoredEvent`` whose state is the event's JSON line, sealed into the hash chain exactly as a file
would hold it; eventsourcing's recorder inserts them atomically and refuses a taken version with its
``IntegrityError``, which is our ``conflict``. :class:`InMemorySessionStorage` is it on our in-memory recorder
(``memory_recorder.py``; a real adapter, not a test fake).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eventsourcing.persistence import (
    AggregateRecorder,
    ConnectionPoolClosedError,
    IntegrityError,
    Mapper,
    PersistenceError,
    StoredEvent,
)

from sessiontree.audit.line_replace import sealed_stub
from sessiontree.audit.row_replace import erased_since, erasures, replace_recorded
from sessiontree.content.blob_tables import TableBlobs, blobs_of
from sessiontree.domain import aggregate
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted
from sessiontree.domain.ids import new_session_id, now_iso
from sessiontree.domain.log import EntryLog
from sessiontree.storage.memory_recorder import MemoryRecorder
from sessiontree.storage.storage import SessionStorage
from sessiontree.wire.codec import Codec, native_codec
from sessiontree.wire.jsontext import DECODE_ERRORS, loads, too_many_values

TOPIC_PREFIX = "sessiontree:"


class SessionMapper(Mapper[str]):
    """eventsourcing's Mapper with our codec: a stored event's state is the JSON line. Topics (``sessiontree:<entry
    type>``) are informative only: the type is read back from the line itself and resolved through the codec's
    schemas, never by importing a name found in stored data."""

    def __init__(self, codec: Codec | None = None) -> None:
        self.codec = codec or native_codec()
        self.transcoder = None  # type: ignore[assignment]  # the line is the state: no transcoding
        self.compressor = None
        self.cipher = None

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        return stored_event(domain_event.originator_id, domain_event.originator_version, self.codec.encode_event(domain_event))

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        return self.codec.decode_line(bytes(stored_event.state), str(stored_event.originator_id), stored_event.originator_version)


def stored_event(originator_id: str, version: int, line: bytes) -> StoredEvent:
    """The stored event holding ``line`` (its topic names the line's type); a line no reader would parse is refused."""
    if (problem := too_many_values(line)) is not None:
        raise SessionError("invalid_entry", f"the entry's {problem}: no reader would parse it, so it is not stored")
    try:
        kind = loads(line).get("type")
    except (*DECODE_ERRORS, AttributeError):
        kind = None
    if not isinstance(kind, str):
        raise SessionError("corrupt", f"a line has no string 'type': {line[:60]!r}")
    return StoredEvent(originator_id, version, TOPIC_PREFIX + kind, line)


class RecorderSessionStorage(SessionStorage):
    """A session stored through an eventsourcing ``AggregateRecorder`` (in memory, SQLite, ...)."""

    def __init__(self, recorder: AggregateRecorder, session_id: str, *, location: str, codec: Codec | None = None) -> None:
        codec = codec or native_codec()
        super().__init__(codec, blobs_of(recorder) if codec.dialect.name == "native" else None)
        self.recorder = recorder
        self._session_id = session_id
        self._location = location
        self.owner: Any = None  # what must live as long as this storage (a repository)
        self._erasures: int | None = None  # the store's erasure count when this storage last read the whole log

    def _select(self, **kwargs: Any) -> list[bytes]:
        try:
            return [bytes(s.state) for s in self.recorder.select_events(self._session_id, **kwargs)]
        except (PersistenceError, ConnectionPoolClosedError) as exc:
            raise SessionError("storage", f"could not read session {self._session_id}: {_why(exc)}") from exc

    def line_before(self, version: int) -> tuple[bytes, bytes | None]:
        before = self._select(gt=version - 2, lte=version - 1)
        if not before:  # line version-1 is not there (yet): the append cannot follow it
            raise self.conflict(version, f"there is no version {version - 1} to follow")
        header = self._select(lte=1)[0] if self.pipeline.recorded_digest(before[-1]) is None and version > 2 else None
        return before[-1], header

    def save(self, events: Sequence[Any]) -> None:
        """Record the events in one insert: ``conflict`` if another writer took their versions, ``storage`` if the
        medium fails. When the outcome of a failed commit is unknown, the rows are looked for before anything is reported."""
        self.check_writable()
        if not events:
            return
        first = events[0].originator_version
        put: list[tuple[str, bytes]] = []
        # a database's blobs go in the transaction of the lines (blob_tables.py); elsewhere put before and after them
        table = self.blobs if self.joins_blobs and isinstance(self.blobs, TableBlobs) else None
        pipeline, digest = self.pipeline, self.previous_digest(first)
        lines, digest = pipeline.seal(pipeline.lines(events, put, defer=table is not None), digest)
        stored = [stored_event(self._session_id, first + i, line) for i, line in enumerate(lines)]
        try:
            if table is not None and put:
                table.insert_with(self.recorder, stored, put)
            elif first > 1 and isinstance(self.recorder, MemoryRecorder):  # only after a stored line (SQLite: a trigger,
                # PostgreSQL: the listing row's lock): an append to a session deleted meanwhile stores nothing
                self.recorder.insert_following(stored)
            else:
                self.recorder.insert_events(stored)
        except IntegrityError:
            if not self._landed(lines, first):
                raise self._refused(first) from None
        except ConnectionPoolClosedError as exc:
            raise self._failed(exc) from exc
        except PersistenceError as exc:
            landed = self._landed(lines, first)
            if not landed:
                raise self._failed(exc, events if landed is None else ()) from exc
        for blob_digest, blob in put if table is None else ():  # again, now that the line refers to it: a collector
            self.blobs.put(blob_digest, blob)  # may have taken it meanwhile
        self.pipeline.head.set(first + len(lines) - 1, digest)

    def _refused(self, first: int) -> SessionError:
        """The error of an insert the store refused: ``not_found`` when the session is gone (deleted or pruned after
        this storage read it: nothing was stored), else ``conflict`` (another writer took the version)."""
        if first > 1:
            try:
                gone = not self._select(limit=1)
            except SessionError:
                gone = False
            if gone:
                return SessionError("not_found", f"session {self._session_id} is no longer stored at {self._location} "
                                    "(deleted or pruned after it was opened): the append was not stored")
        return self.conflict(first, taken=True)

    def _landed(self, lines: list[bytes], first: int) -> bool | None:
        """Are exactly these lines stored (an attempt that committed although its connection
        failed before the acknowledgement)? None when that cannot be told. Each line holds a
        random id, a timestamp and a chain digest: only this append matches."""
        try:
            return self._select(gt=first - 1, lte=first + len(lines) - 1) == lines
        except SessionError:
            return None

    def _failed(self, exc: Exception, unknown: Sequence[Any] = ()) -> SessionError:
        why = f"could not save to session {self._session_id}: {_why(exc)}"
        if not unknown:
            return SessionError("storage", why)
        ids = ", ".join(repr(getattr(e, "id", "?")) for e in unknown)
        return SessionError("storage", f"{why}; whether it was saved is unknown (the check failed too): append again with "
                            f"entry_id={ids} to retry without writing it twice")

    def write_lines(self, lines: Sequence[bytes], blobs: Sequence[tuple[str, bytes]] = ()) -> None:
        """Store a whole new log given as its lines (the header first), exactly as they are:
        a verified copy keeps its source's bytes, chain digests included. ``blobs`` (digest, bytes): the content
        they name, stored in the same transaction (``joins_blobs``)."""
        stored = [stored_event(self._session_id, v, line) for v, line in enumerate(lines, 1)]
        try:
            if blobs:
                assert isinstance(self.blobs, TableBlobs)  # the caller asked joins_blobs
                self.blobs.insert_with(self.recorder, stored, blobs)
            else:
                self.recorder.insert_events(stored)
        except IntegrityError:
            raise SessionError("already_exists", f"session {self._session_id} already exists at {self._location}") from None
        except (PersistenceError, ConnectionPoolClosedError) as exc:
            raise self._failed(exc) from exc
        self.pipeline.head.observe(len(lines), lines[-1], header=lines[0])

    @property
    def joins_blobs(self) -> bool:
        """Are blobs stored in the transaction of the lines naming them (a database: ``blob_tables.py``)?"""
        return isinstance(self.blobs, TableBlobs) and self.blobs.joins(self.recorder)

    def read_lines(self) -> list[bytes]:
        return self._select()

    can_replace_lines = True

    def replace_line(self, version: int, canonical: bytes, digest: str | None) -> None:
        self.check_writable()
        try:
            replace_recorded(self.recorder, self._session_id, version, sealed_stub(canonical, digest),
                             getattr(self.owner, "refold", None))
        except LookupError as exc:
            raise self.conflict(version, str(exc)) from None
        except (PersistenceError, ConnectionPoolClosedError) as exc:
            raise self._failed(exc) from exc

    def stamp(self) -> tuple[int, int]:
        """(the store's erasure count, the session's last version): a rewritten line moves the first (row_replace.py),
        an append the second."""
        try:
            last = self.recorder.select_events(self._session_id, desc=True, limit=1)
            return erasures(self.recorder), (last[0].originator_version if last else 0)
        except (PersistenceError, ConnectionPoolClosedError) as exc:
            raise SessionError("storage", f"could not read session {self._session_id}: {_why(exc)}") from exc

    def load_prefix(self, version: int) -> tuple[SessionStarted, EntryLog]:
        return self._decoded(self._select(lte=version), observe=False)

    def load(self) -> tuple[SessionStarted, EntryLog]:
        try:  # counted before the rows are read: an erasure in between is taken for a later one (read again), not missed
            self._erasures = erasures(self.recorder)
        except (PersistenceError, ConnectionPoolClosedError) as exc:
            raise SessionError("storage", f"could not read session {self._session_id}: {_why(exc)}") from exc
        return super().load()

    def entries_after(self, version: int) -> list[Any]:
        """The entries after ``version``, read with one select (``not_found`` if the session is gone: a prune;
        ``conflict`` if a line this storage read was rewritten since: an erasure, as a rewritten file is)."""
        if self._erasures is not None:
            try:
                self._erasures, rewritten = erased_since(self.recorder, self._erasures, self._session_id)
            except (PersistenceError, ConnectionPoolClosedError) as exc:
                raise SessionError("storage", f"could not read session {self._session_id}: {_why(exc)}") from exc
            if rewritten:
                raise SessionError("conflict", f"session {self._session_id} at {self._location}: a line was rewritten "
                                   "(erased) since it was read, so what this object holds is not the log: open it again; "
                                   "nothing was written")
        lines = self._select(gt=version)
        if not lines and not self._select(lte=1):
            raise SessionError("not_found", f"session {self._session_id} no longer exists at {self._location} (deleted "
                               "since it was opened: a prune?); nothing was written")
        decode = self.decode_stored
        return [decode(line, v) for v, line in enumerate(lines, version + 1)]


def _why(exc: BaseException) -> str:
    if isinstance(exc, ConnectionPoolClosedError):
        return "its repository was closed (open the session again from an open repository)"
    return " ".join(str(exc).split()) or type(exc).__name__


class InMemorySessionStorage(RecorderSessionStorage):
    """One session held in memory; two ``Session`` objects on it see each other's appends.

    ``InMemorySessionStorage()`` starts a new empty session; ``recorder`` lets a repository
    keep many sessions in one recorder.
    """

    def __init__(
        self, *, cwd: str = "", metadata: Mapping[str, Any] | None = None, session_id: str | None = None,
        parent_session: str | None = None, timestamp: str | None = None,
        recorder: MemoryRecorder | None = None, _existing: bool = False,
    ) -> None:
        if session_id is not None and (not isinstance(session_id, str) or not session_id):
            raise TypeError(f"session_id must be a non-empty str or None, not {session_id!r}")
        sid = session_id if session_id is not None else new_session_id()
        super().__init__(recorder or MemoryRecorder(), sid, location=f"memory:{sid}")
        if not _existing:
            header = aggregate.start(
                session_id=sid, timestamp=timestamp or now_iso(), cwd=cwd, parent_session=parent_session, metadata=metadata
            )
            self.save([header])

    @classmethod
    def create(
        cls, *, cwd: str = "", metadata: Mapping[str, Any] | None = None, session_id: str | None = None,
        parent_session: str | None = None, timestamp: str | None = None,
    ) -> InMemorySessionStorage:
        """A new, empty session in memory (``timestamp``: the header's, default now)."""
        return cls(cwd=cwd, metadata=metadata, session_id=session_id, parent_session=parent_session, timestamp=timestamp)

    @classmethod
    def attach(cls, recorder: MemoryRecorder, session_id: str) -> InMemorySessionStorage:
        """The storage of a session that already exists in ``recorder``."""
        return cls(session_id=session_id, recorder=recorder, _existing=True)
