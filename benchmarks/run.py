"""The performance benchmarks of issue 7: one command, one table.

    python benchmarks/run.py [--sizes 1000,10000,100000] [--quick] [--repeat 3] [--no-pi]
                             [--data DIR] [--list-sessions 10000] [--json FILE]
    python benchmarks/run.py --from-json FILE      (the table of a saved run)

For every size N it measures open+context (native and pi files), the context after an
append, appends (p50/p99, flush and fsync), time travel and peak RSS, each in a fresh
process, the median of ``--repeat`` runs (interleaved, so drift hits every column alike),
next to same-run baselines: the raw floors (parse every line; serialise+write;
write+fsync) and pi 1.6.0 through the peer harness when node is present
(scripts/install-pi-peer.sh; ``$SESSIONTREE_PI_PEER``). ``list()`` of many sessions comes
from ``benchmarks/bench_list.py``; appending 100k messages through the public API, as an app
builds them, is measured once per run (not with ``--quick``). What each row means: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_data
import bench_report

# Timed appends (flush, fsync), rounds of append + context (ours, pi's: pi rebuilds its
# context each time, about 0.2 s at 100k), untimed appends first.
APPENDS, FSYNC_APPENDS, CTX_ITERS, PI_CTX_ITERS, WARMUP = 500, 100, 50, 20, 5
PI_FILE_CTX_ITERS = 10  # ours on a pi file: few rounds, in case each one rebuilds


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measured(argv: list[str]) -> dict[str, Any]:
    """Run one measuring process and return the JSON it prints."""
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def child(measure: str, **args: Any) -> dict[str, Any]:
    """Run one measurement of ``bench_child.py`` in a fresh Python process."""
    return measured([sys.executable, str(HERE / "bench_child.py"), measure, json.dumps(args, default=str)])


def pi_child(home: Path, command: str, file: Path, *extra: Any) -> dict[str, Any]:
    """Run one measurement of ``pi_driver.mjs`` in a fresh node process."""
    return measured(["node", str(HERE / "pi_driver.mjs"), str(home), command, str(file), *map(str, extra)])


def pi_append(home: Path, file: Path, count: int, ctx_iters: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="sessiontree-bench-pi-"))
    try:
        copy = folder / file.name
        shutil.copyfile(file, copy)
        return pi_child(home, "append", copy, count, ctx_iters, WARMUP)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


API_APPENDS = 100_000  # the public-API append row: 100k alternating user and assistant messages


def measure_api_append(repeat: int, pi_home: Path | None) -> dict[str, Any]:
    """Appending through the public API as an app does, ours and pi's, interleaved."""
    runs: dict[str, list[float]] = {"ours_us": [], "ours_unredacted_us": [], "pi_us": []}
    for r in range(repeat):
        started = time.perf_counter()
        runs["ours_us"].append(child("api_append", count=API_APPENDS)["mean_us"])
        runs["ours_unredacted_us"].append(child("api_append", count=API_APPENDS, redact=False)["mean_us"])
        if pi_home is not None:
            folder = Path(tempfile.mkdtemp(prefix="sessiontree-bench-pi-api-"))
            try:
                runs["pi_us"].append(pi_child(pi_home, "api_append", folder, API_APPENDS)["mean_us"])
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        log(f"  public-API appends run {r + 1}/{repeat}: {time.perf_counter() - started:.1f} s")
    out: dict[str, Any] = {key: statistics.median(v) if v else None for key, v in runs.items()}
    out["count"] = API_APPENDS
    return out


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Key by key, the median of the numbers (recursively); other values from the first run."""
    out: dict[str, Any] = {}
    for key, first in runs[0].items():
        values = [r[key] for r in runs if key in r]
        if isinstance(first, dict):
            out[key] = median_of(values)
        elif isinstance(first, (int, float)) and not isinstance(first, bool):
            out[key] = statistics.median(values)
        else:
            out[key] = first
    out["runs"] = len(runs)
    return out


def measure_size(n: int, files: dict[str, Path], repeat: int, pi_home: Path | None) -> dict[str, Any]:
    native, pi_file = str(files["native"]), str(files["pi"])
    plan: dict[str, Any] = {
        "open_native": lambda: child("open_context", file=native, index="none"),
        "open_pi": lambda: child("open_context", file=pi_file, index="none"),
        "open_native_indexed": lambda: child("open_context", file=native, index="kept"),  # the index the cold open wrote
        "open_pi_indexed": lambda: child("open_context", file=pi_file, index="kept"),
        "floor_parse_native": lambda: child("parse_floor", file=native),
        "floor_parse_pi": lambda: child("parse_floor", file=pi_file),
        "append_native": lambda: child("append", file=native, durability="flush", count=APPENDS,
                                       ctx_iters=CTX_ITERS, warmup=WARMUP),
        "append_pi": lambda: child("append", file=pi_file, durability="flush", count=APPENDS,
                                   ctx_iters=PI_FILE_CTX_ITERS, warmup=WARMUP),
        "append_unredacted": lambda: child("append", file=native, durability="flush", count=APPENDS,
                                           ctx_iters=CTX_ITERS, warmup=WARMUP, redact=False),
        "floor_write_flush": lambda: child("write_floor", file=native, durability="flush", count=APPENDS,
                                           warmup=WARMUP),
        "append_fsync": lambda: child("append", file=native, durability="fsync", count=FSYNC_APPENDS,
                                      ctx_iters=0, warmup=WARMUP),
        "time_travel": lambda: child("time_travel", file=native),
    }
    if pi_home is not None:
        plan["pi_open"] = lambda: pi_child(pi_home, "open", files["pi"])
        plan["pi_append"] = lambda: pi_append(pi_home, files["pi"], APPENDS, PI_CTX_ITERS)
    runs: dict[str, list[dict[str, Any]]] = {key: [] for key in plan}
    for r in range(repeat):
        for key, run in plan.items():
            started = time.perf_counter()
            runs[key].append(run())
            log(f"  N={n:,} run {r + 1}/{repeat} {key}: {time.perf_counter() - started:.1f} s")
    return {key: median_of(values) for key, values in runs.items()}


def measure_list(sessions: int, repeat: int, pi_home: Path | None, data: Path) -> dict[str, Any] | None:
    """``list()`` of ``sessions`` sessions (fresh processes) vs pi 1.6.0's listing of the same
    directory; the sessions and pi's timing come from helper ``bench_list.py``."""
    if sessions <= 0:
        return None
    import bench_list

    directory = data / f"list-{sessions}"
    if len(list(directory.glob("*.jsonl"))) != sessions:
        log(f"  writing {sessions:,} sessions of 10 entries (bench_list.write_sessions)")
        subprocess.run([sys.executable, str(HERE / "bench_data.py"), "sessions", str(directory), str(sessions)],
                       check=True)
    runs: dict[str, list[float]] = {"pi_ms": [], "cold_ms": [], "ours_ms": []}
    for r in range(repeat):
        started = time.perf_counter()
        if pi_home is not None:
            pi = bench_list.pi_list(pi_home, directory, "latest")
            if pi is not None:
                runs["pi_ms"].append(pi)
        runs["cold_ms"].append(child("list_sessions", directory=str(directory), cold=True)["total_ms"])
        runs["ours_ms"].append(child("list_sessions", directory=str(directory), cold=False)["total_ms"])
        log(f"  list of {sessions:,} sessions run {r + 1}/{repeat}: {time.perf_counter() - started:.1f} s")
    out: dict[str, Any] = {key: statistics.median(v) if v else None for key, v in runs.items()}
    out["sessions"] = sessions
    return out


def machine(pi_home: Path | None) -> dict[str, str]:
    def run(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return "?"

    cpu = next((line.split(":", 1)[1].strip() for line in run("lscpu").splitlines()
                if line.startswith("Model name")), platform.processor() or "?")
    memory = next((line.split()[1] for line in run("free", "-h").splitlines() if line.startswith("Mem:")), "?")
    return {
        "cpus": str(os.cpu_count()), "cpu": cpu, "memory": memory, "os": platform.platform(),
        "python": platform.python_version(), "node": run("node", "--version") if shutil.which("node") else "-",
        "pi": bench_data.pi_version(pi_home) if pi_home else "-",
        "commit": run("git", "-C", str(HERE.parent), "describe", "--always", "--dirty"),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="entry counts, comma-separated")
    parser.add_argument("--quick", action="store_true", help="sizes 1000,10000 only")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median is shown)")
    parser.add_argument("--no-pi", action="store_true", help="skip pi even when node is present")
    parser.add_argument("--data", type=Path, help="keep the generated files here and reuse them next time")
    parser.add_argument("--list-sessions", type=int, help="sessions for list() (default 10000, 1000 with --quick; 0: skip)")
    parser.add_argument("--json", type=Path, help="also write every raw median here")
    parser.add_argument("--from-json", type=Path, help="measure nothing: print the table of a saved --json file")
    parser.add_argument(
        "--pin", help="run every process, ours and pi's, on these CPUs only (e.g. 0, or 0,1)"
    )
    args = parser.parse_args(argv)
    if args.pin is not None:
        try:
            args.pin = {int(c) for c in args.pin.split(",") if c.strip()}
        except ValueError:
            parser.error(f"--pin takes CPU numbers separated by commas, not {args.pin!r}")
        if not args.pin or not args.pin <= os.sched_getaffinity(0):
            parser.error(f"--pin: CPUs {sorted(args.pin)} are not all available here ({sorted(os.sched_getaffinity(0))})")
    args.sizes = [1000, 10000] if args.quick else [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.list_sessions is None:
        args.list_sessions = 1000 if args.quick else 10000
    return args


def table(results: dict[int, dict[str, Any]], listing: dict[str, Any] | None, api: dict[str, Any] | None = None) -> str:
    rows = [row for n in sorted(results) for row in bench_report.size_rows(n, results[n])]
    rows += bench_report.growth_rows(results) + bench_report.list_rows(listing) + bench_report.api_rows(api)
    return bench_report.render(rows)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        print(table({int(n): r for n, r in saved["results"].items()}, saved.get("list"), saved.get("api_append")))
        return 0
    if args.pin:  # every process started from here on inherits it: ours, pi's, the helpers
        os.sched_setaffinity(0, args.pin)
    why_not = "--no-pi" if args.no_pi else bench_data.pi_available()
    pi_home = None if why_not else bench_data.pi_peer_home()
    if why_not and not args.no_pi:
        log(f"pi is not measured: {why_not}")
    info = machine(pi_home)
    info["pinned"] = ",".join(map(str, sorted(args.pin))) if args.pin else "-"
    started = time.perf_counter()
    scratch = None if args.data else Path(tempfile.mkdtemp(prefix="sessiontree-bench-data-"))
    data = args.data or scratch
    assert data is not None
    try:
        log(f"preparing files in {data}")
        # In a child process: converting 100k entries takes ~0.7 GB, which this process
        # should not hold while it starts the measurements.
        subprocess.run([sys.executable, str(HERE / "bench_data.py"), "files", str(data),
                        ",".join(map(str, args.sizes)), "pi" if pi_home else "no-pi"], check=True)
        files = bench_data.prepare(data, args.sizes, pi_home is not None, log=log)
        results = {}
        for n in args.sizes:
            results[n] = measure_size(n, files[n], args.repeat, pi_home)
        listing = measure_list(args.list_sessions, args.repeat, pi_home, data)
        api = measure_api_append(args.repeat, pi_home) if not args.quick else None
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"machine: {info['cpus']} CPUs ({info['cpu']}), {info['memory']} RAM, {info['os']}")
    print(f"python {info['python']}, node {info['node']}, pi {info['pi']}; "
          f"median of {args.repeat} fresh-process runs; {time.perf_counter() - started:.0f} s in all"
          + (f"; every process pinned to CPU {info['pinned']}" if args.pin else ""))
    print(f"sessiontree {info['commit']} (pure Python); load average before the run "
          f"{info['load']}, after " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    print()
    print(table(results, listing, api))
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "results": results, "list": listing, "api_append": api},
                                        indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
