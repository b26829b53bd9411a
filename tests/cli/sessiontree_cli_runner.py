"""Runs the installed ``sessiontree`` console script in a subprocess (shared by tests/cli).

``run(args, cwd)`` checks the exit status: 0 by default, or 1 with ``fails=True``, in which
case stderr must be exactly one ``sessiontree: error:`` line (with ``--json``, one JSON error) and never a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def _script() -> str:
    beside = Path(sys.executable).parent / "sessiontree"
    found = str(beside) if beside.exists() else shutil.which("sessiontree")
    if found is None:
        pytest.fail("the sessiontree console script is not installed (pip install -e .)")
    return found


SCRIPT = _script()


def _env(**more: str) -> dict[str, str]:
    """The environment the script runs in: the user's, wide, without warnings or ``$SESSIONTREE_REPO``; plus ``more``."""
    env = {k: v for k, v in os.environ.items() if k != "SESSIONTREE_REPO"}
    env["COLUMNS"] = "200"  # wide rows: what a test looks for is not cut with an ellipsis
    env["PYTHONWARNINGS"] = "ignore"
    return env | more


def run(
    args: tuple[str, ...], cwd: Path, fails: bool = False, stdin: str | None = None, **more_env: str,
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [SCRIPT, *args], cwd=cwd, capture_output=True, text=True, env=_env(**more_env), timeout=120, input=stdin
    )
    if fails:
        assert proc.returncode == 1, f"expected failure, got {proc.returncode}: {proc.stdout}"
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, f"expected one line on stderr, got: {proc.stderr!r}"
        if "--json" in args:  # the error is JSON too
            assert set(json.loads(lines[0])["error"]) == {"code", "message"}, lines[0]
        else:
            assert lines[0].startswith("sessiontree: error: "), lines[0]
        assert "Traceback" not in proc.stderr
    else:
        assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr}"
    return proc
