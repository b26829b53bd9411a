"""Session repositories: create, open, list, delete, fork and copy whole sessions.

:class:`SessionRepo` holds what every backend shares: forking (a new session made of a
root-to-target path, SPEC 4), copying a session from another repository losslessly,
sorting listings newest first and building ``Session`` objects with the repository's
options and app projections. A backend supplies five primitives: store a new header,
attach to an existing session, delete one, say whether one exists, and summarise them.

:class:`InMemorySessionRepo` keeps every session in one eventsourcing POPO recorder.
"""

from __future__ import annotations

import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import orjson
from eventsourcing.popo import POPOAggregateRecorder

from sessiontree.adapters.index import Summary
from sessiontree.adapters.memory import InMemorySessionStorage
from sessiontree.adapters.storage import SessionStorage
from sessiontree.domain.aggregate import SessionAggregate
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import (
    Entry,
    LabelChanged,
    SessionRenamed,
    SessionStarted,
    format_timestamp,
    parse_timestamp,
)
from sessiontree.domain.ids import Clock, IdGenerator, new_entry_id, new_session_id, now_iso, utc_now

if TYPE_CHECKING:
    from sessiontree.projections.context import SessionContextBuildOptions
    from sessiontree.session import Session

POSITIONS = ("before", "at")
SOURCE_KEY = "source"  # a header field: where a fork or a salvaged copy came from (docs/file-format.md)
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


@attrs.frozen
class SessionInfo:
    """One row of ``repo.list()``: what a session picker shows."""

    id: str
    path: str  # where it lives: a file path, a database URL with ``#id``, ``memory:<id>``
    cwd: str
    created: str  # the header timestamp (ISO 8601)
    modified: str  # the last entry's timestamp (the header's for an empty session)
    name: str | None
    message_count: int  # message entries on every branch
    first_message: str | None  # text of the first user message in log order
    parent_session: str | None = None

    @property
    def location(self) -> str:
        return self.path

    @classmethod
    def from_summary(cls, summary: Summary, path: str) -> SessionInfo:
        return cls(
            id=summary.id,
            path=path,
            cwd=summary.cwd,
            created=summary.created,
            modified=summary.modified,
            name=summary.name,
            message_count=summary.message_count,
            first_message=summary.first_message,
            parent_session=summary.parent_session,
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


def newest_first(infos: Iterable[SessionInfo]) -> list[SessionInfo]:
    """Sort a listing by modification time, newest first (ties: newest creation, then id)."""

    def key(info: SessionInfo) -> tuple[str, str, str]:
        return (_sortable(info.modified), _sortable(info.created), info.id)

    return sorted(infos, key=key, reverse=True)


def _sortable(timestamp: str) -> str:
    """A string that sorts chronologically: our own ``...sss.mmmZ`` form as it is (the common
    case, no parsing), anything else converted to it."""
    if len(timestamp) == 24 and timestamp[-1] == "Z" and timestamp[10] == "T":
        return timestamp
    try:
        return format_timestamp(parse_timestamp(timestamp))
    except (ValueError, TypeError, IndexError, OverflowError):
        return ""


def materialise(entries: Iterable[Any]) -> list[Entry]:
    """Decoded entry events (a storage may hand out lazy entries)."""
    return [e if isinstance(e, Entry) else e.load() for e in entries]


class SessionRepo(ABC):
    """Many sessions in one place. ``create``, ``open`` and ``fork`` return ``Session``."""

    def __init__(
        self,
        *,
        options: SessionContextBuildOptions | None = None,
        projections: Sequence[Any] = (),
        clock: Clock | None = None,
        id_generator: IdGenerator | None = None,
    ) -> None:
        self.options = options
        self.projections = tuple(projections)
        self._clock = clock or utc_now
        self._new_entry_id = id_generator or new_entry_id

    # -- what a backend provides ------------------------------------------------------

    @abstractmethod
    def _store_header(self, header: SessionStarted) -> SessionStorage:
        """Create the session's log holding ``header`` (``already_exists`` if taken)."""

    @abstractmethod
    def _attach(self, session_id: str) -> SessionStorage:
        """The storage of an existing session (``not_found`` otherwise)."""

    @abstractmethod
    def _remove(self, session_id: str) -> None:
        """Delete a session if it exists."""

    @abstractmethod
    def _infos(self, cwd: str | None) -> Iterable[SessionInfo]:
        """Every session (with ``cwd`` given, only those started there), any order."""

    def exists(self, session_id: str) -> bool:
        try:
            self._attach(check_session_id(session_id)).close()
        except SessionError as exc:
            if exc.code == "not_found":
                return False
            raise
        return True

    def _parent_reference(self, session: Session) -> str:
        """What a fork records as its ``parent_session`` (the source id; JSONL: its path)."""
        return session.id

    def close(self) -> None:
        """Release connections and handles."""

    def __enter__(self) -> SessionRepo:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the shared API ---------------------------------------------------------------

    def _session(self, storage: SessionStorage) -> Session:
        from sessiontree.session import Session

        return Session(
            storage, self.options, clock=self._clock, id_generator=self._new_entry_id, projections=self.projections
        )

    def create(
        self,
        cwd: str = "",
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
        parent_session: str | None = None,
    ) -> Session:
        """A new, empty session (with a ``session_info`` entry when ``name`` is given)."""
        sid = check_session_id(session_id) if session_id is not None else new_session_id()
        header = SessionAggregate.create(
            session_id=sid,
            timestamp=now_iso(self._clock),
            cwd=cwd,
            parent_session=parent_session,
            metadata=metadata,
        ).header
        session = self._session(self._store_header(header))
        if name is not None:
            session.append_session_info(name)
        return session

    def open(self, session_id: str) -> Session:
        """The session with this id (``SessionError('not_found')`` if there is none)."""
        return self._session(self._attach(check_session_id(session_id)))

    def list(self, cwd: str | None = None) -> list[SessionInfo]:
        """Every session (or those started in ``cwd``), most recently modified first."""
        return newest_first(self._infos(cwd))

    def delete(self, session_id: str) -> None:
        """Delete a session; deleting one that does not exist is not an error."""
        self._remove(check_session_id(session_id))

    def fork(
        self, session_id: str, entry_id: str | None = None, position: str = "before", *, salvage: bool = False
    ) -> Session:
        """A new session holding the path from the root to a target, with the same ids.

        ``position="at"`` keeps the target; ``"before"`` (the default) needs a user
        message and stops at its parent, so the message can be asked again. Without
        ``entry_id`` the whole current branch is copied. Labels on the path and the
        session name come along; ``parent_session`` records the source.

        The source is verified first: a log that fails verify is refused (``corrupt``),
        since the fork would be sealed into a new, valid chain; ``salvage=True`` forks
        what salvage mode reads and records the skipped lines. The fork's header records
        the source's chain head (``source``), so its provenance can be checked later.
        """
        if position not in POSITIONS:
            raise SessionError("invalid_fork_target", f"fork position must be 'before' or 'at', not {position!r}")
        storage, source_record, salvaged = self._verified(self, check_session_id(session_id), salvage)
        source = self._session(storage) if salvaged is None else self._salvaged_session(storage, *salvaged)
        try:
            leaf = _fork_leaf(source, entry_id, position)
            path = source.get_branch(leaf) if leaf is not None else []
            header = SessionAggregate.create(
                session_id=new_session_id(),
                timestamp=now_iso(self._clock),
                cwd=source.header.cwd,
                parent_session=self._parent_reference(source),
                metadata=source.header.metadata,
            ).header
            header = attrs.evolve(header, extra={SOURCE_KEY: source_record})
            entries = _fork_entries(source, path, header.originator_id, self._new_entry_id, now_iso(self._clock))
        finally:
            source.close()
        return self._write_session(header, entries)

    def copy_from(self, other: SessionRepo, session_id: str, *, salvage: bool = False) -> Session:
        """Copy a session from another repository: same id, same header, same entries.

        The source is verified first. A native log that verifies is copied line for line,
        byte for byte, so the copy has the source's chain digests (and head). A pi file is
        converted to the native dialect and sealed into a new chain. A log that fails verify
        is refused (``corrupt``) unless ``salvage=True``: then what salvage mode reads is
        copied and the header records it (``source``: the source's head and the skipped lines).
        """
        storage, record, salvaged = self._verified(other, check_session_id(session_id), salvage)
        try:
            if salvaged is None and record["dialect"] == "native":
                return self._session(self._store_lines(session_id, storage.read_lines()))
            if salvaged is None:
                header, loaded = storage.load()
                events = materialise(loaded)
            else:
                header, events = salvaged
                header = attrs.evolve(header, extra={**header.extra, SOURCE_KEY: record})
        finally:
            storage.close()
        return self._write_session(header, events)

    def _verified(
        self, repo: SessionRepo, session_id: str, salvage: bool
    ) -> tuple[SessionStorage, dict[str, Any], tuple[SessionStarted, list[Entry]] | None]:
        """The source's storage, what a copy records of it, and (salvaging a log that fails
        verify) the header and entries salvage mode reads from it; None when it verifies."""
        from sessiontree.adapters.jsonl_salvage import salvage_log
        from sessiontree.adapters.verify import verify

        storage = repo._attach(session_id)
        try:
            report = verify(storage)
            record: dict[str, Any] = {"session_id": session_id, "lines": report.lines, "head": report.head}
            if report.ok:
                return storage, {**record, "dialect": report.dialect}, None
            if not salvage:
                raise SessionError(
                    "corrupt",
                    f"session {session_id} at {storage.location} does not verify ({report.problems[0]}); "
                    "it is not copied (salvage copies what can be read, and records what it skipped)",
                )
            header, entries, skipped = salvage_log(storage.read_lines(), storage.location)
        except BaseException:
            storage.close()
            raise
        record["skipped"] = sorted({line for line, _ in skipped} | {p.line for p in report.problems if p.line})
        return storage, record, (header, materialise(entries))

    def _salvaged_session(self, storage: SessionStorage, header: SessionStarted, entries: list[Entry]) -> Session:
        """A session in memory over the entries salvage mode read from ``storage``."""
        storage.close()
        copy = InMemorySessionStorage(session_id=header.originator_id, cwd=header.cwd, timestamp=header.timestamp,
                                      metadata=header.metadata, parent_session=header.parent_session)
        copy.save([attrs.evolve(e, originator_id=header.originator_id, originator_version=v) for v, e in enumerate(entries, 2)])
        return self._session(copy)

    def _store_lines(self, session_id: str, lines: Sequence[bytes]) -> SessionStorage:
        """Store a whole log given as its lines, byte for byte (a backend may do it natively)."""
        raise SessionError("storage", f"{type(self).__name__} cannot store a log line for line")

    def _write_session(self, header: SessionStarted, entries: Sequence[Entry]) -> Session:
        storage = self._store_header(header)
        try:
            if entries:
                storage.save(entries)
        except BaseException:
            storage.close()
            self._remove(header.originator_id)
            raise
        return self._session(storage)

def _fork_leaf(source: Session, entry_id: str | None, position: str) -> str | None:
    if entry_id is None:
        return source.leaf_id
    target = source.get_entry(entry_id)
    if position == "at":
        return entry_id
    message = getattr(target, "message", None)
    if target.type != "message" or getattr(message, "role", None) != "user":
        raise SessionError(
            "invalid_fork_target",
            f"cannot fork session {source.id} before entry {entry_id!r}: it is a "
            f"{target.type}{' (' + str(getattr(message, 'role', '')) + ')' if target.type == 'message' else ''} "
            "entry, not a user message (use position='at')",
        )
    return target.parent_id


def _fork_entries(
    source: Session, path: list[Entry], new_id: str, new_entry_id: IdGenerator, now: str
) -> list[Entry]:
    """The path (same ids, versions renumbered), then the label and name entries that make
    the fork's labels and name the source's current ones.

    Entries are copied as they are, except that label entries whose target is not on the
    path are left out (their target does not exist in the fork); their children are
    re-parented to the label's parent, as pi does.
    """
    out: list[Entry] = []
    version = SessionAggregate.INITIAL_VERSION
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
        changes: dict[str, Any] = {"originator_id": new_id, "originator_version": version + 1, "parent_id": parent}
        kept = getattr(entry, "first_kept_entry_id", None)
        if entry.type == "compaction" and kept in dropped:
            # The compaction kept from a label that cannot come along: keep from the entry
            # after it instead (labels are not context, so the context is the same).
            after = successor.get(kept)
            changes["first_kept_entry_id"] = after if after is not None and after != entry.id else None
        version += 1
        out.append(attrs.evolve(entry, **changes))
    on_path = {e.id for e in out}
    have: dict[str, str] = {}
    for entry in out:
        if entry.type == "label":
            if entry.label:  # type: ignore[attr-defined]
                have[entry.target_id] = entry.label  # type: ignore[attr-defined]
            else:
                have.pop(entry.target_id, None)  # type: ignore[attr-defined]
    want = source.get_labels()
    latest: dict[str, Entry] = {}
    for label_entry in source.find_entries("label"):
        if label_entry.target_id in on_path:  # type: ignore[attr-defined]
            latest[label_entry.target_id] = label_entry  # type: ignore[attr-defined]
    used = set(on_path)
    last = out[-1].id if out else None
    for target, label_entry in sorted(latest.items(), key=lambda kv: kv[1].originator_version):
        if want.get(target) == have.get(target) or label_entry.id in used:
            continue
        version += 1
        # The source's own latest label entry for the target, re-created after the path
        # (its id and time kept, as pi does), so the label reads the same in the fork.
        out.append(
            LabelChanged(
                originator_id=new_id,
                originator_version=version,
                timestamp=label_entry.timestamp,
                id=label_entry.id,
                parent_id=last,
                target_id=target,
                label=want.get(target),
            )
        )
        used.add(label_entry.id)
        last = label_entry.id
    name = source.get_session_name()
    names = [e.name for e in out if e.type == "session_info"]  # type: ignore[attr-defined]
    current = (names[-1] or "").strip() or None if names else None
    if current != name:  # the fork carries the source's current name (None clears one on the path)
        entry_id = new_entry_id()
        while entry_id in used:
            entry_id = new_entry_id()
        version += 1
        out.append(
            SessionRenamed(
                originator_id=new_id, originator_version=version, timestamp=now, id=entry_id, parent_id=last, name=name
            )
        )
    return out


def _labels_off_the_path(path: list[Entry]) -> set[str]:
    """Label entries on the path whose target is not (or no longer) in the fork."""
    kept = {e.id for e in path}
    dropped: set[str] = set()
    changed = True
    while changed:
        changed = False
        for entry in path:
            if entry.type == "label" and entry.id not in dropped and entry.target_id not in kept:  # type: ignore[attr-defined]
                dropped.add(entry.id)
                kept.discard(entry.id)
                changed = True
    return dropped


class InMemorySessionRepo(SessionRepo):
    """Sessions held in memory, in one eventsourcing POPO recorder (tests, ephemeral agents)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.recorder = POPOAggregateRecorder()
        self._lock = threading.RLock()
        self._ids: dict[str, None] = {}
        self._summaries: dict[str, Summary] = {}

    def _store_header(self, header: SessionStarted) -> SessionStorage:
        sid = check_session_id(header.originator_id)
        with self._lock:
            if sid in self._ids:
                raise SessionError("already_exists", f"session {sid} already exists in memory")
            storage = InMemorySessionStorage.attach(self.recorder, sid)
            storage.save([header])
            self._ids[sid] = None
        return storage

    def _store_lines(self, session_id: str, lines: Sequence[bytes]) -> SessionStorage:
        with self._lock:
            if session_id in self._ids:
                raise SessionError("already_exists", f"session {session_id} already exists in memory")
            storage = InMemorySessionStorage.attach(self.recorder, session_id)
            storage.write_lines(lines)
            self._ids[session_id] = None
        return storage

    def _attach(self, session_id: str) -> SessionStorage:
        if session_id not in self._ids:
            raise SessionError("not_found", f"session {session_id} not found in memory")
        return InMemorySessionStorage.attach(self.recorder, session_id)

    def _remove(self, session_id: str) -> None:
        with self._lock, self.recorder._database_lock:
            self._ids.pop(session_id, None)
            self._summaries.pop(session_id, None)
            # POPO has no delete: forget the session's index so nothing can read it again.
            self.recorder._stored_events_index.pop(session_id, None)

    def _infos(self, cwd: str | None) -> Iterable[SessionInfo]:
        out = []
        for sid in list(self._ids):
            summary = self._summary(sid)
            if summary is not None and (cwd is None or summary.cwd == cwd):
                out.append(SessionInfo.from_summary(summary, f"memory:{sid}"))
        return out

    def _summary(self, sid: str) -> Summary | None:
        summary = self._summaries.get(sid)
        newer = self.recorder.select_events(sid, gt=summary.version if summary else None)
        for stored in newer:
            data = orjson.loads(stored.state)
            if summary is None:
                summary = Summary.from_header(data)
                if summary is None:
                    return None
            else:
                summary.apply(data)
        if summary is not None:
            self._summaries[sid] = summary
        return summary
