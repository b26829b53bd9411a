"""The retention rule as a property, on every backend: for any session ages, labels and names, the dry run selects
exactly the sessions the rule names and changes nothing; pruning deletes exactly those, leaves every other session's
lines as they were, and (archiving) writes each deleted log whole."""

from __future__ import annotations

import gzip
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessiontree_prunekit import NOW, SetClock, make_session, stored

from sessiontree.repository import SessionRepo

SESSIONS = st.lists(st.tuples(st.integers(0, 12), st.booleans(), st.booleans()), min_size=1, max_size=5)


def snapshot(repo: SessionRepo) -> dict[str, list[bytes]]:
    """Every session of the repository, with its stored lines."""
    return {info.id: stored(repo, info.id) for info in repo.list()}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_prune_deletes_exactly_the_sessions_the_rule_selects(aged: SessionRepo, clock: SetClock, tmp_path: Path,
                                                             data: Any) -> None:
    """Selected: last change more than ``older_than`` ago, and neither labelled (with keep_labelled) nor named (with
    keep_named). Each example works in a working directory of its own; earlier examples' sessions are the others."""
    specs = data.draw(SESSIONS, label="sessions (days old, labelled, named)")
    days = data.draw(st.integers(0, 12), label="older_than days")
    keep_labelled, keep_named, archive = (data.draw(st.booleans(), label=n) for n in ("keep_labelled", "keep_named", "archive"))
    cwd = f"/prop/{uuid.uuid4().hex}"
    made = {make_session(aged, clock, age, label=label, name="named" if named else None, cwd=cwd): (age, label, named)
            for age, label, named in specs}
    expected = {sid for sid, (age, label, named) in made.items()
                if age > days and not (keep_labelled and label) and not (keep_named and named)}
    folder = tmp_path / uuid.uuid4().hex if archive else None
    options: dict[str, Any] = {"keep_labelled": keep_labelled, "keep_named": keep_named, "archive": folder, "cwd": cwd,
                               "now": NOW}
    before = snapshot(aged)

    plan = aged.prune(older_than=timedelta(days=days), dry_run=True, **options)
    assert {s.id for s in plan.sessions} == expected
    assert snapshot(aged) == before and (folder is None or not folder.exists())

    result = aged.prune(older_than=timedelta(days=days), **options)
    assert set(result.pruned) == expected and result.kept == ()
    assert snapshot(aged) == {sid: lines for sid, lines in before.items() if sid not in expected}
    if folder is not None:
        for sid in expected:
            assert gzip.decompress((folder / f"{sid}.jsonl.gz").read_bytes()) == b"".join(
                line + b"\n" for line in before[sid])
