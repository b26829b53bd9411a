"""Pages of ``repo.list()``: filters, the newest-first order, and the cursor that continues a page.

Every store answers a :class:`ListQuery`. Stores that keep their summaries in memory or in a file select in Python
(:func:`select`); the PostgreSQL store does the same in SQL on its listing table. Both order rows by
:func:`sort_key` (modified, then created, then id; newest first), and a cursor is the key of the last row a page
returned, so a page never repeats or skips a session that did not change in between.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import attrs

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import format_timestamp, parse_timestamp
from sessiontree.storage.index import sortable
from sessiontree.storage.store import SessionInfo
from sessiontree.wire.jsontext import DECODE_ERRORS, decode, dumps

Key = tuple[str, str, str]


class SessionList(list[SessionInfo]):
    """What ``repo.list()`` returns: the rows (a plain list to every caller), and ``cursor``, which asks for the
    next page (``repo.list(..., cursor=rows.cursor)``); None when there is no next page."""

    cursor: str | None = None
    unreadable: tuple[tuple[str, str], ...] = ()
    """(path, reason) of each session file or folder the listing could not read (JSONL folders): left out of it."""


@attrs.frozen
class ListQuery:
    """Which sessions, in which window: ``cwds`` (None: any), ``name`` (a case-insensitive part of the name),
    ``since`` (modified at or after, in sortable form), ``limit`` (None: all) and ``after`` (a cursor's key)."""

    cwds: tuple[str, ...] | None = None
    name: str | None = None
    since: str | None = None
    limit: int | None = None
    after: Key | None = None

    @classmethod
    def of(cls, cwds: Sequence[str] | None, name: str | None, since: Any, limit: int | None, cursor: str | None) -> ListQuery:
        """The query of ``repo.list``'s arguments, each checked (``invalid_entry`` for a bad value)."""
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a str, not {name!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise TypeError(f"limit must be an int, not {limit!r}")
        if limit is not None and limit < 1:
            raise SessionError("invalid_entry", f"limit must be at least 1, not {limit}")
        return cls(tuple(cwds) if cwds is not None else None, name or None, _since(since), limit,
                   decode_cursor(cursor) if cursor is not None else None)

    def keeps(self, info: SessionInfo) -> bool:
        """Does ``info`` pass the filters (not the window)?"""
        if self.cwds is not None and info.cwd not in self.cwds:
            return False
        if self.name is not None and self.name.lower() not in (info.name or "").lower():
            return False
        return self.since is None or sortable(info.modified) >= self.since


def _since(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise SessionError("invalid_entry", f"since needs a timezone-aware time, not {value!r}")
        return format_timestamp(value)
    if not isinstance(value, str):
        raise TypeError(f"since must be an ISO 8601 str or a datetime, not {value!r}")
    try:
        return format_timestamp(parse_timestamp(value))  # without a zone: UTC, as entry timestamps are read
    except ValueError:
        raise SessionError("invalid_entry", f"since: not an ISO 8601 time: {value!r}") from None


def sort_key(info: SessionInfo) -> Key:
    return (sortable(info.modified), sortable(info.created), info.id)


def encode_cursor(key: Key) -> str:
    return base64.urlsafe_b64encode(dumps(list(key))).decode().rstrip("=")


def decode_cursor(cursor: Any) -> Key:
    if not isinstance(cursor, str):
        raise TypeError(f"cursor must be a str (a page's .cursor), not {cursor!r}")
    try:
        key = decode(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, *DECODE_ERRORS):
        key = None
    if not (isinstance(key, list) and len(key) == 3 and all(isinstance(k, str) for k in key)):
        raise SessionError("invalid_entry", f"not a listing cursor: {cursor[:40]!r} (use the .cursor of a list() result)")
    return (key[0], key[1], key[2])


def page(rows: Sequence[SessionInfo], limit: int | None, key: Any = sort_key) -> SessionList:
    """``rows`` (already filtered and ordered, at most ``limit + 1`` of them) as a page with its cursor."""
    out = SessionList(rows if limit is None else rows[:limit])
    if limit is not None and len(rows) > limit:
        out.cursor = encode_cursor(key(out[-1]))
    return out


def select(infos: Iterable[SessionInfo], query: ListQuery) -> SessionList:
    """The page ``query`` asks for, from every session's row (in any order)."""
    keyed = [(sort_key(i), i) for i in infos if query.keeps(i)]
    if query.after is not None:
        after = query.after
        keyed = [(k, i) for k, i in keyed if k < after]
    keyed.sort(key=lambda pair: pair[0], reverse=True)
    rows = [i for _, i in keyed[: None if query.limit is None else query.limit + 1]]
    return page(rows, query.limit)
