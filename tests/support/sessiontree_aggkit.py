"""The given / when / then harness of the aggregate tests (tests/domain/test_aggregate*.py): the functional aggregate
driven like an object, its events kept for ``then``."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from sessiontree.domain import aggregate
from sessiontree.domain.aggregate import SessionAggregate
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import (
    MessageAppended,
    SessionStarted,
)
from sessiontree.domain.log import EntryLog
from sessiontree.domain.messages import (
    TextContent,
    UserMessage,
)

SID = "session-under-test"
T = "2026-11-29T11:30:20.123Z"
HEADER = SessionStarted(originator_id=SID, originator_version=1, timestamp=T, cwd="/p")
HI = UserMessage(content=[TextContent(text="hi")])


def entry(cls: type, id: str, parent_id: str | None, **fields: Any) -> Any:
    """An entry event (its version is set by ``given``/``then``)."""
    return cls(originator_id=SID, originator_version=0, timestamp=T, id=id, parent_id=parent_id, **fields)


def msg(id: str, parent_id: str | None) -> MessageAppended:
    return entry(MessageAppended, id, parent_id, message=HI)


class Agg:
    """The functional aggregate driven like an object (see the module documentation)."""

    def __init__(self, state: SessionAggregate) -> None:
        self.state = state
        self.pending: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        if name in ("version", "log", "leaf_id", "id", "header"):
            return getattr(self.state, name)
        command = getattr(aggregate, name)

        def run(*args: Any, **kwargs: Any) -> Any:
            result = command(self.state, *args, **kwargs)
            events = result if isinstance(result, list) else [result]
            for event in events:
                aggregate.project(self.state, event)
            self.pending.extend(events)
            return events[-1].id

        return run

    def collect_events(self) -> list[Any]:
        events, self.pending = self.pending, []
        return events


def given(*entries: Any) -> Agg:
    """The aggregate replayed from a header and ``entries`` (versions 2, 3, ...)."""
    log = EntryLog.of([attrs.evolve(e, originator_version=i + 2) for i, e in enumerate(entries)], " in the test session")
    return Agg(aggregate.replay(HEADER, log))


def then(agg: Agg) -> list[Any]:
    """The events the command triggered, versions checked then blanked for comparison."""
    events = agg.collect_events()
    first = agg.version - len(events) + 1
    assert [e.originator_version for e in events] == list(range(first, agg.version + 1))
    return [attrs.evolve(e, originator_version=0) for e in events]


def refused(agg: Agg, code: str, command: Any) -> SessionError:
    """The command raises ``SessionError(code)`` and leaves the aggregate unchanged."""
    version, length, leaf = agg.version, len(agg.log), agg.leaf_id
    with pytest.raises(SessionError) as caught:
        command()
    assert caught.value.code == code
    assert (agg.version, len(agg.log), agg.leaf_id) == (version, length, leaf)
    assert agg.collect_events() == []
    return caught.value
