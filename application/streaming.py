"""One pass over a large session (an export, a replay): entries handed over as they are decoded, not kept.

Reading a session keeps every entry it decodes, so later reads are free; a pass over the whole log would then hold the
whole session. Inside :func:`passing` the log hands entries over instead (``EntryLog.passing``): memory follows what
the pass is using, and an entry asked for again is decoded again.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sessiontree.domain.events import Entry


@contextmanager
def passing(reader: Any) -> Iterator[None]:
    """While inside, entries decoded for ``reader``'s session (a ``Session`` or any view of it) are not kept."""
    with reader._agg.log.passing():
        yield


def entries(reader: Any, start: int = 0) -> Iterator[Entry]:
    """``reader``'s entries from position ``start`` (0: the first after the header), in order, none kept."""
    return reader._agg.log.stream(start, len(reader))  # type: ignore[no-any-return]


__all__ = ["entries", "passing"]
