"""In-memory storage: a real adapter on our in-memory eventsourcing recorder (``memory_recorder.py``; not a test fake)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessiontree.domain import aggregate
from sessiontree.domain.ids import new_session_id, now_iso
from sessiontree.storage.memory_recorder import MemoryRecorder
from sessiontree.storage.recorder import RecorderSessionStorage


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
