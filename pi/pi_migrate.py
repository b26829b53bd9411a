"""Migrating pi files of versions 1 and 2 to version 3, in memory and deterministically.

pi migrates old files on open and rewrites them; we never rewrite on open, but follow pi's
steps on the parsed lines (docs/pi.md): v1 entries get ids derived from the session id and
the line number (:func:`derived_id`, so the same file always gives the same ids) and the
previous entry as parent; v2's ``hookMessage`` role becomes ``custom``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from sessiontree.domain.errors import SessionError
from sessiontree.wire.pi_names import FIRST_KEPT_ENTRY_ID_KEY, FIRST_KEPT_ENTRY_INDEX_KEY, HOOK_MESSAGE_ROLE, PARENT_KEY

CURRENT = 3


def derived_id(session_id: str, lineno: int, taken: set[str]) -> str:
    """8 hex characters from (session id, line number), unique among ``taken``."""
    attempt = 0
    while True:
        seed = f"{session_id}:{lineno}" if attempt == 0 else f"{session_id}:{lineno}:{attempt}"
        candidate = hashlib.sha256(seed.encode("utf-8")).hexdigest()[:8]
        if candidate not in taken:
            return candidate
        attempt += 1


def _v1_to_v2(session_id: str, entries: Sequence[tuple[int, Any]], path: str) -> list[tuple[int, dict[str, Any]]]:
    taken: set[str] = set()
    previous: str | None = None
    out: list[tuple[int, dict[str, Any]]] = []
    for lineno, obj in entries:
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str) or obj["type"] == "session":
            raise SessionError("corrupt", "a version 1 entry must be an object with a 'type'", path=path, line=lineno)
        entry_id = derived_id(session_id, lineno, taken)
        taken.add(entry_id)
        body = {k: v for k, v in obj.items() if k not in ("type", "id", PARENT_KEY)}
        new = {"type": obj["type"], "id": entry_id, PARENT_KEY: previous, **body}
        previous = entry_id
        if new["type"] == "compaction" and (FIRST_KEPT_ENTRY_INDEX_KEY in new or FIRST_KEPT_ENTRY_ID_KEY not in new):
            # The index counts the header as 0; pi only resolves entries already given ids.
            index = new.pop(FIRST_KEPT_ENTRY_INDEX_KEY, None)
            new[FIRST_KEPT_ENTRY_ID_KEY] = out[index - 1][1]["id"] if type(index) is int and 1 <= index <= len(out) else None
        out.append((lineno, new))
    return out


def _v2_to_v3(entries: Sequence[tuple[int, Any]]) -> list[tuple[int, Any]]:
    out = []
    for lineno, obj in entries:
        message = obj.get("message") if isinstance(obj, dict) and obj.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == HOOK_MESSAGE_ROLE:
            obj = {**obj, "message": {**message, "role": "custom"}}
        out.append((lineno, obj))
    return out


def migrate(
    version: int, session_id: str, entries: Sequence[tuple[int, Any]], path: str
) -> list[tuple[int, Any]]:
    """The entries of a version ``version`` file as version 3 entries, each with its line."""
    migrated = list(entries)
    if version < 2:
        migrated = _v1_to_v2(session_id, migrated, path)
    if version < 3:
        migrated = _v2_to_v3(migrated)
    return migrated


__all__ = ["CURRENT", "derived_id", "migrate"]
