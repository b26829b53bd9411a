"""Test kit for the web viewer: the real server (the console script) and the system's headless chromium.

``Server`` starts ``sessiontree serve --no-browser --port 0`` on a repository and reads the URL from the first line
of its stdout. ``launch_chromium`` drives Debian's ``chromium`` through playwright (never a downloaded browser);
when either is missing the test is skipped with the reason, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from sessiontree_cli_runner import SCRIPT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run"]
ARTEFACTS = Path(__file__).resolve().parents[2] / "test-artefacts" / "web"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"{reason} (CI=true: the browser tests must run; scripts/test.sh installs chromium and playwright)")
    pytest.skip(reason)


def launch_chromium(playwright: Any) -> Any:
    if not os.path.exists(CHROMIUM):
        unavailable(f"no system chromium at {CHROMIUM} (apt-get install chromium; scripts/test.sh does it as root)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)


class Server:
    """A running ``sessiontree serve`` (stop it with :meth:`stop`)."""

    def __init__(self, repo: Path, cwd: Path, *extra: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "SESSIONTREE_REPO"}
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen([SCRIPT, "serve", "--no-browser", "--port", "0", "--repo", str(repo), *extra],
                                     cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline().strip() if ready else ""  # type: ignore[union-attr]
        if not line.startswith("http://"):
            self.stop()
            raise AssertionError(f"serve printed {line!r} first; stderr: {self.proc.stderr.read()}")  # type: ignore[union-attr]
        self.url = line
        parts = urlsplit(line)
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.token = parts.query.removeprefix("token=")

    def get(self, path: str, *, token: bool = True, headers: dict[str, str] | None = None) -> tuple[int, bytes, Any]:
        """(status, body, headers) of a GET (with the token in its header unless ``token=False``)."""
        return self.request("GET", path, token=token, headers=headers)

    def request(self, method: str, path: str, body: bytes | None = None, *, token: bool = True,
                headers: dict[str, str] | None = None) -> tuple[int, bytes, Any]:
        sent = dict(headers or {})
        if token:
            sent.setdefault("X-Sessiontree-Token", self.token)
        request = urllib.request.Request(self.base + path, data=body, method=method, headers=sent)
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(request, timeout=60) as response:
                return response.status, response.read(), response.headers
        except urllib.error.HTTPError as error:
            return error.code, error.read(), error.headers

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every session file's bytes and mtime under ``folder`` (the listing index, a cache, left out)."""
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*.jsonl"))}


def wait_for(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)
