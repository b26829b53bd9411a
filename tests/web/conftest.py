"""Fixtures for the web viewer's tests: repositories (the demo's, a pi file's), the real server, a real browser."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

for _folder in (Path(__file__).resolve().parents[1] / "support", Path(__file__).resolve().parents[1] / "cli"):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

from sessiontree_cli_runner import run  # noqa: E402
from sessiontree_web import ARTEFACTS, Server, launch_chromium, unavailable  # noqa: E402


@pytest.fixture(scope="session")
def _demo_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    where = tmp_path_factory.mktemp("web-demo")
    return where, json.loads(run(("demo", "--json"), where).stdout)


@pytest.fixture
def demo(tmp_path: Path, _demo_template: tuple[Path, dict[str, Any]]) -> dict[str, Any]:
    """The demo's ``--json`` report plus ``repo``: a copy of its repository, the test's own."""
    template, result = _demo_template
    shutil.copytree(template / ".sessions", tmp_path / ".sessions")
    return {**result, "repo": tmp_path / ".sessions", "file": tmp_path / ".sessions" / Path(result["location"]).name}


@pytest.fixture
def pi_repo(tmp_path: Path, demo: dict[str, Any]) -> dict[str, Any]:
    """A folder holding one pi-format file: the demo session exported by the library's pi export."""
    from sessiontree.pi.pi_convert import export_pi

    folder = tmp_path / "pi-sessions"
    folder.mkdir()
    dest = folder / "demo-pi.jsonl"
    export_pi(demo["file"], dest)
    assert json.loads(dest.read_text().splitlines()[0])["version"] == 3  # pi's v3 header
    return {**demo, "repo": folder, "file": dest}


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    """``serve(repo)``: a running server on that repository, stopped after the test."""
    started: list[Server] = []

    def start(repo: Path, *extra: str) -> Server:
        server = Server(repo, tmp_path, *extra)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")  # not the session's: while playwright runs, the main thread has a running event loop
def browser() -> Iterator[Any]:   # (asyncio.run in another module's tests would fail), so it stops after each module
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    yield tab
    context.close()
    assert errors == [], f"script errors on the page: {errors}"


@pytest.fixture
def shot(request: pytest.FixtureRequest) -> Any:
    """``shot(page, name)``: a screenshot in test-artefacts/web/<test>-<name>.png."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)

    def take(tab: Any, name: str) -> Path:
        path = ARTEFACTS / f"{request.node.name.replace('[', '-').rstrip(']')}-{name}.png"
        tab.screenshot(path=str(path), full_page=False)
        return path

    return take
