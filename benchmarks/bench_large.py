"""The large compacted session of issue 19: ``python benchmarks/bench_large.py [--data DIR] [--repeat 3]``.

Writes (once, kept in ``--data``) a pi session file of ~630 MB: 600 old turns whose tool outputs are 1 MiB each,
then a compaction that keeps the last 10 turns, then 5 more turns, so the context is 61 messages. Then, in fresh
processes and interleaved, opens it and builds the context: ours with no sidecar index yet (*cold*: it is removed
first), ours with the index the cold run wrote (*indexed*), and pi 1.6.0 (``pi_driver.mjs open``) when installed.
Prints wall time and peak RSS (``VmHWM``) per side, the medians of ``--repeat`` runs, and the ratios against pi.
Targets (issue 19): peak RSS <= 150 MiB and time <= pi's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import child, pi_child  # the runners of benchmarks/run.py

OLD_TURNS, KEPT_TURNS, NEW_TURNS, OUTPUT = 600, 10, 5, 1 << 20


def write_file(path: Path) -> None:
    """The session, written through the library in pi's dialect (what pi itself reads)."""
    from sessiontree import AssistantMessage, JsonlSessionStorage, Session, TextContent, ToolCall, ToolResultMessage, UserMessage
    from sessiontree.pi.pi import pi_codec

    session = Session(JsonlSessionStorage.create(path, cwd="/work/project", codec=pi_codec()))
    big, small = "x" * OUTPUT, "ok " * 100

    def turn(number: int, output: str) -> str:
        first = session.append_message(UserMessage(content=[TextContent(text=f"step {number}: read the log")], timestamp=number))
        call = ToolCall(id=f"call_{number}", name="bash", arguments={"command": f"cat log{number}.txt"})
        session.append_message(AssistantMessage(content=[call], provider="anthropic", model="claude-sonnet-4-5",
                                                stop_reason="toolUse", timestamp=number))
        session.append_message(ToolResultMessage(tool_call_id=f"call_{number}", tool_name="bash",
                                                 content=[TextContent(text=output)], is_error=False, timestamp=number))
        session.append_message(AssistantMessage(content=[TextContent(text=f"read log {number}")], provider="anthropic",
                                                model="claude-sonnet-4-5", stop_reason="stop", timestamp=number))
        return first

    for number in range(OLD_TURNS):
        turn(number, big)
    kept = [turn(OLD_TURNS + n, small) for n in range(KEPT_TURNS)]
    session.append_compaction("The user read 600 logs.", kept[0], 150_000)
    for n in range(NEW_TURNS):
        turn(OLD_TURNS + KEPT_TURNS + n, small)
    session.storage.close()


def remove_index(path: Path) -> None:
    from sessiontree.storage import jsonl_index

    jsonl_index.remove(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="keep the file here and reuse it (default: a temporary folder)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-pi", action="store_true")
    args = parser.parse_args(argv)
    folder = args.data or Path(tempfile.mkdtemp(prefix="sessiontree-large-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "large-pi.jsonl"
    if not path.exists():
        write_file(path)
    pi_home = Path(os.environ.get("SESSIONTREE_PI_PEER", os.path.join(os.environ.get("TMPDIR", "/tmp"), "sessiontree-pi-peer")))
    use_pi = not args.no_pi and (pi_home / "latest").is_dir()
    runs: dict[str, list[dict[str, Any]]] = {"cold": [], "indexed": [], "pi": []}
    for _ in range(args.repeat):
        remove_index(path)
        runs["cold"].append(child("open_context", file=str(path)))
        runs["indexed"].append(child("open_context", file=str(path)))
        if use_pi:
            runs["pi"].append(pi_child(pi_home, "open", path))
    print(f"{path.stat().st_size / 1e6:.0f} MB, {runs['cold'][0]['entries']} entries, "
          f"{runs['cold'][0]['messages']} context messages; median of {args.repeat} fresh processes each\n")
    print(table(runs))
    return 0


def table(runs: dict[str, list[dict[str, Any]]]) -> str:
    def median(side: str, key: str) -> float | None:
        values = [run[key] for run in runs[side] if key in run]
        return statistics.median(values) if values else None

    pi_ms, pi_rss = median("pi", "total_ms") or median("pi", "ms"), median("pi", "maxrss")
    rows = ["| side | open+context ms | x pi | peak RSS MiB | x pi | target |", "|---|---:|---:|---:|---:|---|"]
    for side in ("cold", "indexed", "pi"):
        wall, rss = median(side, "total_ms") or median(side, "ms"), median(side, "maxrss")
        if wall is None or rss is None:
            continue
        ratio = f"{wall / pi_ms:.2f}x" if pi_ms and side != "pi" else "-"
        rss_ratio = f"{rss / pi_rss:.2f}x" if pi_rss and side != "pi" else "-"
        verdict = "-" if side == "pi" else ("ok" if rss <= 150 * 2**20 and (not pi_ms or wall <= pi_ms) else "MISSED")
        rows.append(f"| {side} | {wall:,.0f} | {ratio} | {rss / 2**20:,.0f} | {rss_ratio} | {verdict} (<= 150 MiB, <= pi) |")
    return "\n".join(rows)


if __name__ == "__main__":
    raise SystemExit(main())
