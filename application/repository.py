"""Session repositories: create, open, list, delete, fork and copy whole sessions.

:class:`SessionRepo` works over a store (``sessiontree.storage.store``: where the logs live)
and makes ``Session`` objects with its options, app projections, clock and id generator. Each
backend has a named subclass, and :func:`open_repo` picks one from a URL.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import attrs

from sessiontree.content.blob_stores import DEFAULT as BLOBS_DEFAULT
from sessiontree.content.blob_stores import collect, scope_of
from sessiontree.content.redaction import DEFAULT, check_redactors
from sessiontree.domain import aggregate
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry, SessionStarted
from sessiontree.domain.ids import Clock, IdGenerator, new_entry_id, new_session_id, now_iso, utc_now
from sessiontree.forking import copied_lines, fork_entries, fork_leaf, removed, salvaged_copy, verified_source
from sessiontree.projections.context import SessionContextBuildOptions
from sessiontree.retention import prune as retention
from sessiontree.session import Session
from sessiontree.storage.database import DatabaseStore
from sessiontree.storage.jsonl_repo import JsonlStore
from sessiontree.storage.jsonl_scan import salvage_log
from sessiontree.storage.listing import ListQuery, SessionList
from sessiontree.storage.pipeline import Redaction
from sessiontree.storage.storage import SessionStorage
from sessiontree.storage.store import MemoryStore, SessionStore, check_session_id
from sessiontree.storage.urls import open_store

if TYPE_CHECKING:
    from sessiontree.search.search import SearchHit

POSITIONS = ("before", "at")
SOURCE_KEY = "source"  # a header field: where a fork or a salvaged copy came from (docs/file-format.md)


class SessionRepo:
    """Many sessions in one store. ``create``, ``open`` and ``fork`` return ``Session``."""

    def __init__(
        self, store: SessionStore, *, options: SessionContextBuildOptions | None = None, projections: Sequence[Any] = (),
        clock: Clock | None = None, id_generator: IdGenerator | None = None, redactors: Any = DEFAULT,
        blob_threshold: Any = BLOBS_DEFAULT,
    ) -> None:
        self.store = store
        store.set_blob_threshold(blob_threshold)  # text longer than this, and images, are kept out of line
        self.redactors = check_redactors(redactors)  # every session's, and what forks and conversions write
        self.options = options
        self.projections = tuple(projections)
        self._given_clock, self._given_ids = clock, id_generator  # None: the Session's own (fast) defaults
        self._clock = clock or utc_now
        self._new_entry_id = id_generator or new_entry_id

    def __enter__(self) -> SessionRepo:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Release connections and handles."""
        search = self.__dict__.pop("_search", None)
        if search is not None:
            search.close()
        self.store.close()

    def _session(self, storage: SessionStorage) -> Session:
        return Session(storage, self.options, clock=self._given_clock, id_generator=self._given_ids, projections=self.projections,
                       redactors=self.redactors)

    def create(
        self, cwd: str = "", name: str | None = None, metadata: Mapping[str, Any] | None = None, *,
        session_id: str | None = None, parent_session: str | None = None,
    ) -> Session:
        """A new, empty session (with a ``session_info`` entry when ``name`` is given)."""
        sid = check_session_id(session_id) if session_id is not None else new_session_id()
        header = aggregate.start(
            session_id=sid, timestamp=now_iso(self._clock), cwd=cwd, parent_session=parent_session, metadata=metadata
        )
        session = self._session(self.store.store_header(Redaction(self.redactors).redact(header)))
        if name is not None:
            session.append_session_info(name)
        return session

    def open(self, session_id: str, *, salvage: bool = False) -> Session:
        """The session with this id (``SessionError('not_found')`` if there is none). ``salvage=True`` reads what can be
        read of a damaged log, whatever the backend: a read-only session in memory, the skipped ``(line, reason)`` in
        its ``storage.skipped``."""
        try:
            storage = self.store.attach(check_session_id(session_id))
        except SessionError as exc:
            if exc.code in ("not_found", "invalid_entry"):
                self._hint_full_id(session_id, exc)
            raise
        if not salvage:
            return self._session(storage)
        try:
            header, entries, skipped = salvage_log(storage.read_lines(), storage.location, blobs=storage.blobs)
        except BaseException:
            storage.close()
            raise
        copy = salvaged_copy(storage, header, entries)
        copy.read_only, copy.skipped = True, skipped  # type: ignore[attr-defined]  # what the salvage left out
        return self._session(copy)

    def _hint_full_id(self, ref: Any, exc: SessionError) -> None:
        """``open`` takes a full id: a prefix or a name that names sessions is told so, with the ids it names."""
        if not isinstance(ref, str) or not ref:
            return
        named = [i.id for i in self.list() if i.id.startswith(ref) or i.name == ref]
        if named:
            which = named[0] if len(named) == 1 else f"{len(named)} sessions: {', '.join(named[:10])}"
            raise SessionError(exc.code, f"open takes a full session id; {ref!r} is a prefix or name of {which} "
                                         "(repo.list(name=...) finds sessions by name)") from None

    def exists(self, session_id: str) -> bool:
        return self.store.exists(check_session_id(session_id))

    def list(
        self, cwd: str | None = None, *, name: str | None = None, since: Any = None, limit: int | None = None,
        cursor: str | None = None,
    ) -> SessionList:
        """Sessions, most recently modified first: every one, or a page of them (docs/repositories.md#listing-sessioninfo).

        ``cwd`` keeps those started there, resolved as pi resolves it (``~`` expanded, a relative path taken from the
        current directory; a header naming it as written is kept too). ``name`` keeps those whose name contains it
        (ignoring case), ``since`` those modified at or after a time (ISO 8601 or an aware ``datetime``). ``limit``
        returns at most that many, and the result's ``cursor`` (None after the last page) continues where it stopped:
        ``repo.list(limit=50, cursor=page.cursor)``. Its ``unreadable`` names, as (path, reason), each session file or
        folder that could not be read (no read permission) and so is not listed."""
        cwds = None
        if cwd:
            resolved = os.path.normpath(os.path.abspath(os.path.expanduser(cwd)))
            cwds = (resolved,) if resolved == cwd else (resolved, cwd)
        rows = cast(SessionList, self.store.page(ListQuery.of(cwds, name, since, limit, cursor)))
        rows.unreadable = tuple(self.store.unreadable())  # left out: a file or folder without read permission
        return rows

    def search(
        self, query: str, *, limit: int = 20, cwd: str | None = None, role: str | None = None, since: Any = None,
        until: Any = None, session: str | None = None,
    ) -> Sequence[SearchHit]:
        """Entries of every session matching ``query`` (all its words; ``word*`` a prefix, ``-word`` excluded), best
        first, as ``SearchHit`` rows; ``cwd``, ``role`` (``user``, ``assistant``, ``tool`` or an entry type), ``since``
        and ``until`` (a datetime, ISO 8601 text or an age such as ``7d``) and ``session`` narrow it
        (docs/search.md)."""
        from sessiontree.search.search import search

        return search(self, query, limit=limit, cwd=cwd, role=role, since=since, until=until, session=session)

    def delete(self, session_id: str) -> None:
        """Delete a session, and the content it kept out of line that no other session refers to; deleting one that
        does not exist is not an error."""
        deleted = removed(self.store, check_session_id(session_id))
        collect(self.store.blobs, scope_of(self.store), deleted)

    prune = retention.prune  # repo.prune(older_than=..., keep_labelled=True, dry_run=..., archive=...): whole sessions
    apply_prune = retention.apply_prune  # carry out a plan that prune(..., dry_run=True) returned

    def fork(
        self, session_id: str, entry_id: str | None = None, position: str = "before", *, salvage: bool = False,
        into: SessionRepo | None = None, fork_id: str | None = None, metadata: Mapping[str, Any] | None = None,
    ) -> Session:
        """A new session holding the path from the root to a target, with the same ids (in ``into``, default this one).

        ``position="at"`` keeps the target; ``"before"`` (the default) needs a user message and stops at its parent, so the
        message can be asked again. Without ``entry_id`` the whole current branch is copied. Labels on the path and the
        session name come along; ``parent_session`` records the source. ``fork_id`` chooses the new session's id (as
        ``create(session_id=...)`` does; ``already_exists`` if taken) and ``metadata`` its header metadata (default: the
        source's).

        The source is verified first: a log that fails verify is refused (``corrupt``), since the fork would be sealed into
        a new, valid chain; ``salvage=True`` forks what salvage mode reads and records the skipped lines. The fork's header
        records the source's chain head (``source``), so its provenance can be checked later.
        """
        if position not in POSITIONS:
            raise SessionError("invalid_fork_target", f"fork position must be 'before' or 'at', not {position!r}")
        new_id = check_session_id(fork_id) if fork_id is not None else new_session_id()
        storage, record, salvaged = verified_source(self.store, check_session_id(session_id), salvage)
        parent = self.store.parent_reference(storage)
        source = self._session(storage) if salvaged is None else self._session(salvaged_copy(storage, *salvaged))
        try:
            leaf = fork_leaf(source, entry_id, position)
            path = source.get_branch(leaf) if leaf is not None else []
            header = aggregate.start(
                session_id=new_id, timestamp=now_iso(self._clock), cwd=source.header.cwd,
                parent_session=parent, metadata=source.header.metadata if metadata is None else metadata,
            )
            header = attrs.evolve(header, extra={SOURCE_KEY: {**record, "entry_id": path[-1].id if path else None}})
            entries = fork_entries(source, path, header.originator_id, self._new_entry_id, now_iso(self._clock))
        finally:
            source.close()
        return (self if into is None else into)._write_session(header, entries)

    def copy_from(self, other: SessionRepo, session_id: str, *, salvage: bool = False) -> Session:
        """Copy a session from another repository: same id, same header, same entries.

        The source is verified first. A native log that verifies is copied line for line, byte for byte, so the copy has
        the source's chain digests (and head). A pi file is converted to the native dialect and sealed into a new chain. A
        log that fails verify is refused (``corrupt``) unless ``salvage=True``: then what salvage mode reads is copied and
        the header records it (``source``: the source's head and the skipped lines).
        """
        storage, record, salvaged = verified_source(other.store, check_session_id(session_id), salvage)
        try:
            if salvaged is None and record["dialect"] == "native":
                return self._session(copied_lines(self.store, storage, session_id))
            if salvaged is None:
                header, log = storage.load()
                events = list(log)
            else:
                header, events = salvaged
                header = attrs.evolve(header, extra={**header.extra, SOURCE_KEY: record})
        finally:
            storage.close()
        return self._write_session(header, events)

    def _write_session(self, header: SessionStarted, entries: Sequence[Entry]) -> Session:
        redaction = Redaction(self.redactors)  # the pipeline's redact step: the library's own records pass by
        header, entries = redaction.redact(header), list(redaction.redacted(entries))
        storage = self.store.store_header(header)
        try:
            if entries:
                storage.save(entries)
        except BaseException:
            storage.close()
            self.store.remove(header.originator_id)
            raise
        return self._session(storage)


class JsonlSessionRepo(SessionRepo):
    """Sessions as JSONL files in one directory (``durability``: ``"flush"`` or ``"fsync"``;
    ``wait``: how long an append waits for the lock another append holds on a file; None: 10 s)."""

    store: JsonlStore

    def __init__(
        self, root: str | os.PathLike[str], *, durability: str = "flush", wait: float | None = None, **kwargs: Any,
    ) -> None:
        super().__init__(JsonlStore(root, durability=durability, wait=wait), **kwargs)

    def __repr__(self) -> str:
        return f"JsonlSessionRepo({str(self.root)!r})"

    @property
    def root(self) -> Any:
        return self.store.root

    @property
    def index(self) -> Any:
        return self.store.index

    @property
    def durability(self) -> str:
        return self.store.durability

    def path_for(self, session_id: str) -> Any:
        """Where a session created here lives (whether or not it exists)."""
        return self.store.path_for(session_id)


class InMemorySessionRepo(SessionRepo):
    """Sessions held in memory, in one in-memory recorder (``storage/memory_recorder.py``; tests, ephemeral agents)."""

    store: MemoryStore

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(MemoryStore(), **kwargs)

    @property
    def recorder(self) -> Any:
        return self.store.recorder


class DatabaseSessionRepo(SessionRepo):
    """Sessions in eventsourcing's POPO, SQLite or PostgreSQL module (``storage/database.py``)."""

    store: DatabaseStore

    def __getattr__(self, name: str) -> Any:  # url, app, recorder, module, refresh_index, index_runner, ...
        if name == "store":
            raise AttributeError(name)
        return getattr(self.store, name)

    @classmethod
    def popo(cls, **kwargs: Any) -> DatabaseSessionRepo:
        return cls(DatabaseStore.popo(), **kwargs)

    @classmethod
    def sqlite(cls, path: str | os.PathLike[str], **kwargs: Any) -> DatabaseSessionRepo:
        return cls(DatabaseStore.sqlite(path), **kwargs)

    @classmethod
    def postgres(cls, dbname: str, *, settings: Mapping[str, str] | None = None, **kwargs: Any) -> DatabaseSessionRepo:
        own = {k: kwargs.pop(k) for k in ("host", "port", "user", "password", "schema") if k in kwargs}
        return cls(DatabaseStore.postgres(dbname, settings=settings, **own), **kwargs)


def open_repo(url: str | os.PathLike[str], *, durability: str = "flush", **kwargs: Any) -> SessionRepo:
    """The session repository ``url`` names (``storage/urls.py`` lists the URLs); keyword
    arguments (``options``, ``projections``, ...) go to the repository."""
    store = open_store(url, durability=durability)
    if isinstance(store, JsonlStore):
        return JsonlSessionRepo(store.root, durability=durability, **kwargs)
    if isinstance(store, MemoryStore):
        return InMemorySessionRepo(**kwargs)
    if not isinstance(store, DatabaseStore):  # archive: a folder of archives, read-only
        return SessionRepo(store, **kwargs)
    return DatabaseSessionRepo(store, **kwargs)
