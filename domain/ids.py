"""Default id generators and clock. The Session takes others, so tests are deterministic."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from sessiontree.domain.events import format_timestamp

Clock = Callable[[], datetime]
IdGenerator = Callable[[], str]


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


def new_entry_id() -> str:
    """8 random lowercase hex characters (SPEC 2.2), from the OS's random source."""
    return os.urandom(4).hex()


def new_session_id() -> str:
    """A time-ordered UUIDv7 string (RFC 9562)."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 64) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))


def now_iso(clock: Clock = utc_now) -> str:
    """The clock's time as an entry timestamp (``...123Z``)."""
    moment = clock()
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise TypeError(f"the clock must return a timezone-aware datetime, not {moment!r}")
    return format_timestamp(moment)


def counter_ids(prefix: str = "", width: int = 8) -> IdGenerator:
    """Deterministic ids ``00000001``, ``00000002``, ... (for tests and examples)."""
    count = 0

    def generate() -> str:
        nonlocal count
        count += 1
        return f"{prefix}{count:0{width}x}"[-width:] if not prefix else f"{prefix}{count}"

    return generate


def fixed_clock(start: datetime, step_ms: int = 1000) -> Clock:
    """A clock that starts at ``start`` and advances ``step_ms`` on every call."""
    current = start - timedelta(milliseconds=step_ms)

    def clock() -> datetime:
        nonlocal current
        current = current + timedelta(milliseconds=step_ms)
        return current

    return clock
