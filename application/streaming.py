"""One pass over a large session (an export, a replay, stats): entries handed over as they are decoded, not kept.

Reading a session keeps every entry it decodes, so later reads are free; a pass over the whole log would then hold the
whole session. Inside :func:`passing` the log hands entries over instead (``EntryLog.passing``): memory follows what
the pass is using, and an entry asked for again is decoded again.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry
from sessiontree.projections.stats import BranchStats, branch_stats


@contextmanager
def passing(reader: Any) -> Iterator[None]:
    """While inside, entries decoded for ``reader``'s session (a ``Session`` or any view of it) are not kept."""
    with reader._agg.log.passing():
        yield


def entries(reader: Any, start: int = 0) -> Iterator[Entry]:
    """``reader``'s entries from position ``start`` (0: the first after the header), in order, none kept."""
    return reader._agg.log.stream(start, len(reader))  # type: ignore[no-any-return]


def stats(reader: Any) -> BranchStats:
    """The stats of ``reader``'s whole session, of its current branch and of every branch, in one pass that keeps no
    entry (what ``get_session_stats`` and ``stats_of(get_branch(tip))`` per tip give)."""
    log, limit = reader._agg.log, len(reader)
    try:
        leaf = reader.leaf_id  # decodes a last ``leaf`` record
    except SessionError:
        for _ in log.stream(0, limit):  # a damaged file fails at its first bad line, as a whole read does
            pass
        raise
    return branch_stats(log, leaf, limit, log.stream(0, limit))


__all__ = ["entries", "passing", "stats"]
