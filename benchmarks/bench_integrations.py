"""SessionTreeSession against the Agents SDK's own file-backed SQLiteSession, in the same run (issue 20's speed target:
ours at most 0.5x theirs).

    python benchmarks/bench_integrations.py [--turns 1000] [--rounds 200] [--json FILE]

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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000, help="turns in the conversation before measuring")
    parser.add_argument("--rounds", type=int, default=200, help="measured add_items / get_items calls per store")
    parser.add_argument("--json", type=Path, help="also write the medians here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        results = asyncio.run(measure(Path(folder), args.turns, args.rounds))
    print(table(results, args.turns))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
