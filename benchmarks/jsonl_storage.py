"""Measure the JSONL storage: appends (flush and fsync) and loading a large file.

    python benchmarks/jsonl_storage.py [--entries 100000] [--appends 2000] [--dir DIR]

Prints one line per measurement, wall-clock and CPU time (CPU time is the steadier figure
on a shared machine). The numbers in docs/file-format.md come from this script.
The large file is a linear chain of user/assistant messages of about 600 bytes each.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sessiontree import (
    AssistantMessage,
    Cost,
    JsonlSessionStorage,
    Session,
    TextContent,
    Usage,
    UserMessage,
)
from sessiontree.domain import aggregate
from sessiontree.domain.log import EntryLog
from sessiontree.wire.codec import native_codec

TEXT = "lorem ipsum dolor sit amet " * 14


def message(n: int) -> object:
    if n % 2 == 0:
        return UserMessage(content=[TextContent(text=TEXT)], timestamp=n)
    usage = Usage(input=10, output=20, total_tokens=30, cost=Cost(input=0.1, output=0.2, total=0.3))
    return AssistantMessage(
        content=[TextContent(text=TEXT)], provider="anthropic", model="claude", usage=usage, timestamp=n
    )


def appends(folder: Path, durability: str, count: int) -> tuple[float, float]:
    """Mean wall-clock and CPU seconds per ``append_message`` (one entry per append)."""
    session = Session(JsonlSessionStorage.create(folder / f"append-{durability}.jsonl", durability=durability))
    for n in range(50):  # warm up
        session.append_message(message(n))
    start, cpu = time.perf_counter(), time.process_time()
    for n in range(count):
        session.append_message(message(n))
    return (time.perf_counter() - start) / count, (time.process_time() - cpu) / count


def big_file(folder: Path, entries: int) -> Path:
    """A file of ``entries`` messages written in one go (through the codec, not the clock)."""
    path = folder / "big.jsonl"
    header = aggregate.start(session_id="0190a000-0000-7000-8000-000000000000", timestamp="2026-01-01T00:00:00.000Z")
    agg = aggregate.replay(header, aggregate.EntryLog())
    codec = native_codec()
    lines = [codec.encode_event(header)]
    for n in range(entries):
        event = aggregate.append_message(agg, message(n), id=f"{n:08x}", timestamp="2026-01-01T00:00:00.000Z")
        aggregate.project(agg, event)
        lines.append(codec.encode_event(event))
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def load(path: Path, rounds: int = 5, clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Median seconds of each step of ``Session(JsonlSessionStorage.open(path))``."""
    steps: dict[str, list[float]] = {"open": [], "read+split": [], "scan": [], "replay": [], "total": [],
                                     "decode every line instead": []}
    for _ in range(rounds):
        gc.collect()
        t0 = clock()
        storage = JsonlSessionStorage.open(path)
        t1 = clock()
        lines = storage.read_lines(strict=True)
        t2 = clock()
        entries = storage._scan(lines, storage._loader(lines))
        t3 = clock()
        aggregate.replay(storage.header, entries)
        t4 = clock()
        # What loading through eventsourcing's Repository.get amounts to: every event decoded.
        eager = EntryLog.of([storage.codec.decode_line(line, storage.session_id, v) for v, line in enumerate(lines[1:], 2)])
        aggregate.replay(storage.header, eager)
        t5 = clock()
        for key, value in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0, t5 - t4)):
            steps[key].append(value)
        storage.close()
        del lines, entries, eager
    return {key: statistics.median(values) for key, values in steps.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        for durability in ("flush", "fsync"):
            count = args.appends if durability == "flush" else max(100, args.appends // 10)
            wall, cpu = appends(folder, durability, count)
            print(f"append ({durability}): {wall * 1e6:.1f} us per entry ({cpu * 1e6:.1f} us CPU)")
        path = big_file(folder, args.entries)
        size = path.stat().st_size / 1e6
        for label, clock in (("wall", time.perf_counter), ("CPU", time.process_time)):
            steps = load(path, clock=clock)
            detail = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in steps.items())
            print(f"load {args.entries} entries ({size:.0f} MB), {label}: {detail}")


if __name__ == "__main__":
    main()
