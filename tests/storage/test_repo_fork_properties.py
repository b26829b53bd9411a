"""Properties of fork over random session histories (in-memory repository)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import sessiontree_strategies as strat
import sessiontree_testkit as kit

from sessiontree import SessionError
from sessiontree.domain.ids import counter_ids, fixed_clock
from sessiontree.repository import InMemorySessionRepo


def build(ops: list[tuple[Any, ...]], name: str | None) -> tuple[InMemorySessionRepo, Any]:
    repo = InMemorySessionRepo(clock=fixed_clock(kit.T0), id_generator=counter_ids())
    session = repo.create(cwd="/p", name=name)
    for op in ops:
        strat.apply_operation(session, op)
    return repo, session


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=strat.operations(), name=st.none() | st.sampled_from(["alpha", "beta"]), pick=st.integers(0, 10**6))
def test_fork_at_any_entry_reproduces_the_context_there(ops: list[tuple[Any, ...]], name: str | None, pick: int) -> None:
    """Forking 'at' any entry gives a valid session whose context, labels and name match."""
    repo, source = build(ops, name)
    candidates = [e for e in source.get_entries() if e.type != "leaf"]
    if not candidates:
        return
    target = candidates[pick % len(candidates)]
    fork = repo.fork(source.id, target.id, position="at")
    kit.check_invariants(fork)
    source_path = source.get_branch(target.id)
    fork_ids = [e.id for e in fork.get_entries()]
    path_ids = [e.id for e in source_path if e.id in set(fork_ids)]
    assert fork_ids[: len(path_ids)] == path_ids  # the path first, in order, same ids
    assert all(e.type in ("label", "session_info") for e in fork.get_entries()[len(path_ids) :])
    assert all(e.type == "label" for e in source_path if e.id not in set(fork_ids))
    if target.type != "label":
        assert fork.build_context().messages == source.build_context(leaf_id=target.id).messages
    expected_labels = {t: lab for t, lab in source.get_labels().items() if t in set(path_ids)}
    assert fork.get_labels() == expected_labels
    assert fork.get_session_name() == source.get_session_name()
    assert fork.header.parent_session == source.id


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=strat.operations(), pick=st.integers(0, 10**6))
def test_fork_before_accepts_exactly_the_user_messages(ops: list[tuple[Any, ...]], pick: int) -> None:
    """'before' works on user messages (ending at the parent) and refuses every other entry."""
    repo, source = build(ops, None)
    entries = source.get_entries()
    if not entries:
        return
    target = entries[pick % len(entries)]
    is_user = target.type == "message" and target.message.role == "user"
    count = len(repo.list())
    try:
        fork = repo.fork(source.id, target.id)
    except SessionError as exc:
        assert exc.code == "invalid_fork_target" and not is_user
        assert len(repo.list()) == count
        return
    assert is_user
    ids = {e.id for e in fork.get_entries()}
    assert target.id not in ids
    if target.parent_id is not None and source.get_entry(target.parent_id).type != "label":
        assert target.parent_id in ids
