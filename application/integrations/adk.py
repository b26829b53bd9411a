"""Google ADK's session service on sessiontree sessions (docs/integrations.md, "Google ADK").

``SessionTreeSessionService(repo=...)`` is a ``google.adk.sessions.BaseSessionService``. Each ADK session is one
sessiontree session, ``adk.<app>.<user>.<session>`` (each part encoded as claude_code_entries encodes a key), whose log
is its single source: the first entry records the state given to ``create_session``, each event is an entry
(adk_events.py), and the session state is the fold of the ``state_delta`` of the entries on the current branch. ``app:``
and ``user:`` state live in logs of their own (``adk-app.<app>``, ``adk-user.<app>.<user>``), merged on read; ``temp:``
keys never reach storage. A rewind is a leaf move: the rewound events stay in the log, on a side branch.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from typing import Any, TypeVar

try:
    from google.adk.errors import StaleSessionError
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.errors.session_not_found_error import SessionNotFoundError
    from google.adk.events import Event
    from google.adk.sessions import BaseSessionService, Session, State
    from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
except ModuleNotFoundError as exc:  # the extra is not installed: say which one
    raise ModuleNotFoundError(
        "missing_extra: sessiontree.integrations.adk needs google-adk: pip install 'sessiontree[adk]'", name=exc.name
    ) from exc

from sessiontree.domain.errors import SessionError
from sessiontree.domain.ids import new_session_id as _new_id
from sessiontree.integrations import adk_events as events
from sessiontree.integrations._held import HeldSessions
from sessiontree.integrations.claude_code_entries import encode_part
from sessiontree.session import Session as TreeSession

__all__ = ["SessionTreeSessionService"]

T = TypeVar("T")
PAGE = 200  # rows of the repository's listing read at a time by list_sessions
_SCOPED = (State.APP_PREFIX, State.USER_PREFIX, State.TEMP_PREFIX)


def session_id_for(app_name: str, user_id: str, session_id: str) -> str:
    return ".".join(("adk", encode_part(app_name), encode_part(user_id), encode_part(session_id)))


def _app_log(app_name: str) -> str:
    return "adk-app." + encode_part(app_name)


def _user_log(app_name: str, user_id: str) -> str:
    return ".".join(("adk-user", encode_part(app_name), encode_part(user_id)))


def _split(delta: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A state delta as its app, user and session parts (prefixes removed; ``temp:`` keys dropped)."""
    app, user, own = {}, {}, {}
    for key, value in delta.items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            own[key] = value
    return app, user, own


class _Read:
    """What a session's branch holds: the events (with their entry ids) and the session state they fold to."""

    def __init__(self, session: TreeSession) -> None:
        self.created = _seconds(session.header.timestamp)
        self.leaf: str | None = None
        self.count = 0  # entries of the log taken into account
        self.version = session.version
        self.entries: list[str] = []
        self.dumps: list[dict[str, Any]] = []
        self.state: dict[str, Any] = {}
        self.updated = 0.0
        for entry in session.get_branch():
            self._take(entry)
        self.leaf, self.count = session.leaf_id, len(session)

    @classmethod
    def of(cls, session: TreeSession, previous: _Read | None) -> _Read:
        """The read of the session's branch: ``previous`` extended when the branch only grew since, else a new one."""
        if previous is None:
            return cls(session)
        chain = []
        if previous.leaf != session.leaf_id:
            new = {e.id for e in session.get_entries()[previous.count :]}
            entry_id = session.leaf_id
            while entry_id is not None and entry_id != previous.leaf and entry_id in new:
                entry = session.entry(entry_id)
                chain.append(entry)
                entry_id = entry.parent_id
            if entry_id != previous.leaf:
                return cls(session)  # the leaf moved elsewhere (a rewind): read the branch again
        for entry in reversed(chain):
            previous._take(entry)
        previous.leaf, previous.count, previous.version = session.leaf_id, len(session), session.version
        return previous

    def _take(self, entry: Any) -> None:
        if entry.type == "custom" and getattr(entry, "custom_type", None) == events.STATE_TYPE:
            self.state.update(entry.data)
            return
        data = events.dump_in(entry)
        if data is None:
            return
        self.entries.append(entry.id)
        self.dumps.append(data)
        delta = (data.get("actions") or {}).get("state_delta") or {}
        self.state.update({k: v for k, v in delta.items() if not k.startswith(_SCOPED)})
        self.updated = float(data.get("timestamp", 0.0))

    def update_time(self) -> float:
        """ADK's ``last_update_time``: the time of the last event on the branch, else when the session was created."""
        return self.updated if self.dumps else self.created



def _without_temp(data: dict[str, Any]) -> dict[str, Any]:
    """An event's data as stored: its ``temp:`` state keys are never stored (they live for one invocation)."""
    stored = {**data}
    if stored.get("actions", {}).get("state_delta"):
        delta = stored["actions"]["state_delta"]
        stored["actions"] = {**stored["actions"], "state_delta": {
            k: v for k, v in delta.items() if not k.startswith(State.TEMP_PREFIX)}}
    return stored

class SessionTreeSessionService(HeldSessions, BaseSessionService):
    """ADK sessions as sessiontree sessions in ``repo`` (a repository, or a URL for ``open_repo``).

    Calls on one session run one at a time (an ``asyncio.Lock`` per session and event loop). Up to 32 sessions stay open
    between calls (``Held``) with the fold of their branch, refreshed before each call; a call on one held runs inline
    on files and memory, any other call in a worker thread. An ``append_event`` on a session object older than the log
    (another writer appended since it was read) raises ``StaleSessionError`` and writes nothing.
    """

    def __repr__(self) -> str:
        return f"SessionTreeSessionService(repo={self.repo!r})"

    async def close(self) -> None:
        """Close the sessions it holds open, and the repository if the service opened it (from a URL)."""
        self._close_held()

    async def _one(self, sid: str, function: Callable[..., T], *args: Any) -> T:
        async with self._lock_for(sid):
            return await self._held.call(sid, function, *args)

    # -- BaseSessionService -----------------------------------------------------------------------------------------

    async def create_session(
        self, *, app_name: str, user_id: str, state: dict[str, Any] | None = None, session_id: str | None = None,
    ) -> Session:
        """A new session; ``state`` is recorded as its first entry (``app:`` and ``user:`` keys in their own logs)."""
        session_id = (session_id.strip() if session_id else None) or _new_id()
        sid = session_id_for(app_name, user_id, session_id)
        return await self._one(sid, self._create, app_name, user_id, session_id, sid, dict(state or {}))

    async def get_session(
        self, *, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with the events of its current branch (``config`` keeps the latest or the newer ones), or None."""
        sid = session_id_for(app_name, user_id, session_id.strip())
        return await self._one(sid, self._get, app_name, user_id, session_id.strip(), sid, config)

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        """The app's sessions (of one user, or of all), without events, state merged, least recently updated first."""
        return await self._held.call(None, self._list, app_name, user_id)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        sid = session_id_for(app_name, user_id, session_id.strip())
        await self._one(sid, self._delete, sid)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        log_id = _user_log(app_name, user_id)
        return await self._held.call(log_id, self._fold, log_id)

    async def append_event(self, session: Session, event: Event) -> Event:
        """Record the event (not a partial one) and apply it to ``session`` as ADK does. ``StaleSessionError`` if the
        log holds events this session object has not seen; an event equal to one recorded already is not recorded again.
        An event rewinding before an invocation moves the leaf to just before that invocation's first event."""
        if event.partial:
            return event
        sid = session_id_for(session.app_name, session.user_id, session.id)
        await self._one(sid, self._append, session, event, sid)
        await super().append_event(session=session, event=event)
        session.last_update_time = event.timestamp
        return event

    # -- helpers beyond ADK's interface -----------------------------------------------------------------------------

    async def fork_session(
        self, *, app_name: str, user_id: str, session_id: str, event_id: str, new_session_id: str | None = None,
    ) -> Session:
        """A new ADK session holding the source's branch up to and including the event ``event_id`` (``repo.fork``)."""
        new_id = new_session_id or _new_id()
        source = session_id_for(app_name, user_id, session_id)
        target = session_id_for(app_name, user_id, new_id)
        return await self._held.call(None, self._fork, app_name, user_id, source, event_id, new_id, target)

    def tree_session_id(self, *, app_name: str, user_id: str, session_id: str) -> str:
        """The id of the sessiontree session holding an ADK session (for ``sessiontree show`` and friends)."""
        return session_id_for(app_name, user_id, session_id)

    # -- the blocking half -------------------------------------------------------------------------------------------

    def _with(self, sid: str, work: Callable[[TreeSession, dict[str, Any]], T]) -> tuple[bool, T | None]:
        """``(True, work(session, memo))`` on the session kept open (``Held``), or ``(False, None)`` if there is none."""
        taken = self._held.take(sid)
        if taken is None:
            return False, None
        session, memo = taken
        try:
            result = work(session, memo)
        except BaseException:
            session.close()  # its memo may be half updated: the next call reads afresh
            raise
        self._held.give(sid, session, memo)
        return True, result

    @staticmethod
    def _branch(session: TreeSession, memo: dict[str, Any]) -> _Read:
        memo["read"] = read = _Read.of(session, memo.get("read"))
        return read

    def _fold(self, log_id: str) -> dict[str, Any]:
        def fold(session: TreeSession, memo: dict[str, Any]) -> dict[str, Any]:
            state: dict[str, Any] = memo.setdefault("state", {})
            entries = session.get_entries()
            for entry in entries[memo.get("seen", 0) :]:
                if entry.type == "custom" and getattr(entry, "custom_type", None) == events.STATE_TYPE:
                    state.update(entry.data)  # type: ignore[attr-defined]
            memo["seen"] = len(entries)
            return copy.deepcopy(state)  # the caller's own, as the merged state is

        return self._with(log_id, fold)[1] or {}

    def _scoped(self, log_id: str, delta: dict[str, Any], kind: str, **key: str) -> None:
        """Append a delta to an app or user state log (made on first use)."""
        if not delta:
            return
        found, _ = self._with(log_id, lambda session, memo: session.append_custom_entry(events.STATE_TYPE, delta))
        if found:
            return
        try:
            session = self.repo.create(self.cwd, metadata={events.KEY: {"kind": kind, **key}}, session_id=log_id)
        except SessionError as exc:
            if exc.code != "already_exists":
                raise
            session = self.repo.open(log_id)
        with closing(session):
            session.append_custom_entry(events.STATE_TYPE, delta)

    def _merged(self, app_name: str, user_id: str, state: dict[str, Any]) -> dict[str, Any]:
        merged = copy.deepcopy(state)  # the caller's own: the folds kept open are not theirs to change
        merged.update({State.APP_PREFIX + k: v for k, v in self._fold(_app_log(app_name)).items()})
        merged.update({State.USER_PREFIX + k: v for k, v in self._fold(_user_log(app_name, user_id)).items()})
        return merged

    def _create(self, app_name: str, user_id: str, session_id: str, sid: str, state: dict[str, Any]) -> Session:
        app, user, own = _split(state)
        key = {"kind": "session", "app_name": app_name, "user_id": user_id, "session_id": session_id}
        try:
            session = self.repo.create(self.cwd, metadata={events.KEY: key}, session_id=sid)
        except SessionError as exc:
            if exc.code == "already_exists":
                raise AlreadyExistsError(f"Session with id {session_id} already exists.") from exc
            raise
        with closing(session):
            if own:
                session.append_custom_entry(events.STATE_TYPE, own)
            created = _seconds(session.header.timestamp)
        self._scoped(_app_log(app_name), app, "app", app_name=app_name)
        self._scoped(_user_log(app_name, user_id), user, "user", app_name=app_name, user_id=user_id)
        return Session(id=session_id, app_name=app_name, user_id=user_id, state=self._merged(app_name, user_id, own),
                       last_update_time=created)

    def _get(self, app_name: str, user_id: str, session_id: str, sid: str, config: GetSessionConfig | None) -> Session | None:
        _, read = self._with(sid, self._branch)
        if read is None:
            return None
        dumps = read.dumps
        if config is not None:
            if config.num_recent_events is not None:
                dumps = dumps[-config.num_recent_events :] if config.num_recent_events else []
            if config.after_timestamp is not None:  # as ADK's in-memory service: the newest run at or after it
                i = len(dumps) - 1
                while i >= 0 and float(dumps[i].get("timestamp", 0.0)) >= config.after_timestamp:
                    i -= 1
                dumps = dumps[i + 1 :]
        return Session(
            id=session_id, app_name=app_name, user_id=user_id, state=self._merged(app_name, user_id, read.state),
            events=[events.event_of(d) for d in dumps], last_update_time=read.update_time(),
        )

    def _delete(self, sid: str) -> None:
        self._held.forget(sid)
        self.repo.delete(sid)

    def _rows(self) -> Iterator[Any]:
        """The repository's listing, a page at a time."""
        cursor = None
        while True:
            page = self.repo.list(limit=PAGE, cursor=cursor)
            yield from page
            cursor = page.cursor
            if cursor is None:
                return

    def _list(self, app_name: str, user_id: str | None) -> ListSessionsResponse:
        prefix = "adk." + encode_part(app_name) + "." + (encode_part(user_id) + "." if user_id is not None else "")
        found = []
        for info in self._rows():
            if not info.id.startswith(prefix):
                continue
            parts = info.id.split(".")
            if len(parts) != 4:
                continue
            _, held = self._with(info.id, lambda session, memo: (session.header.metadata.get(events.KEY),
                                                                 self._branch(session, memo)))
            if held is None:
                continue  # deleted since it was listed
            key, read = held
            if not isinstance(key, Mapping) or key.get("kind") != "session" or key.get("app_name") != app_name:
                continue
            user, own = key["user_id"], key["session_id"]
            if user_id is not None and user != user_id:
                continue
            updated = read.update_time()
            found.append(Session(id=own, app_name=app_name, user_id=user, state=self._merged(app_name, user, read.state),
                                 last_update_time=updated))
        found.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=found)

    def _append(self, caller: Session, event: Event, sid: str) -> None:
        found, written = self._with(sid, lambda session, memo: self._record(caller, event, session, self._branch(session, memo)))
        if not found:
            raise SessionNotFoundError(f"Session {caller.id} not found.")
        if not written:
            return
        app, user, _ = _split((event.actions.state_delta if event.actions else None) or {})
        self._scoped(_app_log(caller.app_name), app, "app", app_name=caller.app_name)
        self._scoped(_user_log(caller.app_name, caller.user_id), user, "user", app_name=caller.app_name,
                     user_id=caller.user_id)

    def _record(self, caller: Session, event: Event, session: TreeSession, read: _Read) -> bool:
        """Record the event on the session; False if it was recorded already (a retry)."""
        data = events.dump(event)
        if event.id and session.has_entry(event.id) and (events.dump_in(session.entry(event.id)) == data
                                                         or self._recorded(session, event.id, data)):
            return False  # recorded already (a retry)
        if read.update_time() > caller.last_update_time:  # ADK's own check: storage moved past what the caller read
            raise StaleSessionError(
                f"session {caller.id} has events this session object has not seen (another writer appended since it "
                "was read): get_session again")
        rewind = event.actions.rewind_before_invocation_id if event.actions else None
        if rewind:
            self._rewind(session, read, rewind, event)
            data = events.dump(event)
        stored = _without_temp(data)
        entry_id = event.id if event.id and not session.has_entry(event.id) else None
        message = events.to_message(stored)
        try:
            if message is not None:
                session.append_message(message, entry_id=entry_id, if_version=read.version if not rewind else None)
            else:
                session.append_custom_entry(events.EVENT_TYPE, stored, entry_id=entry_id,
                                            if_version=read.version if not rewind else None)
        except SessionError as exc:
            if exc.code == "conflict":
                raise StaleSessionError(f"session {caller.id} was appended to by another writer: get_session again") from exc
            raise
        return True

    @staticmethod
    def _recorded(session: TreeSession, entry_id: str, data: dict[str, Any]) -> bool:
        """Is the entry ``entry_id`` this event as the session stored it (redacted: a secret in it was rewritten, so the
        stored event differs from the one retried)? Asked of the session's own retry rule: an append with an id it holds
        writes nothing, and answers ``already_exists`` unless it is the same append."""
        stored = _without_temp(data)
        message = events.to_message(stored)
        try:
            if message is not None:
                session.append_message(message, entry_id=entry_id)
            else:
                session.append_custom_entry(events.EVENT_TYPE, stored, entry_id=entry_id)
        except SessionError as exc:
            if exc.code == "already_exists":
                return False
            raise
        return True

    def _rewind(self, session: TreeSession, read: _Read, invocation_id: str, event: Event) -> None:
        """Move the leaf to just before the invocation's first event, and make the rewind event's session state delta
        the one from the state the caller holds to the state there (state set at creation included)."""
        first = next((n for n, d in enumerate(read.dumps) if d.get("invocation_id") == invocation_id), None)
        if first is None:
            return  # nothing of it on this branch: an ordinary event
        target = session.entry(read.entries[first]).parent_id
        state_before = read.state
        session.move_to(target, if_version=read.version)
        after = _Read(session).state  # the branch there, read whole
        delta = {k: v for k, v in after.items() if k not in state_before or state_before[k] != v}
        delta.update({k: None for k in state_before if k not in after})
        scoped = {k: v for k, v in (event.actions.state_delta or {}).items() if k.startswith(_SCOPED)}
        event.actions.state_delta = {**delta, **scoped}

    def _fork(self, app_name: str, user_id: str, source: str, event_id: str, new_id: str, target: str) -> Session:
        held = self._open(source)
        if held is None:
            raise SessionNotFoundError(f"Session {source} not found.")
        with closing(held):
            key = dict(held.header.metadata.get(events.KEY) or {})
            entry_id = next((e.id for e in held.get_entries()
                             if (d := events.dump_in(e)) is not None and d.get("id") == event_id), None)
        if entry_id is None:
            raise SessionError("not_found", f"no event {event_id!r} in session {source}")
        try:
            fork = self.repo.fork(source, entry_id, position="at", fork_id=target,
                                  metadata={events.KEY: {**key, "session_id": new_id}})
        except SessionError as exc:
            if exc.code == "already_exists":
                raise AlreadyExistsError(f"Session with id {new_id} already exists.") from exc
            raise
        fork.close()
        found = self._get(app_name, user_id, new_id, target, None)
        assert found is not None
        return found


def _seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()
