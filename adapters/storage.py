"""What a session storage is, and the storage every eventsourcing recorder can back.

A storage keeps one session's event log. ``load`` returns the header and the entries
(possibly lazy); ``save`` appends new events atomically or raises ``SessionError``
(``conflict`` when another writer got there first, ``storage`` when the medium failed).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import orjson
from eventsourcing.persistence import (
    AggregateRecorder,
    ConnectionPoolClosedError,
    IntegrityError,
    Mapper,
    PersistenceError,
    StoredEvent,
)

from sessiontree.adapters import chain
from sessiontree.adapters.codec import Codec, native_codec
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted

TOPIC_PREFIX = "sessiontree:"


class SessionStorage(ABC):
    """One session's durable log (the port the Session service writes through)."""

    read_only: bool = False

    @property
    @abstractmethod
    def session_id(self) -> str: ...

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the log lives (a path, a URL or ``memory:<id>``), for messages and listings."""

    @abstractmethod
    def load(self) -> tuple[SessionStarted, Sequence[Any]]:
        """The header and every entry (decoded or lazy), in log order."""

    @abstractmethod
    def save(self, events: Sequence[Any]) -> None:
        """Append ``events`` (consecutive versions) atomically."""

    def load_prefix(self, version: int) -> tuple[SessionStarted, Sequence[Any]]:
        """The header and the entries up to ``version`` (time travel from storage)."""
        header, entries = self.load()
        return header, list(entries)[: max(0, version - 1)]

    def close(self) -> None:
        """Release resources (files, connections); the default holds none."""

    def read_lines(self) -> list[bytes]:
        """Every line of the log exactly as stored, the header first (what verify reads)."""
        raise SessionError("storage", f"session {self.session_id} at {self.location} cannot hand out its lines")

    def check_writable(self) -> None:
        if self.read_only:
            raise SessionError("storage", f"session {self.session_id} at {self.location} is open read-only")


class SessionMapper(Mapper[str]):
    """eventsourcing's Mapper with our codec: a stored event's state is the JSON line.

    Topics are ``sessiontree:<entry type>``; they are informative only, since the type is
    read back from the line itself and resolved through the codec's registry, never by
    importing a name found in stored data.
    """

    def __init__(self, codec: Codec | None = None) -> None:
        self.codec = codec or native_codec()
        self.transcoder = None  # type: ignore[assignment]
        self.compressor = None
        self.cipher = None

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        return self.stored_event(domain_event, self.codec.encode_event(domain_event))

    def stored_event(self, domain_event: Any, state: bytes) -> StoredEvent:
        """The stored event of ``domain_event`` whose state is ``state`` (its line)."""
        # positional: StoredEvent's fields are (originator_id, originator_version, topic, state)
        return StoredEvent(
            domain_event.originator_id, domain_event.originator_version, TOPIC_PREFIX + domain_event.type, state
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        return self.codec.decode_line(
            chain.strip(stored_event.state), str(stored_event.originator_id), stored_event.originator_version
        )


class RecorderSessionStorage(SessionStorage):
    """A session stored through an eventsourcing ``AggregateRecorder`` (POPO, SQLite, ...).

    Native lines are hash-chained (``adapters/chain.py``): ``chain_new_sessions`` (default
    True) chains a new session's header, and every later line follows the line before it.
    """

    chain_new_sessions = True

    def __init__(self, recorder: AggregateRecorder, session_id: str, *, location: str, mapper: SessionMapper | None = None):
        self.recorder = recorder
        self.mapper = mapper or SessionMapper()
        self._session_id = session_id
        self._location = location
        self.chain_head = chain.ChainHead()
        self.owner: Any = None  # what must live as long as this storage (a repository)

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def location(self) -> str:
        return self._location

    # -- the chain ------------------------------------------------------------------------

    def _previous_digest(self, version: int) -> bytes | None:
        """The digest line ``version`` chains to (None: that line is not chained)."""
        if version == 1:
            native = self.mapper.codec.dialect.name == "native"
            return chain.GENESIS if native and self.chain_new_sessions else None
        head = self.chain_head
        if head.version != version - 1:  # not looked yet (or stale: the insert will conflict)
            before = self._read_version(version - 1)
            if before is None:  # line version-1 is not there (yet): the append cannot follow it
                raise SessionError(
                    "conflict",
                    f"session {self._session_id}: version {version} is not the next one (there is no "
                    f"version {version - 1} to follow); reopen it and retry",
                )
            # an unchained line: is the log chained at all (its header says)?
            header = self._read_version(1) if chain.recorded(before) is None and version > 2 else None
            head.observe(version - 1, before, header=header)
        if head.digest is None and head.chained:
            raise SessionError(
                "corrupt",
                f"session {self._session_id} is hash-chained but version {version - 1} carries no chain "
                "digest: the log was damaged (run verify); it is not extended unchained",
            )
        return head.digest

    def _read_version(self, version: int) -> bytes | None:
        """The stored line of ``version``, or None if there is none."""
        try:
            found = self.recorder.select_events(self._session_id, gt=version - 1, lte=version)
        except (PersistenceError, ConnectionPoolClosedError) as exc:
            raise SessionError("storage", f"could not read session {self._session_id}: {_why(exc)}") from exc
        return bytes(found[-1].state) if found else None

    def to_lines(self, events: Sequence[Any]) -> tuple[list[bytes], bytes | None]:
        """The lines of ``events`` (sealed into the chain if the log is chained), and the
        digest of the last one; call :meth:`saved` once they are recorded."""
        first = events[0].originator_version
        head = self.chain_head
        # the head is current on every append but a session's first one
        digest = head.digest if first > 1 and head.version == first - 1 and (head.digest or not head.chained) else self._previous_digest(first)
        encode = self.mapper.codec.encode_event
        if digest is None:
            return list(map(encode, events)), None
        lines = []
        for event in events:
            if chain.reserved_by(event):
                raise SessionError(
                    "invalid_entry",
                    f"entry {getattr(event, 'id', event.originator_id)!r} of session {self._session_id} has a "
                    f"field named {chain.CHAIN_KEY!r}, which the tamper-evidence chain reserves",
                )
            line, digest = chain.seal(encode(event), digest)
            lines.append(line)
        return lines, digest

    def to_stored_events(self, events: Sequence[Any]) -> tuple[list[StoredEvent], bytes | None]:
        """The stored events for ``events`` (their states are :meth:`to_lines`), and the
        digest of the last one; call :meth:`saved` once they are recorded."""
        lines, digest = self.to_lines(events)
        stored_event = self.mapper.stored_event
        return [stored_event(event, line) for event, line in zip(events, lines)], digest

    def saved(self, events: Sequence[Any], digest: bytes | None) -> None:
        """Record that ``events`` are stored: the chain continues from the last one."""
        self.chain_head.set(events[-1].originator_version, digest)

    def _landed(self, stored: Sequence[StoredEvent]) -> bool | None:
        """Are exactly these lines stored already (an attempt that committed although its
        connection failed before the acknowledgement)? None when that cannot be told."""
        first = stored[0].originator_version
        try:
            found = self.recorder.select_events(self._session_id, gt=first - 1, lte=stored[-1].originator_version)
        except (PersistenceError, ConnectionPoolClosedError):
            return None
        # each line holds a random id, a timestamp and a chain digest: only this append matches
        return [bytes(s.state) for s in found] == [bytes(s.state) for s in stored]

    # -- reading and writing ------------------------------------------------------------

    def save(self, events: Sequence[Any]) -> None:
        """Record the events (sealed into the chain if it is chained) in one insert:
        ``conflict`` if another writer took their versions, ``storage`` if the medium fails."""
        self.check_writable()
        if not events:
            return
        stored, digest = self.to_stored_events(events)
        try:
            self.recorder.insert_events(stored)
        except IntegrityError as exc:
            if not self._landed(stored):
                raise self._conflict(exc, events) from None
        except ConnectionPoolClosedError as exc:
            raise self._save_failed(exc) from exc
        except PersistenceError as exc:
            # The commit may have happened before the connection failed: look before saying.
            landed = self._landed(stored)
            if not landed:
                raise self._save_failed(exc, unknown=landed is None, events=events) from exc
        self.saved(events, digest)

    def _conflict(self, exc: IntegrityError, events: Sequence[Any]) -> SessionError:
        return SessionError(
            "conflict",
            f"session {self._session_id} changed since it was read (version "
            f"{events[0].originator_version} is taken); reopen it and retry",
        )

    def _save_failed(self, exc: Exception, *, unknown: bool = False, events: Sequence[Any] = ()) -> SessionError:
        if not unknown:
            return SessionError("storage", f"could not save to session {self._session_id}: {_why(exc)}")
        ids = ", ".join(repr(getattr(e, "id", "?")) for e in events)
        return SessionError(
            "storage",
            f"could not save to session {self._session_id}: {_why(exc)}; whether it was saved is unknown "
            f"(the check failed too): append again with entry_id={ids} to retry without writing it twice",
        )

    def _select(self, lte: int | None = None) -> tuple[SessionStarted, list[Any]]:
        try:
            stored = self.recorder.select_events(self._session_id, lte=lte)
        except (PersistenceError, ConnectionPoolClosedError) as exc:
            raise SessionError("storage", f"could not read session {self._session_id}: {_why(exc)}") from exc
        if not stored:
            raise SessionError("not_found", f"session {self._session_id} not found at {self._location}")
        events = []
        for item in stored:
            try:
                events.append(self.mapper.to_domain_event(item))
            except SessionError as exc:
                raise SessionError(
                    exc.code,
                    f"session {self._session_id} event {item.originator_version}: {exc.message}",
                ) from None
        header = events[0]
        if not isinstance(header, SessionStarted):
            raise SessionError("corrupt", f"session {self._session_id} does not start with a header")
        if lte is None:
            self.chain_head.observe(stored[-1].originator_version, stored[-1].state, header=stored[0].state)
        return header, events[1:]

    def load(self) -> tuple[SessionStarted, Sequence[Any]]:
        return self._select()

    def read_lines(self) -> list[bytes]:
        try:
            stored = self.recorder.select_events(self._session_id)
        except (PersistenceError, ConnectionPoolClosedError) as exc:
            raise SessionError("storage", f"could not read session {self._session_id}: {_why(exc)}") from exc
        return [bytes(item.state) for item in stored]

    def write_lines(self, lines: Sequence[bytes]) -> None:
        """Store a whole new log given as its lines (the header first), exactly as they are:
        a verified copy keeps its source's bytes, chain digests included."""
        topics = [TOPIC_PREFIX + chain_free_type(line) for line in lines]
        stored = [StoredEvent(self._session_id, v, t, line) for v, (t, line) in enumerate(zip(topics, lines), 1)]
        try:
            self.recorder.insert_events(stored)
        except IntegrityError:
            raise SessionError("already_exists", f"session {self._session_id} already exists at {self._location}") from None
        except (PersistenceError, ConnectionPoolClosedError) as exc:
            raise self._save_failed(exc) from exc
        self.chain_head.observe(len(lines), lines[-1], header=lines[0])

    def load_prefix(self, version: int) -> tuple[SessionStarted, Sequence[Any]]:
        return self._select(lte=version)


def chain_free_type(line: bytes) -> str:
    """The ``type`` of a stored line (``SessionError('corrupt')`` when it has none)."""
    try:
        kind = orjson.loads(line).get("type")
    except (orjson.JSONDecodeError, AttributeError):
        kind = None
    if not isinstance(kind, str):
        raise SessionError("corrupt", f"a stored line has no string 'type': {line[:60]!r}")
    return kind


def _why(exc: BaseException) -> str:
    if isinstance(exc, ConnectionPoolClosedError):
        return "its repository was closed (open the session again from an open repository)"
    return " ".join(str(exc).split()) or type(exc).__name__
