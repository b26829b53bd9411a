"""Smoke test of benchmarks/bench_web.py: it runs end to end in the browser and prints its table (no timing checked)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sessiontree_web import CHROMIUM, unavailable

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.browser
def test_the_web_benchmark_prints_its_table(tmp_path):
    if not Path(CHROMIUM).exists():
        unavailable(f"no system chromium at {CHROMIUM}")
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_web.py"), "--entries", "300", "--sessions", "2", "--small", "50",
         "--repeat", "1", "--data", str(tmp_path)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for measure in ("tree first paint, cold", "server CPU to the cold tree's first paint", "tree first paint, warm",
                    "context page at the leaf", "server RSS, 2 sessions open"):
        assert any(line.startswith(f"| {measure}") for line in lines), measure
