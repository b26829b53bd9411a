"""Open sessions kept between an integration's calls, so a call reads only what was appended since the last one.

Opening a session indexes its log, and reading its entries decodes them all (about 0.1 ms an entry), so an integration
that opened its session afresh for every call would pay for the whole log each time. :class:`Held` keeps up to ``size``
sessions open (least recently used closed first), each with a ``memo`` dict the integration fills with what it computed
from the entries so far. A session taken from it is refreshed first (``Session.refresh``: the entries other writers,
in any process, appended since, its leaf moved to the log's), and is the caller's alone until given back.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar
from weakref import WeakValueDictionary

from sessiontree.domain.errors import SessionError
from sessiontree.integrations._blocking import as_repo, call
from sessiontree.repository import SessionRepo
from sessiontree.session import Session

SIZE = 32
T = TypeVar("T")


class Held:
    def __init__(self, repo: SessionRepo, size: int = SIZE) -> None:
        self.repo = repo
        self.size = size
        self._lock = threading.Lock()
        self._held: OrderedDict[str, tuple[Session, dict[str, Any]]] = OrderedDict()

    def holds(self, sid: str) -> bool:
        with self._lock:
            return sid in self._held

    async def call(self, sid: str | None, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` from async code: inline on files and memory for a session held open (it reads only what is
        new), else in a worker thread (a first read decodes the whole log; a database call is a round trip)."""
        if sid is not None and self.holds(sid):
            return await call(self.repo, function, *args)
        return await asyncio.to_thread(function, *args)

    def take(self, sid: str) -> tuple[Session, dict[str, Any]] | None:
        """The session, up to date, with its memo (a new one for a session opened now); None if there is none."""
        with self._lock:
            held = self._held.pop(sid, None)
        if held is not None:
            session, memo = held
            try:
                if self.repo.exists(sid):
                    session.refresh(follow=True)  # on to the log's leaf: where the last append, by anyone, left it
                    return session, memo
            except SessionError:
                pass  # the log was rewritten (deleted and made again, or repaired): read it afresh
            session.close()
        try:
            return self.repo.open(sid), {}
        except SessionError as exc:
            if exc.code == "not_found":
                return None
            raise

    def give(self, sid: str, session: Session, memo: dict[str, Any]) -> None:
        """Keep the session for the next call (closing the least recently used beyond ``size``)."""
        closing: list[Session] = []
        with self._lock:
            other = self._held.pop(sid, None)
            if other is not None:
                closing.append(other[0])  # another thread gave its copy back first: keep the newer
            self._held[sid] = (session, memo)
            while len(self._held) > self.size:
                closing.append(self._held.popitem(last=False)[1][0])
        for old in closing:
            old.close()

    def forget(self, sid: str) -> None:
        with self._lock:
            held = self._held.pop(sid, None)
        if held is not None:
            held[0].close()

    def close(self) -> None:
        with self._lock:
            held, self._held = list(self._held.values()), OrderedDict()
        for session, _ in held:
            session.close()


class HeldSessions:
    """What a framework store built on :class:`Held` keeps: its repository (closed with the store when the store opened
    it from a URL), the sessions held open between calls, and one ``asyncio.Lock`` per session and event loop."""

    def __init__(self, repo: SessionRepo | str, *, cwd: str = "") -> None:
        self.repo = as_repo(repo)
        self._owns_repo = not isinstance(repo, SessionRepo)
        self.cwd = cwd
        self._held = Held(self.repo)
        self._locks: WeakValueDictionary[tuple[asyncio.AbstractEventLoop, str], asyncio.Lock] = WeakValueDictionary()

    def _close_held(self) -> None:
        """Close the sessions held open, and the repository if this store opened it; a repository passed in is left
        to its owner."""
        self._held.close()
        if self._owns_repo:
            self.repo.close()

    def _open(self, sid: str) -> Session | None:
        """The stored session ``sid``, or None when there is none."""
        try:
            return self.repo.open(sid)
        except SessionError as exc:
            if exc.code == "not_found":
                return None
            raise

    def _lock_for(self, session_id: str) -> asyncio.Lock:
        key = (asyncio.get_running_loop(), session_id)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock
