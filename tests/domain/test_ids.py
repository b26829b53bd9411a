"""Ids, timestamps and the injectable clock (SPEC 2.2)."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessiontree.domain.events import format_timestamp, parse_timestamp
from sessiontree.domain.ids import counter_ids, fixed_clock, new_entry_id, new_session_id, now_iso


def test_entry_ids_are_eight_lowercase_hex_characters():
    """New entry ids match SPEC 2.2's format, across the batches they are drawn in."""
    ids = [new_entry_id() for _ in range(1000)]
    assert all(re.fullmatch(r"[0-9a-f]{8}", i) for i in ids)
    assert len(set(ids)) > 990  # random: 32 bits each (a repeat is possible, the session regenerates)


def test_a_forked_child_does_not_repeat_its_parents_entry_ids():
    """Ids drawn ahead in the parent are dropped in a forked child: the two draw apart."""
    import os

    new_entry_id()  # the parent holds ids drawn ahead now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: send ten ids and leave at once
        os.close(read)
        os.write(write, "".join(new_entry_id() for _ in range(10)).encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 200).decode()
    os.close(read)
    os.waitpid(pid, 0)
    parent = "".join(new_entry_id() for _ in range(10))
    assert len(child) == 80 and child != parent


def test_session_ids_are_random_uuids_that_differ_in_their_leading_characters():
    """Session ids are version 4 UUIDs; ids made at once differ in their first 8 characters, so an 8-character
    prefix (what ``ls`` and ``show`` print) names one session (issue 37)."""
    ids = [new_session_id() for _ in range(200)]
    assert all(uuid.UUID(i).version == 4 and uuid.UUID(i).variant == uuid.RFC_4122 and str(uuid.UUID(i)) == i for i in ids)
    assert len({i[:8] for i in ids}) == len(ids)  # 32 random bits each: a repeat among 200 has odds of about 5e-6


def test_counter_ids_are_deterministic():
    """``counter_ids`` gives 00000001, 00000002, ... and a prefix form for readable tests."""
    ids = counter_ids()
    assert [ids(), ids(), ids()] == ["00000001", "00000002", "00000003"]
    named = counter_ids("e")
    assert [named(), named()] == ["e1", "e2"]


def test_fixed_clock_starts_at_start_and_steps():
    """The fixed clock returns ``start`` first, then advances by ``step_ms`` per call."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    clock = fixed_clock(start, step_ms=250)
    assert [clock(), clock()] == [start, start + timedelta(milliseconds=250)]


def test_timestamps_have_milliseconds_and_z():
    """Entry timestamps look like ``2026-11-29T11:30:20.123Z``."""
    moment = datetime(2026, 11, 29, 11, 30, 20, 123456, tzinfo=UTC)
    assert now_iso(lambda: moment) == "2026-11-29T11:30:20.123Z"


def test_other_offsets_are_converted_to_utc():
    """A clock in another zone still gives a UTC ``Z`` timestamp."""
    moment = datetime(2026, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1)))
    assert format_timestamp(moment) == "2026-01-01T00:00:00.000Z"


@pytest.mark.parametrize("bad", [lambda: "2026-01-01", lambda: datetime(2026, 1, 1)])
def test_a_clock_must_give_aware_datetimes(bad):
    """A clock returning a string or a naive datetime is a programming error."""
    with pytest.raises(TypeError):
        now_iso(bad)


@given(st.datetimes(timezones=st.just(UTC)))
def test_format_then_parse_keeps_the_millisecond(moment):
    """Parsing a formatted timestamp gives the time truncated to the millisecond."""
    back = parse_timestamp(format_timestamp(moment))
    assert back == moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def test_the_default_clock_gives_the_same_text_as_formatting_the_current_time():
    """The default clock's fast path (a second's text kept) agrees with formatting utc_now()."""
    from sessiontree.domain.events import format_timestamp
    from sessiontree.domain.ids import utc_now

    for _ in range(2000):
        before = format_timestamp(utc_now())
        stamp = now_iso()
        after = format_timestamp(utc_now())
        assert before <= stamp <= after
        assert len(stamp) == 24 and stamp.endswith("Z") and stamp[10] == "T"
