"""Default id generators and clock. The Session takes others, so tests are deterministic."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone

from sessiontree.domain.events import format_timestamp

Clock = Callable[[], datetime]
IdGenerator = Callable[[], str]


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


_ID_BATCH = 256
_spare_ids: list[str] = []  # ids drawn ahead, one system call per batch (every append asks)
os.register_at_fork(after_in_child=_spare_ids.clear)  # a forked child must not repeat its parent's


def new_entry_id() -> str:
    """8 random lowercase hex characters (SPEC 2.2), from the OS's random source."""
    try:
        return _spare_ids.pop()  # atomic: threads never get the same id
    except IndexError:
        digits = os.urandom(4 * _ID_BATCH).hex()  # what secrets.token_hex does, in bulk
        _spare_ids.extend([digits[i : i + 8] for i in range(8, len(digits), 8)])
        return digits[:8]


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


_second: tuple[int, str] = (-1, "")  # the last whole second now_iso formatted, and its text
_milli: tuple[int, str] = (-1, "")  # the last millisecond it gave, and its timestamp


def now_iso(clock: Clock = utc_now) -> str:
    """The clock's time as an entry timestamp (``...123Z``)."""
    global _second, _milli
    if clock is utc_now:  # the default clock: every append asks, so recent texts are kept
        millis = time.time_ns() // 1_000_000
        last = _milli  # one tuple, replaced whole: threads never see half of an update
        if last[0] == millis:  # appends take microseconds: many share a millisecond
            return last[1]
        seconds, ms = divmod(millis, 1000)
        second = _second
        if second[0] != seconds:
            second = _second = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
        text = f"{second[1]}.{ms:03d}Z"
        _milli = (millis, text)
        return text
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
    from datetime import timedelta

    current = start - timedelta(milliseconds=step_ms)

    def clock() -> datetime:
        nonlocal current
        current = current + timedelta(milliseconds=step_ms)
        return current

    return clock
