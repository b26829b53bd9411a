"""The Google ADK session service (sessiontree.integrations.adk): an ADK Runner run offline on it (two turns with a tool
call, reopen, continue, rewind, fork), stale writers refused (two processes), and what the command line shows; on JSONL,
SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import adk_kit as kit
import pytest
import sessiontree_pg as pg
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events import Event, EventActions
from google.adk.runners import Runner

from sessiontree import open_repo
from sessiontree.integrations.adk import SessionTreeSessionService

CLI = str(Path(sys.executable).with_name("sessiontree"))
APP, USER = "weather", "ada"


def cli(url: str, *args: str) -> str:
    return subprocess.run([CLI, "--repo", url, *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(params=["jsonl", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: Any, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        with pg.temp_schema("adk") as schema:
            yield pg.url(schema)
        return
    yield {"jsonl": str(tmp_path / "sessions"), "sqlite": f"sqlite:///{tmp_path / 's.db'}"}[request.param]


async def turn(runner: Runner, text: str, session_id: str = "s1") -> list[Event]:
    return [e async for e in runner.run_async(user_id=USER, session_id=session_id, new_message=kit.user(text))]


def texts(session: Any) -> list[str]:
    return [p.text for e in session.events if e.content for p in (e.content.parts or []) if p.text]


def test_a_runner_runs_reopens_continues_rewinds_and_forks(url):
    async def scenario() -> None:
        repo = open_repo(url)
        service = SessionTreeSessionService(repo)
        model = kit.ScriptedLlm(script=[kit.call("get_weather", city="Paris"), kit.say("Sunny in Paris."),
                                        kit.say("You asked about Paris.")])
        runner = Runner(app_name=APP, agent=kit.weather_agent(model), session_service=service)
        await service.create_session(app_name=APP, user_id=USER, session_id="s1",
                                     state={"units": "metric", "user:name": "Ada", "app:version": 2})
        first = await turn(runner, "Weather in Paris?")
        await turn(runner, "What did I ask?")
        assert model.texts_sent() == ["Weather in Paris?", "Sunny in Paris.", "What did I ask?"]
        repo.close()

        # reopen: a new repository object and service, as another run of the program would
        repo = open_repo(url)
        service = SessionTreeSessionService(repo)
        session = await service.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert texts(session) == ["Weather in Paris?", "Sunny in Paris.", "What did I ask?", "You asked about Paris."]
        assert session.state == {"units": "metric", "last_answer": "You asked about Paris.", "user:name": "Ada",
                                 "app:version": 2}
        calls = [p.function_call for e in session.events for p in e.content.parts if p.function_call]
        assert [(c.name, c.args) for c in calls] == [("get_weather", {"city": "Paris"})]
        model = kit.ScriptedLlm(script=[kit.say("Rain tomorrow."), kit.say("Windy in Rome.")])
        runner = Runner(app_name=APP, agent=kit.weather_agent(model), session_service=service)
        third = await turn(runner, "And tomorrow?")
        assert model.texts_sent()[-2:] == ["You asked about Paris.", "And tomorrow?"]

        # rewind before the third turn: a leaf move; the state set at creation survives (ADK issue 4933)
        await runner.rewind_async(user_id=USER, session_id="s1", rewind_before_invocation_id=third[0].invocation_id)
        session = await service.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert texts(session) == ["Weather in Paris?", "Sunny in Paris.", "What did I ask?", "You asked about Paris."]
        assert session.state["units"] == "metric" and session.state["last_answer"] == "You asked about Paris."
        with repo.open(service.tree_session_id(app_name=APP, user_id=USER, session_id="s1")) as tree:
            branch = {e.id for e in tree.get_branch()}
            rewound = [e for e in tree.get_entries() if e.type == "message" and e.id not in branch]
            assert len(rewound) == 2  # the third turn's question and answer, kept on a side branch

        # fork from the first turn's answer: a new ADK session with that history, which continues on its own
        answer = next(e for e in first if e.content and e.content.parts[0].text == "Sunny in Paris.")
        fork = await service.fork_session(app_name=APP, user_id=USER, session_id="s1", event_id=answer.id,
                                          new_session_id="s2")
        assert texts(fork) == ["Weather in Paris?", "Sunny in Paris."]
        assert fork.state["units"] == "metric" and fork.state["last_answer"] == "Sunny in Paris."
        await turn(runner, "And Rome?", session_id="s2")
        assert model.texts_sent()[-3:] == ["Weather in Paris?", "Sunny in Paris.", "And Rome?"]
        with pytest.raises(AlreadyExistsError):
            await service.fork_session(app_name=APP, user_id=USER, session_id="s1", event_id=answer.id,
                                       new_session_id="s2")
        listed = await service.list_sessions(app_name=APP, user_id=USER)
        assert [s.id for s in listed.sessions] == ["s1", "s2"]
        repo.close()

    asyncio.run(scenario())
    sid = "adk.weather.ada.s1"
    shown = cli(url, "show", sid)
    for text in ("user: Weather in Paris?", 'get_weather(city="Paris")', "tool_result get_weather:",
                 "assistant: You asked about Paris.", "assistant: Rain tomorrow."):
        assert text in shown
    context = json.loads(cli(url, "context", sid, "--json"))
    assert [m["role"] for m in context["messages"]] == ["user", "assistant", "tool_result", "assistant", "user", "assistant"]
    assert "0 error(s)" in cli(url, "verify")


WRITER = textwrap.dedent("""
    import asyncio, sys, time
    from pathlib import Path
    from google.adk.errors import StaleSessionError
    from google.adk.events import Event
    from google.genai import types
    from sessiontree import open_repo
    from sessiontree.integrations.adk import SessionTreeSessionService

    url, name, ready, go = sys.argv[1:]
    async def main():
        service = SessionTreeSessionService(open_repo(url))
        session = await service.get_session(app_name="weather", user_id="ada", session_id="s1")
        Path(ready).touch()
        while not Path(go).exists():
            time.sleep(0.01)
        event = Event(author="user", invocation_id=name,
                      content=types.Content(role="user", parts=[types.Part(text=name)]))
        try:
            await service.append_event(session, event)
            print("appended")
        except StaleSessionError:
            print("stale")
    asyncio.run(main())
""")


def test_two_processes_appending_to_one_session_one_wins_and_the_other_is_told(url, tmp_path):
    async def setup() -> None:
        repo = open_repo(url)
        await SessionTreeSessionService(repo).create_session(app_name=APP, user_id=USER, session_id="s1")
        repo.close()

    asyncio.run(setup())
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, name, str(tmp_path / name), str(go)],
                              stdout=subprocess.PIPE, text=True) for name in ("a", "b")]
    import time
    deadline = time.monotonic() + 60
    while not all((tmp_path / name).exists() for name in ("a", "b")):
        assert time.monotonic() < deadline, "the writers did not start"
        time.sleep(0.02)
    go.touch()
    outcomes = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    assert outcomes == ["appended", "stale"]

    async def check() -> None:
        repo = open_repo(url)
        session = await SessionTreeSessionService(repo).get_session(app_name=APP, user_id=USER, session_id="s1")
        assert len(session.events) == 1
        repo.close()

    asyncio.run(check())


def test_a_stale_session_object_is_refused_and_nothing_is_written(tmp_path):
    async def scenario() -> None:
        service = SessionTreeSessionService(open_repo(str(tmp_path / "s")))
        mine = await service.create_session(app_name=APP, user_id=USER, session_id="s1")
        theirs = await service.get_session(app_name=APP, user_id=USER, session_id="s1")
        await service.append_event(theirs, Event(author="user", content=kit.user("first"), timestamp=mine.last_update_time + 1))
        with pytest.raises(StaleSessionError):
            await service.append_event(mine, Event(author="user", content=kit.user("second"),
                                                   timestamp=mine.last_update_time + 2))
        assert texts(await service.get_session(app_name=APP, user_id=USER, session_id="s1")) == ["first"]
        # the same event again (a retry) is not written twice
        event = Event(author="user", content=kit.user("third"), timestamp=theirs.last_update_time + 5,
                      actions=EventActions(state_delta={"temp:scratch": 1, "k": 1}))
        await service.append_event(theirs, event)
        assert theirs.state["temp:scratch"] == 1  # for the rest of the invocation, as ADK does
        again = await service.get_session(app_name=APP, user_id=USER, session_id="s1")
        await service.append_event(again, event)
        stored = await service.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert texts(stored) == ["first", "third"] and stored.state == {"k": 1}  # temp: never stored

    asyncio.run(scenario())


def test_importing_the_service_without_adk_names_the_extra():
    code = ("import sys; sys.modules['google.adk'] = None\n"
            "try:\n    import sessiontree.integrations.adk\nexcept ModuleNotFoundError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "missing_extra: sessiontree.integrations.adk needs google-adk: pip install 'sessiontree[adk]'"


def test_the_benchmark_prints_its_tables(tmp_path):
    """benchmarks/bench_integrations.py --only adk / claude-agent runs end to end (timings not checked)."""
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_integrations.py"
    for only, size, rows in (("adk", ["--adk-events", "8"], ("| append_event, one event |", "| get_session, 8 events |")),
                             ("claude-agent", ["--claude-entries", "200"],
                              ("| append, a 100-entry batch |", "| load, 200 entries |"))):
        out = subprocess.run([sys.executable, str(script), "--only", only, *size, "--framework-rounds", "2", "--json",
                              str(tmp_path / f"{only}.json")], capture_output=True, text=True, timeout=300, check=True).stdout
        for row in rows:
            assert any(line.startswith(row) for line in out.splitlines()), row
        assert len(json.loads((tmp_path / f"{only}.json").read_text())[only]) == 3


def test_the_state_handed_out_is_the_callers_own(tmp_path):
    """The service keeps its folds between calls: changing a returned session's state must not change the next read."""
    async def scenario() -> None:
        service = SessionTreeSessionService(open_repo(str(tmp_path / "s")))
        await service.create_session(app_name=APP, user_id=USER, session_id="s1",
                                     state={"todo": [1], "user:tags": ["a"], "app:flags": {"x": 1}})
        first = await service.get_session(app_name=APP, user_id=USER, session_id="s1")
        first.state["todo"].append(2)
        first.state["user:tags"].append("b")
        first.state["app:flags"]["y"] = 2
        (await service.get_user_state(app_name=APP, user_id=USER))["tags"].append("c")
        again = await service.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert again.state == {"todo": [1], "user:tags": ["a"], "app:flags": {"x": 1}}
        await service.close()

    asyncio.run(scenario())


def test_a_retried_event_holding_a_secret_is_written_once(tmp_path):
    """The default redactor rewrites a secret before it is stored, so the stored event differs from the one retried:
    the retry is still recognised (by the session's own retry rule, which redacts the probe as the first append)."""
    async def scenario() -> None:
        service = SessionTreeSessionService(open_repo(str(tmp_path / "s")))
        session = await service.create_session(app_name=APP, user_id=USER, session_id="s1")
        event = Event(author="user", content=kit.user("deploy with AKIAIOSFODNN7EXAMPLE"),
                      timestamp=session.last_update_time + 1)
        await service.append_event(session, event)
        again = await service.get_session(app_name=APP, user_id=USER, session_id="s1")
        await service.append_event(again, event)
        stored = await service.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert texts(stored) == ["deploy with [REDACTED:aws-access-key-id]"]

    asyncio.run(scenario())
