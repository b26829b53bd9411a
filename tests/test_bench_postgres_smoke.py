"""Smoke test of ``benchmarks/bench_postgres.py``: it runs end to end on the test server and prints every row of its
table (no timings checked)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

import sessiontree_pg as pg

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.postgres
def test_bench_postgres_prints_every_row() -> None:
    pg.require_postgres()
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_postgres.py"), "--sessions", "300", "--appends", "5",
         "--writers", "1,3", "--repeat", "1"],
        capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| ")]
    for case in ("one session: append p50 ms", "3 sessions, threads: throughput /s", "3 sessions, processes: append p99 ms",
                 "list newest 50 of 300, new repository ms", "open a 1,000-entry session ms"):
        assert any(r.startswith(f"| {case} |") for r in rows), case
