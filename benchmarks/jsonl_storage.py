"""Measure the JSONL storage: appends (flush and fsync) and loading a large file.

    python benchmarks/jsonl_storage.py [--entries 100000] [--appends 2000] [--dir DIR]

Prints one line per measurement. The numbers in docs/file-format.md come from this script.
The large file is a linear chain of user/assistant messages of about 600 bytes each.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
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
from sessiontree.adapters.codec import native_codec
from sessiontree.adapters.jsonl_scan import scan_entries
from sessiontree.domain.aggregate import SessionAggregate

TEXT = "lorem ipsum dolor sit amet " * 14


def message(n: int) -> object:
    if n % 2 == 0:
        return UserMessage(content=[TextContent(text=TEXT)], timestamp=n)
    usage = Usage(input=10, output=20, total_tokens=30, cost=Cost(input=0.1, output=0.2, total=0.3))
    return AssistantMessage(
        content=[TextContent(text=TEXT)], provider="anthropic", model="claude", usage=usage, timestamp=n
    )


def appends(folder: Path, durability: str, count: int) -> float:
    """Mean seconds per ``append_message`` (one entry per append)."""
    session = Session(JsonlSessionStorage.create(folder / f"append-{durability}.jsonl", durability=durability))
    for n in range(50):  # warm up
        session.append_message(message(n))
    start = time.perf_counter()
    for n in range(count):
        session.append_message(message(n))
    return (time.perf_counter() - start) / count


def big_file(folder: Path, entries: int) -> Path:
    """A file of ``entries`` messages written in one go (through the codec, not the clock)."""
    path = folder / "big.jsonl"
    agg = SessionAggregate.create(session_id="0190a000-0000-7000-8000-000000000000", timestamp="2026-01-01T00:00:00.000Z")
    codec = native_codec()
    for n in range(entries):
        agg.append_message(message(n), id=f"{n:08x}", timestamp="2026-01-01T00:00:00.000Z")
    path.write_bytes(b"".join(codec.encode_event(e) + b"\n" for e in agg.collect_events()))
    return path


def load(path: Path, rounds: int = 5) -> dict[str, float]:
    """Median seconds of each step of ``Session(JsonlSessionStorage.open(path))``."""
    steps: dict[str, list[float]] = {"open": [], "read+split": [], "scan": [], "replay": [], "total": []}
    for _ in range(rounds):
        gc.collect()
        t0 = time.perf_counter()
        storage = JsonlSessionStorage.open(path)
        t1 = time.perf_counter()
        lines, _ = storage._read_lines()
        t2 = time.perf_counter()
        entries = scan_entries(lines, storage._context())
        t3 = time.perf_counter()
        SessionAggregate.replay(storage.header, entries)
        t4 = time.perf_counter()
        for key, value in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
            steps[key].append(value)
        storage.close()
        del lines, entries
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
            print(f"append ({durability}): {appends(folder, durability, count) * 1e6:.1f} us per entry")
        path = big_file(folder, args.entries)
        size = path.stat().st_size / 1e6
        steps = load(path)
        detail = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in steps.items())
        print(f"load {args.entries} entries ({size:.0f} MB): {detail}")


if __name__ == "__main__":
    main()
