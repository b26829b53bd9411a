"""Projection properties over random sessions (Hypothesis): replay, time travel, the context cache."""

from __future__ import annotations

import pytest
import sessiontree_strategies as strat
import sessiontree_testkit as kit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import FunctionProjection, InMemorySessionStorage, Session, SessionContextBuildOptions, UserMessage
from sessiontree.projections.context import build_session_context
from sessiontree.projections.examples import FilesTouchedProjection

PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def note_projector(entry, index, entries):
    """Looks at the whole entry list, so a context built from a prefix would differ."""
    return [UserMessage(content=f"note {index} of {len(entries)}")]


def latest_state_only(entry, index, entries):
    """Sends a ``state`` entry only if no later ``state`` entry follows it."""
    later = [e for e in entries[index + 1 :] if e.type == "custom" and e.custom_type == "state"]
    return [] if later else [UserMessage(content=f"state {entry.data!r}")]


OPTIONS = SessionContextBuildOptions(entry_projectors={"note": note_projector, "state": latest_state_only})
DEFAULT = SessionContextBuildOptions()
# With no transforms or projectors the session extends its context incrementally; with them
# it rebuilds. Both must agree with a from-scratch build.
BOTH = pytest.mark.parametrize("options", [DEFAULT, OPTIONS], ids=["incremental", "projectors"])


def app_projections():
    return [
        FilesTouchedProjection(),
        FunctionProjection("types_seen", initial=[], apply=lambda s, e: [*s, e.type]),
    ]


def live_session(ops, *, warm=True, options=OPTIONS):
    """A session with options and app projections, every projection read before the work starts
    (so later reads come from incremental updates), after running ``ops``."""
    session = kit.open_session(options=options, projections=app_projections())
    if warm:
        kit.snapshot(session)
    for op in ops:
        strat.apply_operation(session, op)
    return session


@BOTH
@PROPERTY
@given(ops=strat.operations())
def test_replaying_a_live_session_gives_identical_projections(options, ops):
    """A session reopened from storage answers every query exactly like the live one."""
    live = live_session(ops, options=options)
    reopened = Session(live.storage, options, projections=app_projections())
    assert kit.snapshot(reopened) == kit.snapshot(live)


@PROPERTY
@given(strat.operations(), st.data())
def test_at_v_equals_a_fresh_session_fed_the_first_v_events(ops, data):
    """``at(v)`` answers like a new session whose storage got only the first v events."""
    live = live_session(ops)
    version = data.draw(st.integers(min_value=1, max_value=live.version), label="version")
    header = live.header
    fresh_storage = InMemorySessionStorage(
        cwd=header.cwd, session_id=live.id, timestamp=header.timestamp
    )
    events = live.get_entries()[: version - 1]
    if events:
        fresh_storage.save(events)
    fresh = Session(fresh_storage, OPTIONS, projections=app_projections())
    assert kit.snapshot(live.at(version)) == kit.snapshot(fresh)


@BOTH
@PROPERTY
@given(ops=strat.operations())
def test_the_context_cache_always_equals_a_from_scratch_build(options, ops):
    """After every append, move and compaction, ``build_context`` equals a build over the branch."""
    session = kit.open_session(options=options)
    session.build_context()
    for op in ops:
        strat.apply_operation(session, op)
        expected = build_session_context(session.get_branch(), options)
        assert session.build_context() == expected
        assert session.build_context() == expected  # a cached answer is still right


@PROPERTY
@given(strat.operations(), st.data())
def test_the_context_of_any_entry_equals_a_from_scratch_build(ops, data):
    """``build_context(leaf_id=x)`` equals a build over ``get_branch(x)`` for any non-leaf entry."""
    session = live_session(ops, warm=False)
    targets = [e.id for e in session.get_entries() if e.type != "leaf"]
    if not targets:
        return
    target = data.draw(st.sampled_from(targets), label="leaf")
    expected = build_session_context(session.get_branch(target), OPTIONS)
    assert session.build_context(leaf_id=target) == expected


@PROPERTY
@given(strat.operations(), st.data())
def test_as_of_an_entry_time_equals_at_its_version(ops, data):
    """With a clock that always advances, ``as_of(entry time)`` is ``at(entry version)``."""
    session = live_session(ops, warm=False)
    entries = session.get_entries()
    if not entries:
        return
    entry = data.draw(st.sampled_from(entries), label="entry")
    assert kit.snapshot(session.as_of(entry.timestamp)) == kit.snapshot(session.at(entry.version))
    assert session.as_of(entry.time).version == entry.version
