"""docs/architecture.md's figures (lines per folder, calls per append, calls per entry on open) are the output of
scripts/architecture_figures.py as the code is now (issue 34: docs that cannot go stale)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_architecture_figures_are_current() -> None:
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "architecture_figures.py"), "--check"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
