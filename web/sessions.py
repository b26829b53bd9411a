"""The sessions a server has open: a small cache in front of one repository.

A session is opened on first use and kept so the next page of it costs no replay; the least recently used is
closed past ``keep`` sessions or ``max_entries`` entries in all (the one in use stays open). Before each use a
file-backed session is checked against its file (size and mtime): when another process appended to it, the
session takes the new entries in (``refresh``), and if the file changed in any other way it is opened again. Each
session has its own lock, held for every use, so a request never sees a session half way through another's write.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sessiontree.cli.target import open_repository, repo_url
from sessiontree.domain.errors import SessionError
from sessiontree.web.rows import TreeRows

T = TypeVar("T")
DEFAULT_KEEP = 16
LISTING_TTL = 2.0  # seconds a listing answers "where is this session's file"
DEFAULT_MAX_ENTRIES = 250_000  # entries kept open in all (about 2 KB each in memory): a bound on the server's memory


def _signature(session: Any) -> tuple[int, int] | None:
    return file_signature(getattr(session.storage, "path", None))


def file_signature(path: Any) -> tuple[int, int] | None:
    """A file's size and mtime (None: no file), to tell when it changed."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


class Held:
    """One open session with what was computed from it (tree rows per filter), valid while its version stands.
    Its lock is held by whoever uses it; ``closed`` tells a waiter the session was closed meanwhile."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.signature = _signature(session)
        self.lock = threading.RLock()
        self.closed = False
        self._rows: dict[tuple[str, int], TreeRows] = {}

    def rows(self, mode: str) -> TreeRows:
        key = (mode, self.session.version)
        rows = self._rows.get(key)
        if rows is None:
            rows = TreeRows(self.session, mode)
            self._rows = {k: v for k, v in self._rows.items() if k[1] == key[1]}  # older versions' rows are stale
            self._rows[key] = rows
        return rows

    def current(self) -> bool:
        """Take in what other writers appended to the file, showing the log's leaf (the last append's, as a fresh open
        does); False if it changed another way (to be opened again)."""
        signature = _signature(self.session)
        if signature == self.signature:
            return True
        try:
            self.session.refresh(follow=True)
        except SessionError:
            return False
        self.signature = signature
        return True


class OpenSessions:
    """The repository named by ``--repo`` and its open sessions (see the module documentation).

    Locks: ``lock`` guards the repository and the table of open sessions, each ``Held.lock`` its session, so a
    slow page of one session does not hold up the others. A thread holding a session's lock never asks for
    ``lock`` (``lock`` first, then a session's: no deadlock).
    """

    def __init__(self, repo_option: str | None, keep: int = DEFAULT_KEEP, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.url = repo_url(repo_option)
        self.repo = open_repository(repo_option)
        self.keep = keep
        self.max_entries = max_entries
        self.lock = threading.RLock()
        self._held: OrderedDict[str, Held] = OrderedDict()
        self._paths: dict[str, str] = {}
        self._paths_at = 0.0
        self.verified: dict[str, tuple[Any, dict[str, Any]]] = {}  # id -> (the file's size and mtime then, the report)

    def close(self) -> None:
        with self.lock:
            for session_id in list(self._held):
                self._drop(session_id)
            self.repo.close()

    def infos(self) -> list[Any]:
        with self.lock:
            infos = list(self.repo.list())
            self._paths = {i.id: i.path for i in infos}
            self._paths_at = time.monotonic()
            return infos

    def file_of(self, session_id: str) -> str | None:
        """The session's file, from a listing at most a few seconds old (None: not a file, or no such session).
        Verify reads the file itself, so a log too damaged to open as a session still gets its report."""
        with self.lock:
            if session_id not in self._paths or time.monotonic() - self._paths_at > LISTING_TTL:
                self.infos()
            path = self._paths.get(session_id)
        return path if path is not None and os.path.isfile(path) else None

    @contextmanager
    def use(self, session_id: str) -> Iterator[Held]:
        """The open session ``session_id``, current with its file, under its lock."""
        while True:
            with self.lock:
                held = self._held.get(session_id) or self._open(session_id)
                self._held.move_to_end(session_id)
            with held.lock:
                if not held.closed and held.current():
                    yield held
                    return
            with self.lock:  # closed meanwhile, or rewritten under us: open it again
                if self._held.get(session_id) is held:
                    self._drop(session_id)

    def run(self, session_id: str, work: Callable[[Held], T]) -> T:
        with self.use(session_id) as held:
            return work(held)

    def _open(self, session_id: str) -> Held:
        if not self.repo.exists(session_id):
            raise SessionError("not_found", f"no session {session_id!r} in {self.url}")
        held = Held(self.repo.open(session_id))
        self._held[session_id] = held
        while len(self._held) > 1 and (len(self._held) > self.keep or self._entries() > self.max_entries):
            self._drop(next(iter(self._held)))  # the least recently used; never the one just opened
        return held

    def _entries(self) -> int:
        return sum(len(h.session) for h in self._held.values())

    def release(self, session_id: str) -> None:
        """Close the session after a write, so the viewer holds no file or connection open for a session it only
        wrote to once (the next read opens it again). (Call it after the write's ``run``, not inside it.)"""
        with self.lock:
            self._drop(session_id)

    def _drop(self, session_id: str) -> None:
        held = self._held.pop(session_id, None)
        if held is not None:
            with held.lock:  # after whoever uses it now
                held.closed = True
                held.session.close()

    @property
    def open_ids(self) -> list[str]:
        return list(self._held)
