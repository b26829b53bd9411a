"""Fixtures for the command-line tests: the console script, run in a temporary directory.

``cli(*args)`` runs it and checks the exit status (see ``sessiontree_cli_runner.run``);
``cli_json`` parses stdout. ``demo`` copies a directory whose ``.sessions/`` holds one demo
session (built once per test run) into the test's own directory, so tests may write to it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

for _folder in (Path(__file__).resolve().parent, Path(__file__).resolve().parents[1] / "support"):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

from sessiontree_cli_runner import SCRIPT, run  # noqa: E402


@pytest.fixture
def script() -> str:
    """The path of the installed console script."""
    return SCRIPT


@pytest.fixture
def cli(tmp_path: Path) -> Any:
    def call(*args: str, fails: bool = False, cwd: Path | None = None) -> Any:
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
