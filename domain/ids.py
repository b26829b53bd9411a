"""Default id generators and clock. The Session takes others, so tests are deterministic."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sessiontree.domain.events import format_timestamp

Clock = Callable[[], datetime]
IdGenerator = Callable[[], str]


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


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


_FORKS = [0]  # how many forks separate this process from the one that imported the module


def _forked() -> None:
    _FORKS[0] += 1


os.register_at_fork(after_in_child=_forked)


class RandomIds:
    """Entry ids of 8 random lowercase hex characters (SPEC 2.2), cut from one read of the OS's
    random source per 256 ids. A forked child reads afresh: it would otherwise draw the ids its
    parent draws next (both may append to one session)."""

    __slots__ = ("_at", "_forks", "_hex")

    def __init__(self) -> None:
        self._hex, self._at, self._forks = "", 0, _FORKS[0]

    def __call__(self) -> str:
        at = self._at
        if at >= len(self._hex) or self._forks != _FORKS[0]:
            self._hex, at, self._forks = os.urandom(1024).hex(), 0, _FORKS[0]
        self._at = at + 8
        return self._hex[at : at + 8]


def checked_ids(generator: IdGenerator) -> IdGenerator:
    """An app's id generator, whose every id is checked to be a non-empty str."""

    def new_id() -> str:
        value = generator()
        if not isinstance(value, str) or not value:
            raise TypeError(f"the id generator must return non-empty str ids, not {value!r}")
        return value

    return new_id


class UtcTimestamps:
    """The Session's default clock, as entry timestamps (UTC, milliseconds): appends in the same millisecond share one text."""

    __slots__ = ("_ms", "_second", "_second_text", "_text")

    def __init__(self) -> None:
        self._ms = self._second = -1
        self._text = self._second_text = ""

    def __call__(self) -> str:
        ms = time.time_ns() // 1_000_000
        if ms != self._ms:
            second, frac = divmod(ms, 1000)
            if second != self._second:
                self._second, self._second_text = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._ms, self._text = ms, f"{self._second_text}.{frac:03d}Z"
        return self._text


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
