"""Writers that share a session (issue 31): the cost of taking the file's lock for each append, and throughput when
several processes append to one JSONL session.

    python benchmarks/bench_writers.py [--against REV] [--appends 500] [--rounds 5] [--seconds 2] [--writers 4]

1. Append p50/p99 through the storage path (``Session.append_message`` on a JSONL file, flush durability), this tree
   against ``--against`` (default ``main``: the git revision's tree, extracted to a temporary folder), each
   measurement in a fresh process, the two alternating round by round (drift hits both alike); medians shown.
2. One process appending for ``--seconds``, then ``--writers`` processes appending to one session at once, alternating,
   ``--rounds`` times: appends per second, the ratio to one process (issue 31: at least 0.5), and each writer's share
   (min/max of the mean share, and Jain's fairness index: 1.0 is perfectly even, 1/writers is one writer taking all).
   Only this tree: with the lock kept from the first append until close, a second process was refused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MADE: list[Path] = []  # temporary folders, removed at the end


def temporary(prefix: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    MADE.append(folder)
    return folder

APPEND = r"""
import json, sys, tempfile, time
from pathlib import Path
from sessiontree import AssistantMessage, JsonlSessionStorage, Session, TextContent, Usage, UserMessage
count, warmup = int(sys.argv[1]), int(sys.argv[2])
folder = Path(tempfile.mkdtemp())
session = Session(JsonlSessionStorage.create(folder / "s.jsonl"))
import atexit, shutil
atexit.register(shutil.rmtree, folder, True)
def message(n):
    if n % 2:
        return AssistantMessage(content=[TextContent(text=f"answer {n} " + "x" * 400)], provider="p", model="m",
                                usage=Usage(input=100, output=50, total_tokens=150))
    return UserMessage(content=f"question {n} " + "y" * 120)
for n in range(warmup):
    session.append_message(message(n))
session.build_context()
samples = []
for n in range(count):
    m = message(n)
    t0 = time.perf_counter_ns()
    session.append_message(m)
    samples.append(time.perf_counter_ns() - t0)
samples.sort()
print(json.dumps({"p50_us": samples[len(samples) // 2] / 1000, "p99_us": samples[int(len(samples) * 0.99)] / 1000}))
"""

WRITER = r"""
import json, sys, time
from sessiontree import JsonlSessionStorage, Session, UserMessage
path, start_at, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
session = Session(JsonlSessionStorage.open(path))
session.append_message(UserMessage(content="warm"))  # the first append pays for imports and encoders
while time.time() < start_at:
    time.sleep(0.001)
done, stop = 0, start_at + seconds
while time.time() < stop:
    session.append_message(UserMessage(content=f"entry {done} " + "z" * 200))
    done += 1
print(json.dumps({"appends": done}))
"""


# pyproject's package-dir: the rest is application/
SUBPACKAGES = ("domain", "projections", "wire", "storage", "pi", "audit", "content", "search", "retention", "cli", "web")


def shim(tree: Path) -> Path:
    """A folder where ``import sessiontree`` finds the package laid out in ``tree`` (pyproject.toml's package-dir)."""
    folder = temporary("bench-writers-")
    package = folder / "sessiontree"
    package.mkdir()
    for item in (tree / "application").iterdir():
        (package / item.name).symlink_to(item)
    for name in SUBPACKAGES:
        (package / name).symlink_to(tree / name)
    return folder


def extract(rev: str) -> Path:
    """The tree of git revision ``rev``, extracted to a temporary folder."""
    folder = temporary("bench-writers-rev-")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    tar = folder / "tree.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as opened:
        members = [m for m in opened.getmembers() if not (m.issym() and m.linkname.startswith("/"))]  # a stray link
        opened.extractall(folder / "tree", members=members, filter="data")
    tar.unlink()
    return folder / "tree"


def python(code: str, path: Path, *args: Any) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(path)}
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def session_file(path: Path) -> Path:
    folder = temporary("bench-writers-file-")
    code = ("import sys\nfrom sessiontree import JsonlSessionStorage\n"
            "JsonlSessionStorage.create(sys.argv[1]).close()\n")
    env = {**os.environ, "PYTHONPATH": str(path)}
    subprocess.run([sys.executable, "-c", code, str(folder / "s.jsonl")], check=True, env=env)
    return folder / "s.jsonl"


def writers(path: Path, count: int, seconds: float) -> list[int]:
    """``count`` processes appending to one new session for ``seconds``, started together: each one's appends."""
    file = session_file(path)
    start_at = time.time() + 1.5  # after every process has imported and warmed up
    env = {**os.environ, "PYTHONPATH": str(path)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(file), str(start_at), str(seconds)],
                              stdout=subprocess.PIPE, text=True, env=env) for _ in range(count)]
    done = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        if proc.returncode:
            raise SystemExit(f"a writer failed (exit {proc.returncode})")
        done.append(json.loads(out)["appends"])
    return done


def jain(shares: list[float]) -> float:
    return sum(shares) ** 2 / (len(shares) * sum(s * s for s in shares)) if any(shares) else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="main", help="git revision to compare the append with (default main)")
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--json", type=Path, help="also write the medians here")
    args = parser.parse_args(argv)

    ours, theirs = shim(ROOT), shim(extract(args.against))
    runs: dict[str, list[float]] = {"ours_p50": [], "ours_p99": [], "theirs_p50": [], "theirs_p99": []}
    for _ in range(args.rounds):
        for name, path in (("ours", ours), ("theirs", theirs)):
            got = python(APPEND, path, args.appends, 20)
            runs[f"{name}_p50"].append(got["p50_us"])
            runs[f"{name}_p99"].append(got["p99_us"])
    med = {key: statistics.median(values) for key, values in runs.items()}
    print(f"append through the storage path (JSONL, flush; {args.appends} appends, median of {args.rounds} runs)\n")
    print("| | p50 µs | p99 µs |")
    print("|---|---:|---:|")
    print(f"| this tree (lock per append) | {med['ours_p50']:.1f} | {med['ours_p99']:.1f} |")
    print(f"| {args.against} | {med['theirs_p50']:.1f} | {med['theirs_p99']:.1f} |")
    print(f"| ratio | {med['ours_p50'] / med['theirs_p50']:.2f}x | {med['ours_p99'] / med['theirs_p99']:.2f}x |\n")

    single: list[float] = []
    multi: list[float] = []
    shares: list[list[float]] = []
    for _ in range(args.rounds):
        single.append(writers(ours, 1, args.seconds)[0] / args.seconds)
        done = writers(ours, args.writers, args.seconds)
        multi.append(sum(done) / args.seconds)
        shares.append([d / sum(done) for d in done])
    one, many = statistics.median(single), statistics.median(multi)
    mean_shares = [statistics.mean(s[i] for s in shares) for i in range(args.writers)]
    fairness = statistics.median(jain(s) for s in shares)
    print(f"processes appending to one JSONL session ({args.seconds:g} s each, median of {args.rounds} rounds)\n")
    print("| writers | appends/s | vs 1 process | per-writer share (min-max) | Jain fairness |")
    print("|---:|---:|---:|---|---:|")
    print(f"| 1 | {one:,.0f} | 1.00x | - | - |")
    print(f"| {args.writers} | {many:,.0f} | {many / one:.2f}x | {min(mean_shares):.1%}-{max(mean_shares):.1%} "
          f"| {fairness:.3f} |")
    if args.json:
        args.json.write_text(json.dumps({**med, "single_per_s": one, "multi_per_s": many, "ratio": many / one,
                                         "shares": mean_shares, "jain": fairness}, indent=1))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    finally:
        for made in MADE:
            shutil.rmtree(made, ignore_errors=True)
