"""Runs the installed ``sessiontree`` console script in a subprocess, in a temporary directory.

``cli(*args)`` runs it and checks the exit status: 0 by default, or 1 with ``fails=True``,
in which case stderr must be exactly one line and never a traceback. ``cli_json`` parses
stdout. ``demo_dir`` is a directory whose ``.sessions/`` holds one demo session (built once
per test run, copied for each test so tests may write to it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

_SUPPORT = str(Path(__file__).resolve().parents[1] / "support")
if _SUPPORT not in sys.path:
    sys.path.insert(0, _SUPPORT)


def _script() -> str:
    beside = Path(sys.executable).parent / "sessiontree"
    found = str(beside) if beside.exists() else shutil.which("sessiontree")
    if found is None:
        pytest.fail("the sessiontree console script is not installed (pip install -e .)")
    return found


SCRIPT = _script()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SESSIONTREE_REPO"}
    env["COLUMNS"] = "200"  # wide rows: what a test looks for is not cut with an ellipsis
    env["PYTHONWARNINGS"] = "ignore"
    return env


def run(args: tuple[str, ...], cwd: Path, fails: bool = False, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [SCRIPT, *args], cwd=cwd, capture_output=True, text=True, env=_env(), timeout=120, input=stdin
    )
    if fails:
        assert proc.returncode == 1, f"expected failure, got {proc.returncode}: {proc.stdout}"
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, f"expected one line on stderr, got: {proc.stderr!r}"
        assert lines[0].startswith("sessiontree: error: "), lines[0]
        assert "Traceback" not in proc.stderr
    else:
        assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr}"
    return proc


@pytest.fixture
def script() -> str:
    """The path of the installed console script."""
    return SCRIPT


@pytest.fixture
def cli(tmp_path: Path) -> Any:
    def call(*args: str, fails: bool = False, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return run(args, cwd or tmp_path, fails)

    return call


@pytest.fixture
def cli_json(tmp_path: Path) -> Any:
    def call(*args: str, cwd: Path | None = None) -> Any:
        return json.loads(run((*args, "--json"), cwd or tmp_path).stdout)

    return call


@pytest.fixture(scope="session")
def _demo_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    where = tmp_path_factory.mktemp("demo-template")
    result = json.loads(run(("demo", "--json"), where).stdout)
    return where, result


@pytest.fixture
def demo(tmp_path: Path, _demo_template: tuple[Path, dict[str, Any]]) -> dict[str, Any]:
    """The demo's ``--json`` report; its session sits in ``tmp_path/.sessions``."""
    template, result = _demo_template
    shutil.copytree(template / ".sessions", tmp_path / ".sessions")
    return result
