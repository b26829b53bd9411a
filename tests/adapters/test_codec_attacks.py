"""Values that once made the wire model lose data or write a line its own reader refuses (a review of the one wire
model: tests/adapters/test_codec_fixtures.py runs the real files; these are the ways found around it)."""

from __future__ import annotations

import math

import pytest

from sessiontree import AssistantMessage, Cost, JsonlSessionRepo, Usage, UserMessage, open_session


@pytest.mark.parametrize("amount", [math.nan, math.inf, -math.inf])
def test_a_cost_that_is_not_a_finite_number_is_refused_before_it_is_written(tmp_path, amount):
    """JSON has no NaN or infinity: msgspec writes them as null, which no reader takes for a number, so the whole
    session would read as corrupt. The append command refuses them (as it refuses them in tool arguments)."""
    session = JsonlSessionRepo(tmp_path).create(cwd="/w")
    first = session.append_message(UserMessage(content="kept", timestamp=1))
    usage = Usage(input=1, output=1, total_tokens=2, cost=Cost(total=amount))
    with pytest.raises(ValueError, match="finite"):
        session.append_message(AssistantMessage(content=[], provider="p", model="m", stop_reason="stop", timestamp=2,
                                                usage=usage))
    reopened = open_session(session.storage.location)
    assert [e.id for e in reopened.get_entries()] == [first]
