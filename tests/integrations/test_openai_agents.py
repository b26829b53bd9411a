"""The Agents SDK's real agent loop on a sessiontree session: two turns with a tool call, a reopen and a third turn;
the log verifies, the command line shows it, pop and clear only move the leaf, pi's format carries it, and a database
call never holds up the event loop."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agents import Agent, Runner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import openai_agents_kit as kit
import sessiontree_pi as pi

from sessiontree import TextContent, open_repo, verify
from sessiontree.integrations.openai_agents import SessionTreeSession
from sessiontree.pi.pi_convert import export_pi

CLI = str(Path(sys.executable).with_name("sessiontree"))


def cli(repo: Path, *args: str) -> str:
    return subprocess.run([CLI, "--repo", str(repo), *args], capture_output=True, text=True, check=True).stdout


def weather_agent(model: kit.ScriptedModel) -> Agent:
    return Agent(name="weather", instructions="Answer briefly.", model=model, tools=[kit.get_weather])


def two_turns(repo: Path) -> tuple[kit.ScriptedModel, list[dict]]:
    """Turn 1 thinks, calls the tool and answers; turn 2 answers from the history. Returns the items stored."""
    model = kit.ScriptedModel([kit.think("Look it up.", 1), kit.call("get_weather", {"city": "Paris"}, 1)],
                              [kit.say("Sunny in Paris.", 2)], [kit.say("You asked about Paris.", 3)])
    session = SessionTreeSession("weather", repo=str(repo))
    assert asyncio.run(Runner.run(weather_agent(model), "Weather in Paris?", session=session)).final_output == "Sunny in Paris."
    assert asyncio.run(Runner.run(weather_agent(model), "What did I ask?", session=session)).final_output == "You asked about Paris."
    items = asyncio.run(session.get_items())
    session.close()
    return model, items


def test_two_turns_with_a_tool_call_then_a_reopen_and_a_third(tmp_path):
    model, items = two_turns(tmp_path)
    assert [i.get("type", i.get("role")) for i in items] == [
        "user", "reasoning", "function_call", "function_call_output", "message", "user", "message"]
    assert items[3]["output"] == "Sunny in Paris, 21 degrees"
    assert model.inputs[2] == items[:-1]  # the second turn's model call saw the whole first turn

    later = kit.ScriptedModel([kit.say("Still sunny.", 4)])
    reopened = SessionTreeSession("weather", repo=str(tmp_path))
    asyncio.run(Runner.run(weather_agent(later), "And now?", session=reopened))
    assert later.inputs[0] == [*items, {"role": "user", "content": "And now?"}]
    assert asyncio.run(reopened.get_items())[:-2] == items
    reopened.close()
    report = verify(open_repo(str(tmp_path)).store.attach("weather"))
    assert report.ok and report.entries == 9


def test_the_command_line_shows_the_session(tmp_path):
    two_turns(tmp_path)
    tree = cli(tmp_path, "show", "weather")
    for shown in ("user: Weather in Paris?", "get_weather(city=\"Paris\")", "tool_result get_weather: Sunny in Paris",
                  "assistant: You asked about Paris."):
        assert shown in tree
    context = json.loads(cli(tmp_path, "context", "weather", "--json"))
    assert [m["role"] for m in context["messages"]] == [
        "user", "assistant", "assistant", "tool_result", "assistant", "user", "assistant"]
    assert context["messages"][1]["content"] == [{"type": "thinking", "thinking": "Look it up."}]
    assert "0 error(s)" in cli(tmp_path, "verify")


def test_pop_and_clear_move_the_leaf_and_delete_nothing(tmp_path):
    """Popped and cleared items stay in the log, on branches the leaf left; a reopen finds the leaf where it was."""
    session = SessionTreeSession("undo", repo=str(tmp_path))
    asyncio.run(session.add_items([{"role": "user", "content": "first"}, {"role": "assistant", "content": "reply"}]))
    assert asyncio.run(session.pop_item()) == {"role": "assistant", "content": "reply"}
    asyncio.run(session.add_items([{"role": "assistant", "content": "better reply"}]))
    stored = session.session
    first, reply, _move, better = stored.get_entries()
    assert [c.id for c in stored.get_children(first.id)] == [reply.id, better.id]  # a branch point
    asyncio.run(session.clear_session())
    asyncio.run(session.add_items([{"role": "user", "content": "fresh start"}]))
    session.close()

    again = SessionTreeSession("undo", repo=str(tmp_path))
    assert asyncio.run(again.get_items()) == [{"role": "user", "content": "fresh start"}]
    assert [e.message.content for e in again.session.get_entries() if e.type == "message"] == [
        "first", (TextContent("reply"),), (TextContent("better reply"),), "fresh start"]
    assert [r["entry"]["id"] for r in json.loads(cli(tmp_path, "show", "undo", "--json"))["rows"]
            if not r["on_branch"]] == [first.id, reply.id, better.id]


def test_a_move_made_elsewhere_is_what_get_items_reads(tmp_path):
    """The store reads the current branch: the leaf moved by the command line (or any writer) decides."""
    two_turns(tmp_path)
    stored = open_repo(str(tmp_path)).open("weather")
    second_question = [e for e in stored.get_entries() if e.type == "message"][5]
    stored.close()
    cli(tmp_path, "move", second_question.parent_id)
    cli(tmp_path, "label", second_question.parent_id, "before the second question")
    assert [i.get("type", i.get("role")) for i in asyncio.run(SessionTreeSession("weather", str(tmp_path)).get_items())] == [
        "user", "reasoning", "function_call", "function_call_output", "message"]


def test_it_exports_to_pi_and_reads_back(tmp_path):
    """The session in pi's format, read by this store from there, gives the same items."""
    _, items = two_turns(tmp_path / "ours")
    (tmp_path / "pi").mkdir()
    export_pi(tmp_path / "ours" / "weather.jsonl", tmp_path / "pi" / "weather.jsonl")
    assert json.loads((tmp_path / "pi" / "weather.jsonl").read_text().splitlines()[2])["parentId"] is not None
    assert asyncio.run(SessionTreeSession("weather", str(tmp_path / "pi")).get_items()) == items


@pytest.mark.pi
def test_pi_opens_the_export(tmp_path):
    """pi 1.6.0 reads the export: every entry, the branch, and the context in order."""
    two_turns(tmp_path)
    export_pi(tmp_path / "weather.jsonl", tmp_path / "pi.jsonl")
    seen = pi.peer("expected", tmp_path / "pi.jsonl", build="latest")
    assert (seen["entries"], seen["pathLength"], seen["leafType"]) == (7, 7, "message")
    assert [m["role"] for m in seen["contextMessages"]] == [
        "user", "assistant", "assistant", "toolResult", "assistant", "user", "assistant"]
    assert seen["contextMessages"][2]["content"][0] == {
        "type": "toolCall", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"},
        "openai_agents": {"arguments": "json.dumps"}}


def test_a_database_write_waits_in_a_worker_thread_not_on_the_event_loop(tmp_path):
    """While another connection holds SQLite's write lock, add_items waits for it and the loop keeps running."""
    path = tmp_path / "sessions.db"
    session = SessionTreeSession("busy", repo=f"sqlite:{path}")
    asyncio.run(session.add_items([{"role": "user", "content": "first"}]))

    async def race() -> list[str]:
        events: list[str] = []
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")

        async def write() -> None:
            await session.add_items([{"role": "user", "content": "second"}])
            events.append("written")

        task = asyncio.create_task(write())
        started = time.monotonic()
        while time.monotonic() - started < 0.3:
            await asyncio.sleep(0.01)  # the loop turns while the write waits
        events.append("loop ran")
        blocker.execute("COMMIT")
        blocker.close()
        await task
        return events

    assert asyncio.run(race()) == ["loop ran", "written"]
    assert [i["content"] for i in asyncio.run(session.get_items())] == ["first", "second"]
    session.close()


def test_two_stores_on_one_database_session_interleave_their_items(tmp_path):
    """Two stores on one database session, as two SQLiteSession objects on one id: each call reads on to the log's
    leaf, so both see one history with every item in the order written."""
    url = f"sqlite:{tmp_path / 'sessions.db'}"
    one, two = SessionTreeSession("shared", url), SessionTreeSession("shared", url)
    asyncio.run(one.add_items([{"role": "user", "content": "from one"}]))
    asyncio.run(two.add_items([{"role": "user", "content": "from two"}]))
    asyncio.run(one.add_items([{"role": "user", "content": "one again"}]))
    expected = ["from one", "from two", "one again"]
    assert [i["content"] for i in asyncio.run(two.get_items())] == expected
    assert [i["content"] for i in asyncio.run(one.get_items())] == expected
    assert asyncio.run(two.pop_item())["content"] == "one again"
    assert [i["content"] for i in asyncio.run(one.get_items())] == expected[:2]
    one.close()
    two.close()
    assert [i["content"] for i in asyncio.run(SessionTreeSession("shared", url).get_items())] == expected[:2]


def test_the_benchmark_prints_its_table(tmp_path):
    """benchmarks/bench_integrations.py runs end to end (timings not checked) and writes its medians."""
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_integrations.py"
    out = subprocess.run([sys.executable, str(script), "--only", "openai-agents", "--turns", "20", "--rounds", "3",
                          "--json", str(tmp_path / "b.json")], capture_output=True, text=True, timeout=300, check=True).stdout
    for row in ("| add_items, one 4-item turn |", "| get_items(), 20 turns |", "| new object + first get_items(), 20 turns |"):
        assert any(line.startswith(row) for line in out.splitlines()), row
    assert set(json.loads((tmp_path / "b.json").read_text())["openai-agents"]) == {
        "SQLiteSession (SDK, file)", "SessionTreeSession, JSONL", "SessionTreeSession, SQLite"}


class ResponsesRulesModel(kit.ScriptedModel):
    """A scripted model that refuses an input the Responses API refuses: a function call without exactly one output
    after it, an output without its call, or a call id used twice."""

    async def get_response(self, system_instructions, input, *args, **kwargs):
        calls: list[str] = []
        outputs: dict[str, int] = {}
        for item in input if isinstance(input, list) else []:
            if item.get("type") == "function_call":
                if item["call_id"] in calls:
                    raise ValueError(f"duplicate call id {item['call_id']}")
                calls.append(item["call_id"])
            elif item.get("type") == "function_call_output":
                if item["call_id"] not in calls:
                    raise ValueError(f"No tool call found for function call output with call_id {item['call_id']}")
                outputs[item["call_id"]] = outputs.get(item["call_id"], 0) + 1
        for call_id in calls:
            if outputs.get(call_id) != 1:
                raise ValueError(f"No tool output found for function call {call_id}")
        return await super().get_response(system_instructions, input, *args, **kwargs)


def test_a_run_interrupted_mid_tool_call_loads_as_a_history_the_next_run_accepts(tmp_path):
    """The items of a run that stopped after its function call (no output recorded) and an orphan output: the next
    run's model call gets an error output for the call and no orphan; the log keeps what was added."""
    session = SessionTreeSession("cut", repo=str(tmp_path))
    interrupted = [{"role": "user", "content": "Weather in Paris?"}, kit.think("Look it up.", 1).model_dump(exclude_unset=True),
                   kit.call("get_weather", {"city": "Paris"}, 1).model_dump(exclude_unset=True),
                   kit.call("get_weather", {"city": "Rome"}, 2).model_dump(exclude_unset=True),
                   {"type": "function_call_output", "call_id": "call_2", "output": "Rainy"},
                   {"type": "function_call_output", "call_id": "call_9", "output": "stray"}]
    asyncio.run(session.add_items(interrupted))
    session.close()
    model = ResponsesRulesModel([kit.say("Rainy in Rome; Paris unknown.", 3)])
    again = SessionTreeSession("cut", repo=str(tmp_path))
    result = asyncio.run(Runner.run(weather_agent(model), "And?", session=again))
    assert result.final_output == "Rainy in Rome; Paris unknown."
    sent = model.inputs[0]
    assert [(i.get("type"), i.get("call_id")) for i in sent[2:6]] == [
        ("function_call", "call_1"), ("function_call", "call_2"), ("function_call_output", "call_2"),
        ("function_call_output", "call_1")]
    assert sent[5]["output"] == "No result was recorded for this tool call (interrupted)."
    for stored, refused in ((interrupted[:5], "call_1"), (interrupted, "call_9")):  # as stored, the API refuses it
        with pytest.raises(ValueError, match=refused):
            asyncio.run(ResponsesRulesModel().get_response(None, [*stored, {"role": "user", "content": "And?"}]))
    raw = SessionTreeSession("cut", repo=str(tmp_path), repair=False)
    assert asyncio.run(raw.get_items())[: len(interrupted)] == interrupted
    assert [p.kind for p in again.session.check_context(leaf_id=again.session.get_branch()[5].id)] == [
        "missing_result", "orphan_result"]
    raw.close()
    again.close()
