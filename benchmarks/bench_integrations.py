"""The framework stores against the frameworks' own, in the same run.

    python benchmarks/bench_integrations.py [--only openai-agents|adk|claude-agent] [--turns 1000] [--rounds 200]
                                            [--json FILE]

**OpenAI Agents SDK**: SessionTreeSession against the SDK's own file-backed SQLiteSession (issue 20's speed target:
ours at most 0.5x theirs).

Every store first holds ``--turns`` turns of 4 items (a user message, a function call, its output, the reply). Then,
alternating stores so drift hits all alike: a cold read, a new store object's first ``get_items()`` (which opens the
file and, for ours, replays the log; 5 times); ``get_items()`` of the whole conversation on the live store; and
``add_items`` of one more 4-item turn (``--rounds`` times each). The reads come first, on exactly ``--turns`` turns.
Medians in ms; ratio = ours (JSONL) / theirs. sessiontree's SQLite repository is measured too (not part of the target:
its appends are one transaction per item).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.memory import SQLiteSession

from sessiontree.integrations.openai_agents import SessionTreeSession

COLD_ROUNDS = 5
FRAMEWORK_ROUNDS = 30  # appends and reads measured per store for ADK and the Claude Agent SDK (each reads a whole log)


def turn(n: int) -> list[dict[str, Any]]:
    """One turn as the SDK stores it: a question, a tool call and its output, the answer."""
    return [
        {"role": "user", "content": f"What is the weather in city {n}?"},
        {"arguments": json.dumps({"city": f"city {n}"}), "call_id": f"call_{n}", "name": "get_weather",
         "type": "function_call", "id": f"fc_{n}", "status": "completed"},
        {"call_id": f"call_{n}", "output": f"Sunny, {n % 30} degrees", "type": "function_call_output"},
        {"id": f"msg_{n}", "content": [{"annotations": [], "text": f"It is sunny in city {n}, {n % 30} degrees.",
                                        "type": "output_text"}], "role": "assistant", "status": "completed", "type": "message"},
    ]


def stores(folder: Path) -> dict[str, Callable[[], Any]]:
    """Each store by name: a function making a new object on the same file."""
    return {
        "SQLiteSession (SDK, file)": lambda: SQLiteSession("bench", folder / "sdk.db"),
        "SessionTreeSession, JSONL": lambda: SessionTreeSession("bench", str(folder / "jsonl"), cwd=""),
        "SessionTreeSession, SQLite": lambda: SessionTreeSession("bench", f"sqlite:{folder / 'st.db'}", cwd=""),
    }


async def timed(coroutine: Any) -> float:
    started = time.perf_counter()
    await coroutine
    return (time.perf_counter() - started) * 1000


async def measure(folder: Path, turns: int, rounds: int) -> dict[str, dict[str, float]]:
    makers = stores(folder)
    live = {name: make() for name, make in makers.items()}
    for store in live.values():
        for n in range(turns):
            await store.add_items(turn(n))
    samples: dict[str, dict[str, list[float]]] = {name: {"add": [], "get": [], "cold": []} for name in live}
    for _ in range(COLD_ROUNDS):
        for name, make in makers.items():
            fresh = make()
            samples[name]["cold"].append(await timed(fresh.get_items()))
            fresh.close()
    for _ in range(rounds):
        for name, store in live.items():
            samples[name]["get"].append(await timed(store.get_items()))
    for n in range(rounds):
        for name, store in live.items():
            samples[name]["add"].append(await timed(store.add_items(turn(turns + n))))
    for store in live.values():
        store.close()
    return {name: {what: statistics.median(times) for what, times in by.items()} for name, by in samples.items()}


def table(results: dict[str, dict[str, float]], turns: int) -> str:
    theirs, ours = results["SQLiteSession (SDK, file)"], results["SessionTreeSession, JSONL"]
    rows = [("add_items, one 4-item turn", "add"), (f"get_items(), {turns:,} turns", "get"),
            (f"new object + first get_items(), {turns:,} turns", "cold")]
    names = list(results)
    lines = ["| measure (median ms) | " + " | ".join(names) + " | ratio JSONL/SDK | target |",
             "|---|" + "---|" * (len(names) + 2)]
    for label, key in rows:
        ratio = ours[key] / theirs[key]
        target = ("met" if ratio <= 0.5 else "MISSED") if key != "cold" else "(not a target)"
        cells = " | ".join(f"{results[name][key]:.3f}" for name in names)
        lines.append(f"| {label} | {cells} | {ratio:.2f}x | {target} |")
    return "\n".join(lines)


# -- Google ADK: append_event and get_session on 1,000 events, against ADK's DatabaseSessionService on SQLite ----------


def adk_events(n: int, invocation: str) -> list[Any]:
    """One ADK turn as a Runner records it: the question, a function call, its response, the answer (with a state delta)."""
    from google.adk.events import Event, EventActions
    from google.genai import types

    call_id = f"adk-call-{n}"
    return [
        Event(invocation_id=invocation, author="user",
              content=types.Content(role="user", parts=[types.Part(text=f"What is the weather in city {n}?")])),
        Event(invocation_id=invocation, author="weather", content=types.Content(role="model", parts=[types.Part(
            function_call=types.FunctionCall(id=call_id, name="get_weather", args={"city": f"city {n}"}))])),
        Event(invocation_id=invocation, author="weather", content=types.Content(role="user", parts=[types.Part(
            function_response=types.FunctionResponse(id=call_id, name="get_weather", response={"weather": "sunny"}))])),
        Event(invocation_id=invocation, author="weather", actions=EventActions(state_delta={"last_city": f"city {n}"}),
              content=types.Content(role="model", parts=[types.Part(text=f"It is sunny in city {n}.")])),
    ]


async def measure_adk(folder: Path, events: int, rounds: int) -> dict[str, dict[str, float]]:
    from google.adk.sessions import DatabaseSessionService

    from sessiontree import open_repo
    from sessiontree.integrations.adk import SessionTreeSessionService

    services = {
        "DatabaseSessionService (ADK, SQLite)": DatabaseSessionService(f"sqlite+aiosqlite:///{folder / 'adk.db'}"),
        "SessionTreeSessionService, JSONL": SessionTreeSessionService(open_repo(str(folder / "adk-jsonl"))),
        "SessionTreeSessionService, SQLite": SessionTreeSessionService(open_repo(f"sqlite:///{folder / 'adk-st.db'}")),
    }
    sessions = {}
    for name, service in services.items():
        session = await service.create_session(app_name="bench", user_id="u", session_id="s", state={"units": "metric"})
        for n in range(events // 4):
            for event in adk_events(n, f"inv-{n}"):
                await service.append_event(session, event)
        sessions[name] = session
    samples: dict[str, dict[str, list[float]]] = {name: {"append": [], "get": []} for name in services}
    for _ in range(rounds):
        for name, service in services.items():
            samples[name]["get"].append(await timed(service.get_session(app_name="bench", user_id="u", session_id="s")))
    for n in range(rounds):
        for name, service in services.items():
            event = adk_events(events + n, f"inv-more-{n}")[n % 4]
            samples[name]["append"].append(await timed(service.append_event(sessions[name], event)))
    for service in services.values():
        await service.close()  # type: ignore[attr-defined]
    return {name: {what: statistics.median(times) for what, times in by.items()} for name, by in samples.items()}


# -- Claude Agent SDK: append of a 100-entry batch, load of 5,000 entries, against the SDK's InMemorySessionStore ------


def transcript_lines(start: int, count: int) -> list[dict[str, Any]]:
    """Claude Code transcript lines: user questions, assistant tool calls, tool results and answers, chained by uuid."""
    lines: list[dict[str, Any]] = []
    for n in range(start, start + count):
        base = {"parentUuid": f"u-{n - 1}" if n else None, "isSidechain": False, "userType": "external",
                "cwd": "/home/ada/weather", "sessionId": "s", "version": "2.1.3", "gitBranch": "main", "uuid": f"u-{n}",
                "timestamp": "2026-01-02T10:00:00.000Z"}
        kind = n % 4
        if kind == 0:
            lines.append({**base, "type": "user", "message": {"role": "user", "content": f"Weather in city {n}?"}})
        elif kind == 1:
            lines.append({**base, "type": "assistant", "message": {
                "id": f"msg_{n}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "get_weather", "input": {"city": f"city {n}"}}],
                "stop_reason": "tool_use", "usage": {"input_tokens": 12, "output_tokens": 30}}})
        elif kind == 2:
            lines.append({**base, "type": "user", "message": {"role": "user", "content": [
                {"tool_use_id": f"toolu_{n - 1}", "type": "tool_result", "content": "Sunny"}]}})
        else:
            lines.append({**base, "type": "assistant", "message": {
                "id": f"msg_{n}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": f"It is sunny in city {n}."}], "stop_reason": "end_turn"}})
    return lines


async def measure_claude(folder: Path, entries: int, rounds: int) -> dict[str, dict[str, float]]:
    from claude_agent_sdk import InMemorySessionStore

    from sessiontree import open_repo
    from sessiontree.integrations.claude_agent import SessionTreeSessionStore

    stores = {
        "InMemorySessionStore (SDK, the floor)": InMemorySessionStore(),
        "SessionTreeSessionStore, JSONL": SessionTreeSessionStore(open_repo(str(folder / "cc-jsonl"))),
        "SessionTreeSessionStore, SQLite": SessionTreeSessionStore(open_repo(f"sqlite:///{folder / 'cc.db'}")),
    }
    samples: dict[str, dict[str, list[float]]] = {name: {"append": [], "load": []} for name in stores}
    full = {"project_key": "bench", "session_id": "full"}
    for store in stores.values():
        for start in range(0, entries, 100):
            await store.append(full, transcript_lines(start, 100))  # type: ignore[arg-type]
    for _ in range(rounds):
        for name, store in stores.items():
            samples[name]["load"].append(await timed(store.load(full)))  # type: ignore[arg-type]
    for n in range(rounds):
        for name, store in stores.items():
            key = {"project_key": "bench", "session_id": f"batch-{n}"}
            samples[name]["append"].append(await timed(store.append(key, transcript_lines(0, 100))))  # type: ignore[arg-type]
    return {name: {what: statistics.median(times) for what, times in by.items()} for name, by in samples.items()}


def framework_table(results: dict[str, dict[str, float]], rows: list[tuple[str, str]]) -> str:
    names = list(results)
    theirs = results[names[0]]
    lines = ["| measure (median ms) | " + " | ".join(names) + " | ratio JSONL/theirs | ratio SQLite/theirs |",
             "|---|" + "---|" * (len(names) + 2)]
    for label, key in rows:
        cells = " | ".join(f"{results[name][key]:.3f}" for name in names)
        ratios = " | ".join(f"{results[name][key] / theirs[key]:.2f}x" for name in names[1:])
        lines.append(f"| {label} | {cells} | {ratios} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("openai-agents", "adk", "claude-agent"), help="measure one framework")
    parser.add_argument("--turns", type=int, default=1000, help="OpenAI Agents: turns in the conversation before measuring")
    parser.add_argument("--rounds", type=int, default=200, help="OpenAI Agents: measured add_items / get_items calls per store")
    parser.add_argument("--adk-events", type=int, default=1000, help="ADK: events in the session before measuring")
    parser.add_argument("--claude-entries", type=int, default=5000, help="Claude Agent SDK: entries in the loaded session")
    parser.add_argument("--framework-rounds", type=int, default=FRAMEWORK_ROUNDS,
                        help="ADK and Claude Agent SDK: measured calls per store")
    parser.add_argument("--json", type=Path, help="also write the medians here")
    args = parser.parse_args(argv)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        if args.only in (None, "openai-agents"):
            out["openai-agents"] = results = asyncio.run(measure(Path(folder), args.turns, args.rounds))
            print(table(results, args.turns))
        if args.only in (None, "adk"):
            out["adk"] = results = asyncio.run(measure_adk(Path(folder), args.adk_events, args.framework_rounds))
            print(framework_table(results, [("append_event, one event", "append"),
                                            (f"get_session, {args.adk_events:,} events", "get")]))
        if args.only in (None, "claude-agent"):
            out["claude-agent"] = results = asyncio.run(measure_claude(Path(folder), args.claude_entries,
                                                                       args.framework_rounds))
            print(framework_table(results, [("append, a 100-entry batch", "append"),
                                            (f"load, {args.claude_entries:,} entries", "load")]))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
