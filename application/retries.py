"""A retried append: the same append again, with the id it was given, is answered without writing twice."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from sessiontree.domain.errors import SessionError


def repeated(session: Any, entry_id: str, command: Callable[..., Any]) -> str:
    """An append with an ``entry_id`` the session holds: the same append again is answered with that id and writes
    nothing (a safe retry); anything else is ``already_exists``. The probe is redacted as the first append was."""
    probe = session._redaction.redact(command(session._agg, "\x00probe", session._now()))
    held = session.entry(entry_id)
    same = attrs.evolve(
        probe, id=held.id, parent_id=held.parent_id, timestamp=held.timestamp, originator_version=held.originator_version
    )
    encode = session.storage.codec.encode_event  # the same append writes the same line (a tuple reads back as a list)
    if same != held and encode(same) != encode(held):
        raise SessionError("already_exists", f"entry {entry_id!r} already exists in session {session.id} and is not this append")
    return entry_id


def fresh_id(session: Any, taken: str = "") -> str:
    """A new entry id (not ``taken`` either), generated again on a collision (SPEC 2.2)."""
    for _ in range(100):
        candidate: str = session._new_id()
        if candidate not in session._agg and candidate != taken:
            return candidate
    raise SessionError("invalid_entry", "the id generator kept returning ids already in use")
