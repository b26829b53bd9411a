"""App projections: registered, replayed on open, updated on append, in time-travel views."""

from __future__ import annotations

import pytest
import sessiontree_testkit as kit

from sessiontree import FunctionProjection, Projection, Session, SessionError


class CountingProjection:
    """Counts messages per role, and how often ``apply`` ran (to see incremental updates)."""

    name = "roles"
    types = frozenset({"message"})

    def __init__(self):
        self.applied = 0

    def initial(self):
        return {}

    def apply(self, state, entry):
        self.applied += 1
        role = entry.message.role
        return {**state, role: state.get(role, 0) + 1}


def test_a_plain_class_satisfies_the_protocol():
    """Anything with ``name``, ``initial`` and ``apply`` is a Projection."""
    assert isinstance(CountingProjection(), Projection)
    assert not isinstance(object(), Projection)


def test_registered_projection_is_replayed_over_the_existing_log():
    """Registering on a session with history folds the whole log."""
    s = kit.open_session()
    s.append_message(kit.user("q"))
    s.append_message(kit.assistant("a"))
    s.register_projection(CountingProjection())
    assert s.projection("roles") == {"user": 1, "assistant": 1}


def test_projection_is_replayed_on_open():
    """A projection passed to ``Session(...)`` reflects what the storage already holds."""
    s = kit.open_session()
    s.append_message(kit.user("q"))
    reopened = Session(s.storage, projections=[CountingProjection()])
    assert reopened.projection("roles") == {"user": 1}


def test_projection_is_updated_incrementally_on_append():
    """After the first read, each append applies only the new entry."""
    projection = CountingProjection()
    s = kit.open_session(projections=[projection])
    s.append_message(kit.user("q"))
    assert s.projection("roles") == {"user": 1}
    runs = projection.applied
    s.append_message(kit.assistant("a"))
    s.append_model_change("openai", "gpt-5")
    assert s.projection("roles") == {"user": 1, "assistant": 1}
    assert projection.applied == runs + 1


def test_time_travel_views_carry_app_projections():
    """``at(version)`` and ``replay()`` views answer app projections as of their version."""
    s = kit.open_session(projections=[CountingProjection()])
    s.append_message(kit.user("q"))
    s.append_message(kit.assistant("a"))
    assert s.at(2).projection("roles") == {"user": 1}
    assert s.at(1).projection("roles") == {}
    assert [step.view.projection("roles") for step in s.replay()] == [
        {}, {"user": 1}, {"user": 1, "assistant": 1},
    ]


def test_function_projection_from_name_initial_and_apply():
    """FunctionProjection builds a projection from a name, an initial factory and a function."""
    tools = FunctionProjection(
        "tools_changes", initial=list, apply=lambda state, e: [*state, tuple(e.active_tool_names)],
        types=["active_tools_change"],
    )
    s = kit.open_session(projections=[tools])
    s.append_active_tools_change(["read"])
    s.append_message(kit.user("q"))
    s.append_active_tools_change(["read", "bash"])
    assert s.projection("tools_changes") == [("read",), ("read", "bash")]


def test_function_projection_with_a_mutable_initial_value_does_not_share_it():
    """A mutable initial *value* is copied per fold, so views and the live session never share it."""

    def add(state, entry):
        state.append(entry.id)
        return state

    s = kit.open_session(projections=[FunctionProjection("ids", initial=[], apply=add)])
    a = s.append_message(kit.user("q"))
    view = s.at(2)
    assert view.projection("ids") == [a]
    b = s.append_message(kit.user("r"))
    assert s.projection("ids") == [a, b]
    assert view.projection("ids") == [a]
    assert s.at(1).projection("ids") == []


def test_names_are_unique():
    """A second projection with a taken name (app or built-in) is refused."""
    s = kit.open_session(projections=[CountingProjection()])
    with pytest.raises(SessionError) as caught:
        s.register_projection(CountingProjection())
    assert caught.value.code == "already_exists"
    with pytest.raises(SessionError):
        s.register_projection(FunctionProjection("labels", dict, lambda s, e: s))


@pytest.mark.parametrize("bad", [object(), "roles", FunctionProjection])
def test_non_projections_are_refused(bad):
    """Registering something without name/initial/apply is a TypeError."""
    with pytest.raises(TypeError):
        kit.open_session().register_projection(bad)


@pytest.mark.parametrize("args", [("", dict, lambda s, e: s), (5, dict, lambda s, e: s), ("n", dict, "apply")])
def test_function_projection_checks_its_arguments(args):
    """FunctionProjection needs a non-empty name and a callable apply."""
    with pytest.raises(TypeError):
        FunctionProjection(*args)


def test_unknown_projection_name_is_not_found():
    """``projection(name)`` for a name nobody registered raises not_found naming it."""
    with pytest.raises(SessionError, match="'nope'"):
        kit.open_session().projection("nope")
