"""Full-text search across every session of a repository, and the same search as a tool for agents.

``repo.search(query)`` returns :class:`SearchHit` rows, best first. The index behind it is a projection of the
entries (``sessiontree.search.search_*``): it is caught up with what was appended since it was last read before
every search, and rebuilt from the logs when it is missing, of another format, or unreadable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import attrs

from sessiontree.domain.events import format_timestamp
from sessiontree.search.search_index import Filters, Hit
from sessiontree.search.search_stores import JsonlSearch, StoreSearch
from sessiontree.search.search_text import parse_query, same_place, snippet, sortable_time

if TYPE_CHECKING:
    from sessiontree.repository import SessionRepo

_AGO = re.compile(r"(\d+)\s*([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@attrs.frozen
class SearchHit:
    """One entry that matched a search."""

    session_id: str
    entry_id: str
    kind: str  # a message's role (``user``, ``assistant``, ``tool``, ...) or the entry's type (``compaction``, ``label``, ...)
    timestamp: str  # when the entry was logged (ISO 8601)
    on_active_branch: bool  # on the path from the root to the session's current leaf
    snippet: str  # the text around the match, each matching word marked ``**word**``
    score: float  # higher is better (each backend ranks in its own way)
    session_name: str | None = None
    cwd: str = ""

    @property
    def context_command(self) -> str:
        """The command line that shows this entry's branch as the model would see it."""
        return f"sessiontree context {self.session_id} --leaf {self.entry_id}"

    def to_dict(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "context_command": self.context_command}


def moment(value: str | datetime | None, *, now: datetime | None = None) -> str | None:
    """A bound of ``since``/``until`` as a sortable timestamp: a datetime, an ISO 8601 text, or an age such as
    ``7d``, ``12h``, ``30m``, ``2w`` (that long before now)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return format_timestamp(value if value.tzinfo else value.replace(tzinfo=UTC))
    if not isinstance(value, str):
        raise TypeError(f"since/until must be a datetime or a str, not {value!r}")
    age = _AGO.fullmatch(value.strip())
    if age:
        delta = timedelta(**{_UNITS[age.group(2)]: int(age.group(1))})
        return format_timestamp((now or datetime.now(UTC)) - delta)
    found = sortable_time(value.strip())
    if not found:
        raise ValueError(f"cannot read the time {value!r}: give ISO 8601 (2026-11-29, "
                           "2026-11-29T10:00:00Z) or an age (30m, 12h, 7d, 2w)")
    return found


def _cwds(cwd: str | None) -> tuple[str, ...] | None:
    if cwd is None:
        return None
    resolved = os.path.normpath(os.path.abspath(os.path.expanduser(cwd)))
    return tuple(dict.fromkeys((same_place(cwd), resolved, cwd)))


def search(
    repo: SessionRepo, query: str, *, limit: int = 20, cwd: str | None = None, role: str | None = None,
    since: str | datetime | None = None, until: str | datetime | None = None, session: str | None = None,
) -> list[SearchHit]:
    """The entries of ``repo`` matching ``query``, best first (see ``SessionRepo.search``)."""
    filters = _filters(query, limit, cwd, role, since, until, session)
    return [_hit(h, filters.query) for h in store_search(repo).search(filters)]


def search_folder(folder: str | os.PathLike[str], query: str, **options: Any) -> list[SearchHit]:
    """``open_repo(folder).search(query, ...)`` for a folder of JSONL sessions, without opening a repository (the
    command line's quick path: no storage or database module is loaded)."""
    filters = _filters(query, **options)
    searcher = JsonlSearch(folder)
    try:
        return [_hit(h, filters.query) for h in searcher.search(filters)]
    finally:
        searcher.close()


def _filters(
    query: str, limit: int = 20, cwd: str | None = None, role: str | None = None, since: str | datetime | None = None,
    until: str | datetime | None = None, session: str | None = None,
) -> Filters:
    parsed = parse_query(query)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a whole number of 1 or more, not {limit!r}")
    return Filters(parsed, limit, _cwds(cwd), role or None, moment(since), _until(until), session)


def _until(value: str | datetime | None) -> str | None:
    """``until`` includes the whole of the last millisecond, and of a day given without a time."""
    bound = moment(value)
    if bound is not None and isinstance(value, str) and len(value.strip()) == 10:  # a date: up to its end
        return value.strip() + "T23:59:59.999Z"
    return bound


def store_search(repo: SessionRepo) -> StoreSearch:
    """The repository's search (made on first use, closed with the repository)."""
    found: StoreSearch | None = repo.__dict__.get("_search")
    if found is None:
        found = repo.__dict__["_search"] = StoreSearch(repo.store)
    return found


def _hit(hit: Hit, query: Any) -> SearchHit:
    return SearchHit(hit.session_id, hit.entry_id, hit.kind, hit.timestamp, hit.on_active_branch, snippet(hit.text, query),
                     round(hit.score, 6), hit.session_name, hit.cwd)


def search_tool(repo: SessionRepo, *, limit: int = 10) -> Callable[..., list[dict[str, Any]]]:
    """A plain function searching ``repo`` that an agent framework can register as a tool (its name, docstring and
    typed parameters say what it does)."""

    def search_sessions(
        query: str, role: str | None = None, since: str | None = None, session: str | None = None,
    ) -> list[dict[str, Any]]:
        """Search the past sessions' messages, tool calls, tool output, summaries and labels.

        Args:
            query: words that must all appear (case does not matter); `word*` matches words starting with it,
                `-word` leaves out entries holding it.
            role: only entries of this kind: "user", "assistant" or "tool" (tool output).
            since: only entries logged since then: an age such as "7d", "12h", or an ISO 8601 date or time.
            session: only this session (its id).

        Returns:
            The best matches first, each with the session id, the entry id, its kind, when it was logged, whether it
            is on the session's current branch, and a snippet with the matching words marked **like this**.
        """
        hits = search(repo, query, limit=limit, role=role, since=since, session=session)
        return [{k: v for k, v in h.to_dict().items() if k not in ("score", "context_command")} for h in hits]

    return search_sessions
