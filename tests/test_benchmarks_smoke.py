"""Smoke test of the benchmark command: it runs end to end and prints its table (no timings checked)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_run_prints_the_table(tmp_path: Path) -> None:
    """`benchmarks/run.py --sizes 200 --no-pi --repeat 1 --pin 0` exits 0 and prints one row per
    measure, saying its processes were pinned."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--sizes", "200", "--no-pi", "--repeat", "1",
         "--list-sessions", "0", "--data", str(tmp_path / "data"), "--pin", "0"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any("every process pinned to CPU 0" in line for line in lines)
    assert any(line.startswith("| measure") and "verdict" in line for line in lines)
    for measure in ("open+context, native file", "open+context, pi file", "context after append (p50), native file", "context after append (p50), pi file",
                    "append p50 (flush)", "append p99 (flush)", "append p50 (fsync)", "time travel",
                    "peak RSS of open+context"):
        assert any(line.startswith(f"| {measure}") for line in lines), measure
    assert (tmp_path / "data" / "made-by-sessiontree" / "native-200.jsonl").is_file()
    assert (tmp_path / "data" / "made-by-sessiontree" / "pi-200.jsonl").is_file()


@pytest.mark.slow
def test_stream_prints_the_table(tmp_path: Path) -> None:
    """`benchmarks/bench_stream.py --entries 200 --no-pi --repeat 1` runs verify, export, replay, stats and show through
    the console script on both files, and the commit before (here: the same build, as --baseline) alongside."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_stream.py"), "--entries", "200", "--no-pi", "--repeat", "1",
         "--data", str(tmp_path / "data"), "--baseline", str(Path(sys.executable).parents[1])],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| 200 ")]
    for name in ("native", "pi"):
        for command in ("verify", "export pi", "export native", "replay --step --json", "stats", "stats --json", "show",
                        "show --json"):
            for side in ("ours", "baseline"):
                assert any(row.startswith(f"| 200 {name} | {command} | {side} |") for row in rows), (name, command, side)


def test_pin_refuses_cpus_that_are_not_there() -> None:
    """`--pin` names CPUs this process may use, or the command stops before measuring."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--pin", "4096", "--no-pi"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 2 and "--pin" in out.stderr and "not all available" in out.stderr


def test_writers_prints_its_tables(tmp_path: Path) -> None:
    """`benchmarks/bench_writers.py` runs end to end against this tree's own commit (timings not checked)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_writers.py"), "--against", "HEAD", "--rounds", "1",
         "--seconds", "0.3", "--appends", "50", "--writers", "2", "--json", str(tmp_path / "w.json")],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout
    assert "| this tree (lock per append) |" in out and "| HEAD |" in out and "| 2 |" in out
    assert {"ours_p50", "theirs_p50", "ratio", "jain"} <= set(json.loads((tmp_path / "w.json").read_text()))
