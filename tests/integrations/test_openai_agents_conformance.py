"""What the Agents SDK's own tests check of its SQLiteSession (tests/memory/test_session.py and test_session_limit.py
in openai-agents-python), checked of SessionTreeSession on every backend; and, as a property, that any sequence of
calls answers as SQLiteSession answers it."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession
from agents.memory import Session, SessionSettings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
import openai_agents_kit as kit

from sessiontree.integrations.openai_agents import SessionTreeSession

BACKENDS = [pytest.param(b, marks=pytest.mark.postgres) if b == "postgres" else b for b in kit.BACKENDS]


@pytest.fixture(params=BACKENDS)
def repos(request, tmp_path):
    with kit.repositories(request.param, tmp_path) as open_again:
        yield open_again


@pytest.fixture
def store(repos):
    return lambda sid=None, **kw: SessionTreeSession(sid or kit.new_id(), repos(), **kw)


def run(coroutine):
    return asyncio.run(coroutine)


def say(*texts):
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]


def test_it_is_an_agents_sdk_session(store):
    assert isinstance(store(), Session)


def test_add_get_and_clear(store):
    """test_sqlite_session_memory_direct."""
    session = store()
    run(session.add_items(say("Hello", "Hi there!")))
    assert run(session.get_items()) == say("Hello", "Hi there!")
    run(session.clear_session())
    assert run(session.get_items()) == []


def test_pop_item(store):
    """test_sqlite_session_memory_pop_item: newest first, None when empty."""
    session = store()
    assert run(session.pop_item()) is None
    run(session.add_items(say("Hello", "Hi there!", "How are you?")))
    assert [run(session.pop_item()) for _ in range(4)] == [*reversed(say("Hello", "Hi there!", "How are you?")), None]
    assert run(session.get_items()) == []


def test_pop_only_touches_its_own_session(store):
    """test_session_memory_pop_different_sessions."""
    one, two = store(), store()
    first, second = ({"role": "user", "content": f"Session 2 message {n}"} for n in (1, 2))
    run(one.add_items(say("Session 1 message")))
    run(two.add_items([first, second]))
    assert run(two.pop_item()) == second
    assert run(one.get_items()) == say("Session 1 message")
    assert run(two.get_items()) == [first]


@pytest.mark.parametrize("limit, expected", [(None, 6), (2, 2), (4, 4), (10, 6), (0, 0)])
def test_get_items_with_limit_gives_the_latest(store, limit, expected):
    """test_sqlite_session_get_items_with_limit: the latest ``limit`` items, oldest first."""
    items = say("Message 1", "Response 1", "Message 2", "Response 2", "Message 3", "Response 3")
    session = store()
    run(session.add_items(items))
    assert run(session.get_items(limit)) == items[len(items) - expected:]


@pytest.mark.parametrize("content", ["こんにちは", "😊👍", "Привет", "O'Reilly", "DROP TABLE sessions;",
                                     '"SELECT * FROM users WHERE name = "admin";"', "Robert'); DROP TABLE students;--"])
def test_unicode_and_sql_look_alikes_come_back_unchanged(store, content):
    """test_sqlite_session_unicode_content, test_sqlite_session_special_characters_and_sql_injection."""
    session = store()
    run(session.add_items(say(content, content)))
    assert run(store(session.session_id).get_items()) == say(content, content)


def test_threads_with_their_own_event_loops_add_to_one_session(store):
    """test_sqlite_session_concurrent_access."""
    session = store()
    items = [{"role": "user", "content": f"Message {i}"} for i in range(10)]
    threads = [threading.Thread(target=lambda item=item: run(session.add_items([item]))) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(i["content"] for i in run(session.get_items())) == sorted(i["content"] for i in items)


def test_session_settings(store):
    """test_session_settings_default, _constructor, test_get_items_uses_session_settings_limit and
    test_get_items_explicit_limit_overrides_session_settings."""
    assert store().session_settings == SessionSettings()
    assert store(session_settings={"limit": 5}).session_settings == SessionSettings(limit=5)
    session = store(session_settings=SessionSettings(limit=3))
    items = [{"role": "user", "content": f"Message {i}"} for i in range(5)]
    run(session.add_items(items))
    assert run(session.get_items()) == items[2:]
    assert run(session.get_items(limit=2)) == items[3:]


def test_an_empty_session_answers_without_writing(store):
    session = store()
    assert run(session.get_items()) == [] and run(session.pop_item()) is None
    run(session.clear_session())
    assert session.session.get_entries() == []


# -- through the SDK's agent loop --------------------------------------------------------------------------------


def test_the_second_turn_sees_the_first(store):
    """test_session_memory_basic_functionality_parametrized, with_explicit_instance."""
    model = kit.ScriptedModel([kit.say("San Francisco")], [kit.say("California", 2)])
    agent, session = Agent(name="test", model=model), store()
    assert run(Runner.run(agent, "What city is the Golden Gate Bridge in?", session=session)).final_output == "San Francisco"
    assert run(Runner.run(agent, "What state is it in?", session=session)).final_output == "California"
    assert [i.get("content") for i in model.inputs[1]][::2] == ["What city is the Golden Gate Bridge in?", "What state is it in?"]


def test_sessions_keep_their_own_histories(store):
    """test_session_memory_different_sessions_parametrized."""
    model = kit.ScriptedModel([kit.say("I like cats")], [kit.say("I like dogs", 2)], [kit.say("Cats", 3)])
    agent, cats, dogs = Agent(name="test", model=model), store(), store()
    run(Runner.run(agent, "I like cats", session=cats))
    run(Runner.run(agent, "I like dogs", session=dogs))
    run(Runner.run(agent, "What did I say I like?", session=cats))
    assert [i.get("content") for i in model.inputs[2]][::2] == ["I like cats", "What did I say I like?"]


@pytest.mark.parametrize("limit, seen", [(2, ["Message 3", "Reply 3", "Message 4"]), (0, ["Message 4"])])
def test_run_config_session_limit(store, limit, seen):
    """test_session_limit_parameter, test_session_limit_zero, test_runner_with_session_settings_override."""
    model = kit.ScriptedModel(*([kit.say(f"Reply {n}", n)] for n in range(1, 5)))
    agent, session = Agent(name="test", model=model), store(session_settings=SessionSettings(limit=100))
    for n in range(1, 4):
        run(Runner.run(agent, f"Message {n}", session=session))
    config = RunConfig(session_settings=SessionSettings(limit=limit))
    run(Runner.run(agent, "Message 4", session=session, run_config=config))
    texts = [i["content"] if isinstance(i["content"], str) else i["content"][0]["text"] for i in model.inputs[-1]]
    assert texts == seen


def test_list_input_is_appended_and_a_callback_shapes_the_input(store):
    """test_session_memory_appends_list_input_by_default, test_session_callback_prepared_input."""
    model = kit.ScriptedModel([kit.say("This should run")], [kit.say("I'm gpt-4o", 2)])
    agent, session = Agent(name="test", model=model), store()
    history = say("Earlier message", "Saved reply")
    run(session.add_items(history))
    run(Runner.run(agent, [{"role": "user", "content": "Test message"}], session=session))
    assert model.inputs[0] == [*history, {"role": "user", "content": "Test message"}]

    def users_only(old, new):
        return [item for item in old if item.get("role") == "user"] + new
    run(Runner.run(agent, [{"role": "user", "content": "What your name?"}], session=session,
                   run_config=RunConfig(session_input_callback=users_only)))
    assert [i["content"] for i in model.inputs[1]] == ["Earlier message", "Test message", "What your name?"]


# -- any sequence of calls, against SQLiteSession ----------------------------------------------------------------

calls = st.lists(st.one_of(
    st.tuples(st.just("add"), st.lists(st.sampled_from(say("a", "b", "c", "d")), max_size=3)),
    st.tuples(st.just("get"), st.none() | st.integers(-2, 5)),
    st.tuples(st.just("pop"), st.none()),
    st.tuples(st.just("clear"), st.none()),
), max_size=12)


async def _answers(session, steps):
    out = []
    for name, argument in steps:
        if name == "add":
            out.append(await session.add_items(argument))
        elif name == "get":
            out.append(await session.get_items(argument))
        else:
            out.append(await getattr(session, "pop_item" if name == "pop" else "clear_session")())
    return out + [await session.get_items()]


@given(steps=calls)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_sequence_of_calls_answers_as_sqlite_session_does(repos, steps):
    """Limits (none, zero, negative, beyond the end), pops past the start, clears and adds, in any order; then a
    fresh store on the repository opened again reads the same items."""
    ours, theirs = SessionTreeSession(kit.new_id(), repos()), SQLiteSession("theirs")
    again = SessionTreeSession(ours.session_id, repos())
    try:
        assert run(_answers(ours, steps)) == run(_answers(theirs, steps))
        assert run(again.get_items()) == run(theirs.get_items())
    finally:
        for store in (ours, again, theirs):
            store.close()
        for repo in {ours.repo, again.repo}:  # a database's connections, one store per example
            repo.close()
