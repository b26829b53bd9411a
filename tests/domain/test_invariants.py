"""Any sequence of operations keeps the SPEC 2.3 / 2.4 invariants (Hypothesis)."""

from __future__ import annotations

import sessiontree_strategies as strat
import sessiontree_testkit as kit
from hypothesis import HealthCheck, given, settings

from sessiontree import Session

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(strat.operations())
def test_any_operation_sequence_keeps_the_invariants(ops):
    """After every operation (refused ones included) the log satisfies SPEC 2.3 and 2.4."""
    session = kit.open_session()
    for op in ops:
        strat.apply_operation(session, op)
        kit.check_invariants(session)
    kit.check_invariants(Session(session.storage))


@PROPERTY
@given(strat.operations())
def test_refused_operations_leave_the_stored_log_untouched(ops):
    """What the storage holds is exactly what the live session reports, whatever was refused."""
    session = kit.open_session()
    for op in ops:
        strat.apply_operation(session, op)
    reopened = Session(session.storage)
    assert reopened.version == session.version
    assert reopened.get_entries() == session.get_entries()
    assert reopened.leaf_id == session.leaf_id
