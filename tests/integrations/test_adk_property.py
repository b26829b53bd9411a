"""A Hypothesis property: our ADK session service answers as ADK's own InMemorySessionService over random sequences of
create, append_event (state deltas in every scope, partial events, every kind of part), get (with each config), list,
get_user_state and delete; on memory (many examples), JSONL and SQLite (fewer)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from google.adk.events import Event, EventActions
from google.adk.sessions import InMemorySessionService
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import open_repo
from sessiontree.integrations.adk import SessionTreeSessionService

USERS = ["ada", "bob"]
IDS = ["s1", "s2"]
KEYS = ["a", "b", "app:x", "app:y", "user:u", "temp:t"]
values = st.none() | st.integers(-3, 3) | st.text(max_size=4) | st.lists(st.integers(0, 2), max_size=2)
deltas = st.dictionaries(st.sampled_from(KEYS), values, max_size=3)
texts = st.text(max_size=8)
parts = st.one_of(
    st.builds(lambda t: types.Part(text=t), texts),
    st.builds(lambda t, s: types.Part(text=t, thought=True, thought_signature=s), texts, st.none() | st.binary(max_size=4)),
    st.builds(lambda i, a: types.Part(function_call=types.FunctionCall(id=i, name="f", args=a)),
              st.none() | st.sampled_from(["c1", "c2"]), st.dictionaries(st.sampled_from(["q", "n"]), values, max_size=2)),
    st.builds(lambda i, r: types.Part(function_response=types.FunctionResponse(id=i, name="f", response=r)),
              st.none() | st.sampled_from(["c1", "c2"]), st.dictionaries(st.sampled_from(["r"]), values, max_size=1)),
)
contents = st.none() | st.builds(lambda role, ps: types.Content(role=role, parts=ps),
                                 st.sampled_from(["user", "model", None]), st.lists(parts, min_size=1, max_size=3))
events = st.builds(
    lambda author, content, delta, partial, inv, step: ({
        "author": author, "content": content, "actions": EventActions(state_delta=delta), "partial": partial,
        "invocation_id": inv}, step),
    st.sampled_from(["user", "agent"]), contents, deltas, st.sampled_from([None, True]),
    st.sampled_from(["i1", "i2", "i3"]), st.floats(0.001, 2.0))
configs = st.none() | st.builds(GetSessionConfig, num_recent_events=st.none() | st.integers(0, 4)) | st.builds(
    GetSessionConfig, after_timestamp=st.floats(0, 10))
# mostly ada's s1, which every sequence starts by creating, so most appends and gets meet a session
users = st.sampled_from(["ada", "ada", "ada", "bob"])
ids = st.sampled_from(["s1", "s1", "s1", "s2"])
ops = st.tuples(st.tuples(st.just("create"), st.just("ada"), st.just("s1"), deltas), st.lists(st.one_of(
    st.tuples(st.just("create"), users, ids, deltas),
    st.tuples(st.just("append"), users, ids, events),
    st.tuples(st.just("append"), users, ids, events),
    st.tuples(st.just("get"), users, ids, configs),
    st.tuples(st.just("list"), st.sampled_from([*USERS, None])),
    st.tuples(st.just("user_state"), st.sampled_from(USERS)),
    st.tuples(st.just("delete"), users, ids),
), max_size=16)).map(lambda pair: [pair[0], *pair[1]])


def _view(session: Any, with_time: bool = True) -> Any:
    if session is None:
        return None
    return (session.id, session.app_name, session.user_id, session.state, session.events,
            session.last_update_time if with_time and session.events else None)


async def _outcome(coro: Any) -> Any:
    try:
        return ("ok", await coro)
    except Exception as exc:  # the same kind of failure from both, e.g. AlreadyExistsError, SessionNotFoundError
        return ("error", type(exc).__name__)


async def _run(steps: list[Any], ours: SessionTreeSessionService) -> None:
    theirs = InMemorySessionService()
    objects: dict[Any, dict[tuple[str, str], Any]] = {id(ours): {}, id(theirs): {}}
    start = time.time() + 5
    clock = 0.0
    for number, step in enumerate(steps):
        kind, answers = step[0], []
        if kind == "append":  # one event, a copy for each service (append_event trims the temp: keys of its event)
            fields, step_time = step[3]
            made = Event(**fields, id=f"e{number}", timestamp=start + clock + step_time)
        for service in (ours, theirs):
            held = objects[id(service)]
            if kind == "create":
                _, user, sid, state = step
                answer = await _outcome(service.create_session(app_name="app", user_id=user, session_id=sid, state=state))
                if answer[0] == "ok":
                    held[(user, sid)] = answer[1]
                    answer = ("ok", _view(answer[1], with_time=False))
            elif kind == "append":
                _, user, sid, _ = step
                session = held.get((user, sid))
                if session is None:
                    answers.append("no object")
                    continue
                event = made.model_copy(deep=True)
                answer = await _outcome(service.append_event(session, event))
                answer = (answer[0], answer[1] if answer[0] == "error" else answer[1].model_dump())
                answer = (answer, _view(session, with_time=False))
            elif kind == "get":
                _, user, sid, config = step
                answer = await _outcome(service.get_session(app_name="app", user_id=user, session_id=sid, config=config))
                if answer[0] == "ok" and answer[1] is not None and config is None:
                    held[(user, sid)] = answer[1]
                answer = (answer[0], _view(answer[1]) if answer[0] == "ok" else answer[1])
            elif kind == "list":
                listed = await service.list_sessions(app_name="app", user_id=step[1])
                answer = sorted((s.id, s.user_id, sorted(s.state.items(), key=repr), s.events) for s in listed.sessions)
            elif kind == "user_state":
                answer = await service.get_user_state(app_name="app", user_id=step[1])
            else:
                _, user, sid = step
                await service.delete_session(app_name="app", user_id=user, session_id=sid)
                held.pop((user, sid), None)
                answer = await service.get_session(app_name="app", user_id=user, session_id=sid)
            answers.append(answer)
        if kind == "append" and len(step) == 4:
            clock += step[3][1]
        assert answers[0] == answers[1], f"{kind}: ours {answers[0]!r}\ntheirs {answers[1]!r}"


SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]}


@settings(max_examples=150, **SETTINGS)
@given(steps=ops)
def test_the_service_answers_as_adks_in_memory_service(steps):
    asyncio.run(_run(steps, SessionTreeSessionService(open_repo("memory:", redactors=None))))


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
@settings(max_examples=15, **SETTINGS)
@given(steps=ops)
def test_the_service_answers_as_adks_in_memory_service_on_files_and_sqlite(backend, steps, tmp_path_factory):
    place: Path = tmp_path_factory.mktemp("adk")
    repo = open_repo(str(place / "s") if backend == "jsonl" else f"sqlite:///{place / 's.db'}", redactors=None)
    try:
        asyncio.run(_run(steps, SessionTreeSessionService(repo)))
    finally:
        repo.close()
