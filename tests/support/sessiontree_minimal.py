"""The smallest storage the port allows: ``save`` and ``read_lines`` over a list of lines per session, and nothing
else. The storage contract runs on it (``sessiontree_fixtures.STORAGE_BACKENDS``): every other operation a Session and
verify use is the port's own, built on those two and on the pipeline (storage/pipeline.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from sessiontree.domain import aggregate
from sessiontree.domain.ids import new_session_id, now_iso
from sessiontree.storage.storage import SessionStorage


class Lines:
    """Where minimal storages keep their sessions' lines (one per backend test: another "process" shares it)."""

    def __init__(self) -> None:
        self.sessions: dict[str, list[bytes]] = {}
        self.lock = threading.Lock()


class MinimalStorage(SessionStorage):
    """A session's lines in a list: appended at exactly their versions, or ``conflict``."""

    def __init__(self, lines: Lines, session_id: str) -> None:
        super().__init__()
        self.lines = lines
        self._session_id = session_id
        self._location = f"minimal:{session_id}"

    @classmethod
    def create(cls, lines: Lines, *, session_id: str | None = None, timestamp: str | None = None, **header: Any) -> MinimalStorage:
        header_event = aggregate.start(session_id=session_id or new_session_id(), timestamp=timestamp or now_iso(), **header)
        storage = cls(lines, header_event.originator_id)
        storage.save([header_event])
        return storage

    def save(self, events: Sequence[Any]) -> None:
        self.check_writable()
        if not events:
            return
        first = events[0].originator_version
        lines, digest = self.pipeline.seal(self.pipeline.lines(events), self.previous_digest(first))
        with self.lines.lock:
            stored = self.lines.sessions.setdefault(self.session_id, [])
            if len(stored) != first - 1:
                raise self.conflict(first, taken=len(stored) >= first)
            stored.extend(lines)
        self.pipeline.head.set(first + len(lines) - 1, digest)

    def read_lines(self) -> list[bytes]:
        with self.lines.lock:
            return list(self.lines.sessions.get(self.session_id, []))
