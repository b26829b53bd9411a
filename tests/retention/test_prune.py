"""Retention on every repository backend: ``repo.prune`` lists its whole plan, deletes exactly the sessions older than
the cut-off (labelled ones kept), and its dry run changes nothing. Archives: test_prune_archive.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sessiontree_testkit as kit
from sessiontree_prunekit import DAY, NOW, SetClock, ids, make_session
from sessiontree_testkit import repo_lines as lines

from sessiontree import PruneResult, SessionError, parse_age
from sessiontree.repository import SessionRepo


def test_the_dry_run_lists_every_old_session_and_changes_nothing(aged: SessionRepo, clock: SetClock) -> None:
    """A dry run selects the sessions last changed before the cut-off, with what identifies them, and deletes none."""
    old = make_session(aged, clock, 100, name="old work", cwd="/home/me/a")
    young = make_session(aged, clock, 10)
    before = {sid: lines(aged.open(sid)) for sid in (old, young)}
    plan = aged.prune(older_than=timedelta(days=90), dry_run=True, now=NOW)
    assert isinstance(plan, PruneResult) and plan.dry_run
    assert [s.id for s in plan.sessions] == [old]
    item = plan.sessions[0]
    assert (item.name, item.cwd, item.entries) == ("old work", "/home/me/a", 3)  # the name, a question, an answer
    assert item.modified == "2026-08-21T12:00:00.000Z"
    stored = aged.open(old).storage.read_lines()
    assert item.bytes == sum(len(line) + 1 for line in stored)
    assert plan.pruned == () and plan.cutoff == "2026-08-31T12:00:00.000Z"
    assert {sid: lines(aged.open(sid)) for sid in (old, young)} == before


def test_prune_deletes_exactly_the_old_sessions(aged: SessionRepo, clock: SetClock) -> None:
    """Only sessions older than the cut-off go; the others keep every line."""
    old = [make_session(aged, clock, d) for d in (91, 200, 365)]
    young = [make_session(aged, clock, d) for d in (0, 30, 89.9)]
    kept_lines = {sid: lines(aged.open(sid)) for sid in young}
    result = aged.prune(older_than="90d", now=NOW)
    assert set(result.pruned) == set(old) and not result.dry_run
    assert ids(aged) == set(young)
    assert {sid: lines(aged.open(sid)) for sid in young} == kept_lines
    for sid in old:
        with pytest.raises(SessionError) as info:
            aged.open(sid)
        assert info.value.code == "not_found"


def test_labelled_sessions_are_kept_unless_asked(aged: SessionRepo, clock: SetClock) -> None:
    """keep_labelled (the default) protects a session with any label; keep_labelled=False prunes it too."""
    labelled = make_session(aged, clock, 120, label=True)
    plain = make_session(aged, clock, 120)
    result = aged.prune(older_than=timedelta(days=90), now=NOW)
    assert result.pruned == (plain,) and result.protected == ((labelled, "labelled"),)
    assert ids(aged) == {labelled}
    assert aged.prune(older_than=timedelta(days=90), keep_labelled=False, now=NOW).pruned == (labelled,)
    assert ids(aged) == set()


def test_a_cleared_label_protects_nothing(aged: SessionRepo, clock: SetClock) -> None:
    """Only labels in force count: a label set and then cleared leaves the session unprotected."""
    clock.now = NOW - 200 * DAY
    session = aged.create(cwd="/p")
    first = session.append_message(kit.user("hi"))
    session.append_label_change(first, "tmp")
    session.append_label_change(first, None)
    session.close()
    clock.now = NOW
    assert aged.prune(older_than="90d", now=NOW).pruned == (session.id,)


def test_a_name_protects_only_with_keep_named(aged: SessionRepo, clock: SetClock) -> None:
    """Named sessions are pruned by default (apps name every session); keep_named=True keeps them."""
    named = make_session(aged, clock, 120, name="release notes")
    plan = aged.prune(older_than="90d", keep_named=True, dry_run=True, now=NOW)
    assert plan.sessions == () and plan.protected == ((named, "named 'release notes'"),)
    assert aged.prune(older_than="90d", now=NOW).pruned == (named,)


def test_cwd_limits_pruning_to_one_working_directory(aged: SessionRepo, clock: SetClock) -> None:
    """prune(cwd=...) selects only the sessions started there."""
    here = make_session(aged, clock, 120, cwd="/work/a")
    there = make_session(aged, clock, 120, cwd="/work/b")
    assert aged.prune(older_than="90d", cwd="/work/a", now=NOW).pruned == (here,)
    assert ids(aged) == {there}


def test_the_default_now_is_the_repository_clock(aged: SessionRepo, clock: SetClock) -> None:
    """Without now=, ages count back from the repository's clock."""
    sid = make_session(aged, clock, 5)
    assert aged.prune(older_than="6d", dry_run=True).sessions == ()
    assert [s.id for s in aged.prune(older_than="4d", dry_run=True).sessions] == [sid]


def test_a_session_changed_after_the_plan_is_kept(aged: SessionRepo, clock: SetClock) -> None:
    """apply_prune keeps a planned session that got an append since, and says why."""
    sid = make_session(aged, clock, 120)
    other = make_session(aged, clock, 120)
    plan = aged.prune(older_than="90d", dry_run=True, now=NOW)
    aged.open(sid).append_message(kit.user("I am back"))
    result = aged.apply_prune(plan)
    assert result.pruned == (other,)
    assert [k for k, _ in result.kept] == [sid] and "changed" in result.kept[0][1]
    assert ids(aged) == {sid}


def test_a_session_deleted_after_the_plan_is_reported_kept(aged: SessionRepo, clock: SetClock) -> None:
    """A planned session someone else deleted meanwhile stops nothing: it is reported, the rest is pruned."""
    gone, other = make_session(aged, clock, 120), make_session(aged, clock, 120)
    plan = aged.prune(older_than="90d", dry_run=True, now=NOW)
    aged.delete(gone)
    result = aged.apply_prune(plan)
    assert result.pruned == (other,) and [k for k, _ in result.kept] == [gone]


@pytest.mark.parametrize(("text", "expected"), [
    ("90d", timedelta(days=90)), ("12h", timedelta(hours=12)), ("2w", timedelta(weeks=2)), ("30m", timedelta(minutes=30)),
    ("45s", timedelta(seconds=45)), ("1w3d", timedelta(days=10)), (" 0s ", timedelta(0)),
])
def test_ages_are_read_as_a_number_and_a_unit(text: str, expected: timedelta) -> None:
    """parse_age reads what --older-than takes."""
    assert parse_age(text) == expected


@pytest.mark.parametrize("text", ["", "90", "d", "-5d", "1.5d", "3 years", "90dd"])
def test_anything_else_is_not_an_age(text: str) -> None:
    """A bad age is a ValueError that says what an age looks like."""
    with pytest.raises(ValueError, match="90d"):
        parse_age(text)


def test_bad_older_than_values_are_refused(aged: SessionRepo) -> None:
    """older_than must be a timedelta or an age string, and not negative."""
    with pytest.raises(TypeError):
        aged.prune(older_than=90)
    with pytest.raises(ValueError, match="negative"):
        aged.prune(older_than=timedelta(days=-1))
