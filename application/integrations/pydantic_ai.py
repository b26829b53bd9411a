"""pydantic-ai's ``ConversationStore`` on sessiontree sessions (docs/integrations.md, "pydantic-ai").

A conversation is a session whose header metadata holds ``{"pydantic_ai": {"scope": ...}}``; each pydantic-ai entry is
an entry with the same id (pydantic_ai_messages.py maps the messages); ``head_id`` is the leaf, or rather the nearest
entry at or above the leaf that carries a message. Every save ends with a ``pydantic_ai.record`` custom entry holding the
rest of the record (usage, deferred tool requests, branches, fork origin, revision token). A fork is ``repo.fork``, so
each conversation's history lives in its own session and deleting one never touches another.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from typing import Any, TypeVar
from weakref import WeakValueDictionary

from pydantic_ai.conversation_store import ConversationConflict, ConversationEntry, ConversationRecord, ConversationStore

from sessiontree.domain.errors import SessionError
from sessiontree.integrations import pydantic_ai_messages as mapping
from sessiontree.integrations._blocking import as_repo, call
from sessiontree.integrations.pydantic_ai_log import Carrier, ConversationLog, read_log, record_of
from sessiontree.repository import SessionRepo
from sessiontree.session import Session

__all__ = ["SessionTreeConversationStore"]

T = TypeVar("T")

RECENT = 64  # conversations whose fold is kept: read_entry answers from them, and their next read folds only what is new


class _Recent:
    """The folds of the conversations read last (an LRU), shared by worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: OrderedDict[str, ConversationLog] = OrderedDict()

    def get(self, conversation_id: str) -> ConversationLog | None:
        with self._lock:
            return self._logs.get(conversation_id)

    def put(self, conversation_id: str, log: ConversationLog) -> None:
        with self._lock:
            self._logs[conversation_id] = log
            self._logs.move_to_end(conversation_id)
            while len(self._logs) > RECENT:
                self._logs.popitem(last=False)

    def forget(self, conversation_id: str) -> None:
        with self._lock:
            self._logs.pop(conversation_id, None)

    def find(self, entry_id: str) -> Carrier | None:
        with self._lock:
            logs = list(reversed(self._logs.values()))
        return next((log.carriers[entry_id] for log in logs if entry_id in log.carriers), None)


class SessionTreeConversationStore(ConversationStore):
    """pydantic-ai conversations as sessiontree sessions in ``repo`` (a repository, or a URL for ``open_repo``).

    Calls on one conversation run one at a time (an ``asyncio.Lock`` each); on a database repository they run in a
    worker thread, on files and memory inline unless they decode whole logs (``_call``). Writers elsewhere (other
    store objects, other processes) are caught by the session's optimistic concurrency: their saves in between make
    this one a ``ConversationConflict``. ``cwd`` is the working directory new sessions record in their header.
    """

    def __init__(self, repo: SessionRepo | str, *, cwd: str = "") -> None:
        self.repo = as_repo(repo)
        self._owns_repo = not isinstance(repo, SessionRepo)
        self._sessions = _Conversations(self.repo, cwd)
        # One lock per conversation and event loop (a lock serves one loop), dropped when no call holds or awaits it.
        self._locks: WeakValueDictionary[tuple[asyncio.AbstractEventLoop, str], asyncio.Lock] = WeakValueDictionary()

    @property
    def cwd(self) -> str:
        return self._sessions.cwd

    def close(self) -> None:
        """Close the repository if the store opened it (from a URL); a repository passed in is left to its owner."""
        if self._owns_repo:
            self.repo.close()

    def _lock_for(self, conversation_id: str) -> asyncio.Lock:
        key = (asyncio.get_running_loop(), conversation_id)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def _call(self, conversation_id: str | None, function: Callable[..., T], *args: Any) -> T:
        """``call`` (inline on files and memory, in a worker thread on a database), except that a call reading whole logs
        (of a conversation this store has not read yet, or of every conversation) runs in a worker thread on files too."""
        if conversation_id is None or self._sessions.recent.get(conversation_id) is None:
            return await asyncio.to_thread(function, *args)
        return await call(self.repo, function, *args)

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        async with self._lock_for(conversation_id):
            found = await self._call(conversation_id, self._sessions.load, conversation_id)
        return found[1] if found is not None else None

    async def read_records(self, *, scope: str | None = None, limit: int | None = None) -> Sequence[ConversationRecord]:
        return await self._call(None, self._sessions.records, scope, limit)

    async def write_record(
        self, record: ConversationRecord, *, new_entries: Sequence[ConversationEntry] = (), expected_revision: str | None
    ) -> None:
        async with self._lock_for(record.conversation_id):
            await self._call(record.conversation_id, self._sessions.write, record, list(new_entries), expected_revision)

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Deletes the conversation's session (its file, or its rows): see docs/integrations.md on what that keeps."""
        async with self._lock_for(conversation_id):
            await self._call(conversation_id, self._sessions.delete, conversation_id, expected_revision)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry, from the conversations read last, else from a read of every conversation (``KeyError`` if none has it)."""
        found = self._sessions.recent.find(entry_id) or await self._call(None, self._sessions.search, entry_id)
        if found is None:
            raise KeyError(entry_id)
        payload, parent_id = found
        return ConversationEntry(id=entry_id, parent_id=parent_id, message=mapping.decode(payload))


class _Conversations:
    """The store's blocking half (its own class, so no name can meet one of ``ConversationStore``'s): each call opens the
    session, reads or appends, and closes it. A save is optimistic: its revision is checked against the session as read,
    and every append it makes is conditional on the log being as this save left it (``if_version``), so a save that
    another writer overtook is a ``ConversationConflict``."""

    def __init__(self, repo: SessionRepo, cwd: str) -> None:
        self.repo = repo
        self.cwd = cwd
        self.recent = _Recent()

    def _open(self, conversation_id: str) -> Session | None:
        try:
            return self.repo.open(conversation_id)
        except SessionError as exc:
            if exc.code == "not_found":
                return None
            raise

    def load(self, conversation_id: str) -> tuple[ConversationLog, ConversationRecord] | None:
        session = self._open(conversation_id)
        if session is None:
            return None
        with closing(session):
            return self._fold(session)

    def _fold(self, session: Session) -> tuple[ConversationLog, ConversationRecord] | None:
        """The session's fold (extending the one kept) and record; None if it is not a conversation."""
        log = read_log(session, self.recent.get(session.id))
        if log.marker is None:
            return None
        self.recent.put(session.id, log)
        return log, record_of(log, session)

    def records(self, scope: str | None, limit: int | None) -> list[ConversationRecord]:
        records = []
        for info in self.repo.list():
            session = self._open(info.id)
            if session is None:
                continue  # deleted since it was listed
            with closing(session):
                marker = session.header.metadata.get(mapping.PAYLOAD_KEY)
                if not isinstance(marker, Mapping) or (scope is not None and marker.get("scope") != scope):
                    continue  # not a conversation, or not in scope: known from the header alone
                found = self._fold(session)
            if found is not None:
                records.append(found[1])
        records.sort(key=lambda record: record.updated_at, reverse=True)
        return records[:limit]

    def search(self, entry_id: str) -> Carrier | None:
        holder = self._holder(entry_id)
        return holder.carriers[entry_id] if holder is not None else None

    def _holder(self, entry_id: str, hint: str | None = None) -> ConversationLog | None:
        """The fold of a conversation holding the entry: the one named first if it does, else the first found."""
        named = [hint] if hint is not None else []
        for conversation_id in dict.fromkeys(named + [info.id for info in self.repo.list()]):
            found = self.load(conversation_id)
            if found is not None and entry_id in found[0].carriers:
                return found[0]
        return None

    def delete(self, conversation_id: str, expected_revision: str) -> None:
        found = self.load(conversation_id)
        if found is None or found[1].revision != expected_revision:
            raise ConversationConflict(conversation_id)
        self.repo.delete(conversation_id)
        self.recent.forget(conversation_id)

    def write(self, record: ConversationRecord, new_entries: list[ConversationEntry], expected: str | None) -> None:
        conversation_id = record.conversation_id
        try:
            session = self._open(conversation_id)
            created = session is None
            if session is None:
                if expected is not None:
                    raise ConversationConflict(conversation_id)
                session = self._start(record, new_entries)
            with closing(session):
                found = self._fold(session)
                applies = found is not None and (created or _current(found[1], record, expected))
                if found is not None and applies and _linked(found[0], session, record, new_entries):
                    _append(session, found[0], record, new_entries)
                    self._fold(session)
                    return
            if created:
                self.repo.delete(conversation_id)  # made for a save that cannot go on: leave nothing behind
            raise ConversationConflict(conversation_id)
        except SessionError as exc:
            if exc.code in ("conflict", "already_exists"):
                raise ConversationConflict(conversation_id) from exc
            raise

    def _start(self, record: ConversationRecord, new_entries: list[ConversationEntry]) -> Session:
        """A new session for the record: empty, or a fork of the conversation holding the entry its history starts from."""
        base = new_entries[0].parent_id if new_entries else record.head_id
        marker = {mapping.PAYLOAD_KEY: {"scope": record.scope}}
        if base is None:
            parent = self._reference(record.forked_from) if record.forked_from is not None else None
            return self.repo.create(self.cwd, metadata=marker, session_id=record.conversation_id, parent_session=parent)
        source = self._holder(base, record.forked_from)
        if source is None:
            raise ConversationConflict(record.conversation_id)  # released by a delete since it was read
        return self.repo.fork(source.session_id, base, position="at", fork_id=record.conversation_id,
                              metadata={**source.metadata, **marker})


    def _reference(self, source_id: str) -> str:
        """What an empty fork's header names as its source: what ``repo.fork`` would (a JSONL file's path), or the id."""
        try:
            storage = self.repo.store.attach(source_id)
        except SessionError:
            return source_id  # deleted since: its id still says where the fork came from
        try:
            return self.repo.store.parent_reference(storage)
        finally:
            storage.close()


def _current(stored: ConversationRecord, record: ConversationRecord, expected: str | None) -> bool:
    """Whether a save of an existing conversation is made on the stored revision, in the stored scope."""
    return stored.revision == expected and stored.scope == record.scope


def _linked(log: ConversationLog, session: Session, record: ConversationRecord, new_entries: list[ConversationEntry]) -> bool:
    """Whether every new entry follows one the session or the save holds, the head is one of them, and no new id is taken."""
    known = set(log.carriers)
    for entry in new_entries:
        if (entry.parent_id is not None and entry.parent_id not in known) or session.has_entry(entry.id):
            return False
        known.add(entry.id)
    return record.head_id is None or record.head_id in known


def _append(session: Session, log: ConversationLog, record: ConversationRecord, new_entries: list[ConversationEntry]) -> None:
    """The new entries, each under its parent (moving the leaf when it is elsewhere), the head, then the record entry.
    Each append only if the log is still where this save left it (``if_version``): another writer's entry in between is
    ``conflict`` (the revision check, kept while the save runs)."""
    nearest = dict(log.nearest)

    def move(target: str | None) -> None:
        if (nearest.get(session.leaf_id) if session.leaf_id is not None else None) != target:
            session.move_to(target, if_version=session.version)

    for entry in new_entries:
        move(entry.parent_id)
        ours, payload = mapping.encode(entry.message)
        ids = mapping.split_ids(entry.id, len(ours))
        for our_id, message in zip(ids[:-1], ours[:-1]):
            nearest[session.append_message(message, entry_id=our_id, if_version=session.version)] = entry.parent_id
        if ours:
            session.append_message(mapping.carried(ours[-1], payload), entry_id=entry.id, if_version=session.version)
        else:
            session.append_custom_entry(mapping.MESSAGE_TYPE, payload, entry_id=entry.id, if_version=session.version)
        nearest[entry.id] = entry.id
    move(record.head_id)
    session.append_custom_entry(mapping.RECORD_TYPE, mapping.record_data(record), if_version=session.version)
