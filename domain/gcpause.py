"""Building many long-lived objects at once without the cyclic collector's full passes.

Opening a 100k-entry session or decoding its context makes hundreds of thousands of objects
that all survive. With the collector running, each batch of 700 allocations triggers a
young pass, survivors are promoted, and a full pass over everything follows: measured at
about a fifth of an open, plus a 0.5 s pass landing inside one of the first appends after
it (docs/performance.md). So such loops run with the collector paused, and when a loop made
very many objects they are moved to the collector's permanent generation (``gc.freeze``),
which it never traverses again. Objects there are still freed by reference counting; only
reference cycles among objects alive at that moment would no longer be reclaimed, so an
application that depends on the cyclic collector can set ``FREEZE = False``.

No I/O here: this is the domain deciding how to hold its own log in memory.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

FREEZE = True
FREEZE_AFTER = 100_000  # tracked objects made while paused
SETTLE_AFTER = 10_000  # items of a long-lived list just made (settle)


@contextmanager
def building_many() -> Iterator[None]:
    """Pause the cyclic collector while a loop makes objects that all survive."""
    was_enabled = gc.isenabled()
    if not was_enabled:
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if FREEZE and gc.get_count()[0] >= FREEZE_AFTER:
            gc.freeze()
        gc.enable()


def settle(items: int) -> None:
    """A long-lived list of ``items`` items was just made (a large context's entries and
    messages): pass it through the young generations now, once, with ``gc.collect(1)``.

    Made after a freeze, such a list is young, and the next young passes traverse every
    item: 2 ms for a 40k-entry context, which would land in the first append after opening
    a 100k-entry session. Collected here, that cost is paid by the build that made it."""
    if items >= SETTLE_AFTER and gc.isenabled():
        gc.collect(1)
