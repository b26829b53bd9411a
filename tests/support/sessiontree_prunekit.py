"""Builders for the retention tests (tests/retention/test_prune*.py, tests/cli/test_prune.py): sessions of a chosen
age on a clock the test sets, (the ``clock`` and ``aged`` fixtures are in tests/support/sessiontree_fixtures.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sessiontree_testkit as kit

DAY = timedelta(days=1)
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


class SetClock:
    """A clock that stays where a test puts it (each session's entries get that time)."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def make_session(repo: Any, clock: SetClock, days_old: float, *, label: bool = False, name: str | None = None,
                 cwd: str = "/p") -> str:
    """A closed session whose last change is ``days_old`` days before NOW (a question and an answer, perhaps a
    label on the question)."""
    clock.now = NOW - timedelta(days=days_old)
    session = repo.create(cwd=cwd, name=name)
    first = session.append_message(kit.user(f"question from {days_old} days ago"))
    session.append_message(kit.assistant("an answer"))
    if label:
        session.append_label_change(first, "important")
    session.close()
    clock.now = NOW
    return session.id  # type: ignore[no-any-return]


def ids(repo: Any) -> set[str]:
    return {i.id for i in repo.list()}


def stored(repo: Any, session_id: str) -> list[bytes]:
    """The session's lines exactly as stored (chain digests included)."""
    with repo.open(session_id) as session:
        return session.storage.read_lines()  # type: ignore[no-any-return]
