"""The OpenAI Agents SDK's session store, on a sessiontree session (docs/integrations.md, "OpenAI Agents SDK").

``SessionTreeSession(session_id, repo=...)`` is an ``agents.memory.Session``. Each item is an entry on the session's
current branch (``openai_agents_items``: a message where the item maps to one, else a custom entry), so ``sessiontree
show``, ``context``, ``verify`` and ``export --format pi`` work on what the agent wrote. ``pop_item`` and
``clear_session`` move the leaf; nothing is ever deleted. Like the SDK's ``SQLiteSession``, any number of stores, in any
processes, share one session id, none ever closed: each call reads on to the log's leaf (the last append's, by any
writer) and appends there, so their items interleave in one history.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit

from sessiontree.adapters.store import check_session_id
from sessiontree.domain import aggregate as commands
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import CustomEntryAppended, Entry, MessageAppended
from sessiontree.domain.values import json_value
from sessiontree.integrations._blocking import as_repo, call
from sessiontree.integrations.openai_agents_items import CUSTOM_TYPE, KEY, Message, to_item, to_message
from sessiontree.repository import SessionRepo
from sessiontree.session import Session

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

T = TypeVar("T")
_UNREAD = object()  # the leaf of a store that has not read its session yet
_encode = msgspec.json.encode
_decode = msgspec.json.decode


class SessionTreeSession:
    """An ``agents.memory.Session`` whose items are the entries of a sessiontree session.

    ``repo`` is a repository, or a URL or folder for ``open_repo`` (a repository it opens is closed by :meth:`close`). The
    session ``session_id`` is created there on first use if it does not exist (in ``cwd``, default the current
    directory). ``get_items`` reads the branch ending at the log's leaf (the last append's, by any store or process);
    ``add_items`` appends there, the items of one call together; ``pop_item`` moves the leaf to the parent of the last
    item's entry (only if no other writer appended meanwhile: else it reads again and retries) and ``clear_session``
    before the first entry, so the log keeps every item ever added.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self, session_id: str, repo: SessionRepo | str | os.PathLike[str], *,
        session_settings: SessionSettings | dict[str, Any] | None = None, cwd: str | None = None,
    ) -> None:
        self.session_id = check_session_id(session_id)
        self.session_settings = coerce_session_settings(session_settings) if session_settings is not None else SessionSettings()
        self.repo = as_repo(os.fspath(repo) if isinstance(repo, os.PathLike) else repo)
        self._owns_repo = not isinstance(repo, SessionRepo)
        self._cwd = os.getcwd() if cwd is None else cwd
        self._session: Session | None = None
        self._closed = False
        # The items on the branch ending at ``_leaf``, kept as JSON: a read decodes them in one call (fresh objects
        # for the caller, as a database read gives) instead of rebuilding each item from its entry.
        self._leaf: object = _UNREAD
        self._ids: list[str] = []  # the entry of each item
        self._blobs: list[bytes] = []
        self._tool_names: dict[str, str] = {}  # call id -> tool name, for outputs that do not name their tool
        self._mutex = threading.RLock()  # the state above, whichever thread (worker or event loop) runs a call
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"SessionTreeSession({self.session_id!r}, repo={self.repo!r})"

    @property
    def session(self) -> Session:
        """The sessiontree session behind this store, opened (or created) if need be: a blocking call."""
        with self._mutex:
            return self._open()

    # -- agents.memory.Session --------------------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The items on the current branch, oldest first: the latest ``limit`` of them (default
        ``session_settings.limit``; None: all, 0: none; a negative limit is no limit, as in the SDK's SQLiteSession)."""
        return await self._run(self._get_items, resolve_session_limit(limit, self.session_settings))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items to the current branch, one entry each. Every item is checked (a JSON value) before any is
        written; a storage failure part way leaves the items written so far."""
        await self._run(self._add_items, items)

    async def pop_item(self) -> TResponseInputItem | None:
        """The latest item, after moving the leaf to the parent of its entry; None (and nothing written) if there is none."""
        return await self._run(self._pop_item)

    async def clear_session(self) -> None:
        """Move the leaf before the first entry: the next item starts a new root. Nothing is deleted."""
        await self._run(self._clear_session)

    def close(self) -> None:
        """Close the session (its file or connection) and a repository opened from a URL; stores need not be closed
        for others to write."""
        with self._mutex:
            if self._session is not None:
                self._session.close()
            if self._owns_repo and not self._closed:
                self.repo.close()
            self._session, self._closed = None, True

    # -- one call at a time -----------------------------------------------------------------------------------------

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` after the calls made before it on this event loop: inline on files and memory, in a
        worker thread on a database, and in a worker thread for the first call, which reads the whole log."""
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        async with lock:
            if self._leaf is _UNREAD:
                return await asyncio.to_thread(self._locked, function, *args)
            return await call(self.repo, self._locked, function, *args)

    def _locked(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` under the mutex. A conflict (another writer appended to the session) is raised, and the
        session dropped, so the next call reads the log again and sees what the other writer wrote."""
        with self._mutex:
            try:
                return function(*args)
            except SessionError as exc:
                if exc.code == "conflict" and self._session is not None:
                    self._session.close()
                    self._session, self._leaf = None, _UNREAD
                raise

    def _open(self) -> Session:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")
        if self._session is None:
            try:
                self._session = self.repo.open(self.session_id)
            except SessionError as exc:
                if exc.code != "not_found":
                    raise
                self._session = self._create()
        return self._session

    def _create(self) -> Session:
        try:
            return self.repo.create(cwd=self._cwd, session_id=self.session_id)
        except SessionError as exc:  # another writer created it first
            if exc.code != "already_exists":
                raise
            return self.repo.open(self.session_id)

    def _read(self) -> Session:
        """The session read on to the log's leaf, with the items cached for it: extended by the entries appended under
        the leaf cached before, or read again when the leaf moved elsewhere (a pop or a clear, here or by another)."""
        session = self._open()
        session.refresh(follow=True)
        leaf = session.leaf_id
        if self._leaf != leaf and not self._extend(session, leaf):
            ids: list[str] = []
            blobs: list[bytes] = []
            names: dict[str, str] = {}
            for entry in session.get_branch():
                item = _item_of(entry)
                if item is not _NOT_AN_ITEM:
                    ids.append(entry.id)
                    blobs.append(_encode(item))
                    _note_tool_name(names, item)
            self._ids, self._blobs, self._tool_names, self._leaf = ids, blobs, names, leaf
        return session

    def _extend(self, session: Session, leaf: str | None, most: int = 256) -> bool:
        """Take in the items between the cached leaf and ``leaf`` when the cached one is on ``leaf``'s branch (within
        ``most`` entries); False if it is not."""
        if self._leaf is _UNREAD or leaf is None:
            return False
        added: list[Entry] = []
        at: str | None = leaf
        while at != self._leaf:
            if at is None or len(added) >= most:
                return False
            entry = session.entry(at)
            added.append(entry)
            at = entry.parent_id
        for entry in reversed(added):
            item = _item_of(entry)
            if item is not _NOT_AN_ITEM:
                self._ids.append(entry.id)
                self._blobs.append(_encode(item))
                _note_tool_name(self._tool_names, item)
        self._leaf = leaf
        return True

    # -- the calls (each run by _locked) ---------------------------------------------------------------------------

    def _get_items(self, limit: int | None) -> list[Any]:
        self._read()
        blobs = self._blobs if limit is None or limit < 0 else self._blobs[-limit:] if limit else []
        return _decode(b"[" + b",".join(blobs) + b"]")  # type: ignore[no-any-return]  # a JSON array: a list

    def _add_items(self, items: Iterable[Any]) -> None:
        session = self._read()
        batch: list[Any] = []
        for data, _, message in self._plan(items):
            if message is None:
                batch.append(lambda agg, id, now, data=data: commands.append_custom_entry(agg, CUSTOM_TYPE, data, id=id,
                                                                                          timestamp=now))
            else:
                batch.append(lambda agg, id, now, message=message: commands.append_message(agg, message, id=id,
                                                                                           timestamp=now))
        # one write after the log's leaf at write time: the items of one call stay together, as in a SQLiteSession
        session._run_all(batch, follow=True)
        if not self._extend(session, session.leaf_id):
            self._leaf = _UNREAD  # read again at the next call

    def _plan(self, items: Iterable[Any]) -> list[tuple[Any, bytes, Message | None]]:
        """Each item as the JSON value to record, its JSON text and its message (None: a custom entry), or
        ``SessionError('invalid_entry')`` for the first that the log cannot hold, before anything is written."""
        now = time.time_ns() // 1_000_000
        names = dict(self._tool_names)
        planned = []
        for item in items:
            data = json_value("item", item)
            try:
                blob = _encode(data)
            except UnicodeEncodeError as exc:
                raise SessionError("invalid_entry", f"item: {exc}") from None
            planned.append((data, blob, to_message(data, names, now)))
            _note_tool_name(names, data)
        return planned

    def _pop_item(self) -> Any:
        for _ in range(20):
            session = self._read()
            if not self._ids:
                return None
            try:  # only if nobody appended since the read: else the item popped would not be the latest
                session.move_to(session.entry(self._ids[-1]).parent_id, if_version=session.version)
            except SessionError as exc:
                if exc.code != "conflict":
                    raise
                continue
            self._ids.pop()
            blob = self._blobs.pop()
            self._leaf = session.leaf_id
            return _decode(blob)
        raise SessionError("conflict", f"session {self.session_id}: other writers kept appending; nothing was popped")

    def _clear_session(self) -> None:
        session = self._read()
        if self._ids:
            session.move_to(None)
        self._ids, self._blobs, self._leaf = [], [], session.leaf_id


_NOT_AN_ITEM = object()


def _item_of(entry: Entry) -> Any:
    """The item an entry holds, or ``_NOT_AN_ITEM`` (labels, names, entries written by other programs)."""
    if isinstance(entry, CustomEntryAppended):
        return entry.data if entry.custom_type == CUSTOM_TYPE else _NOT_AN_ITEM
    if not isinstance(entry, MessageAppended) or KEY not in getattr(entry.message, "extra", ()):
        return _NOT_AN_ITEM
    try:
        return to_item(entry.message)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise SessionError("invalid_entry", f"entry {entry.id} is not an Agents SDK item ({exc!r})") from exc


def _note_tool_name(names: dict[str, str], item: Any) -> None:
    if isinstance(item, dict) and item.get("type") == "function_call":
        call_id, name = item.get("call_id"), item.get("name")
        if isinstance(call_id, str) and isinstance(name, str):
            names[call_id] = name


__all__ = ["SessionTreeSession"]
