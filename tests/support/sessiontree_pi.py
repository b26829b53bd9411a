"""Helpers for the pi dialect tests: the shared fixtures and the pi-peer harness.

Paths come from this file's place in the repository (the fixtures live in
``../shared/fixtures/pi`` next to the project root) and from ``$SESSIONTREE_PI_PEER``
(default ``$TMPDIR/sessiontree-pi-peer``, where ``scripts/install-pi-peer.sh`` installs
the harness). In CI (``CI=true``) a missing harness or fixture folder fails the test;
elsewhere it is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from sessiontree.adapters.pi import pi_codec

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "pi"
EXTRAS_SCRIPT = Path(__file__).resolve().with_name("sessiontree_pi_extras.mjs")
BUILDS = ("legacy", "latest")
PACKAGES = {
    "legacy": ("node_modules", "@mariozechner", "pi-coding-agent"),
    "latest": ("latest", "node_modules", "@earendil-works", "pi-coding-agent"),
}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def unavailable(reason: str) -> None:
    """Fail in CI, skip elsewhere."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: the pi interop tests must run; see scripts/install-pi-peer.sh)")
    pytest.skip(reason)


def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        unavailable(f"the shared pi fixtures are not at {FIXTURES}")
    return FIXTURES


def peer_dir() -> Path:
    configured = os.environ.get("SESSIONTREE_PI_PEER")
    return Path(configured) if configured else Path(tempfile.gettempdir()) / "sessiontree-pi-peer"


def require_peer(*builds: str) -> Path:
    """The harness folder, with node and the asked-for pi builds installed."""
    if shutil.which("node") is None:
        unavailable("node is not on PATH")
    folder = peer_dir()
    if not (folder / "pi-peer.mjs").is_file():
        unavailable(f"the pi-peer harness is not installed in {folder}")
    for build in builds or BUILDS:
        if not folder.joinpath(*PACKAGES[build], "package.json").is_file():
            unavailable(f"the {build} pi build is not installed in {folder}")
    return folder


def _node(args: list[str], cwd: Path) -> Any:
    done = subprocess.run(["node", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f"node {' '.join(args)} failed:\n{done.stderr}")
    return json.loads(done.stdout)


def peer(command: str, *args: str | Path, build: str = "legacy") -> Any:
    """Run one pi-peer command with one pi build and return its JSON output."""
    folder = require_peer(build)
    return _node(["pi-peer.mjs", command, *map(str, args), "--pkg", build], folder)


def generate_extras(out: Path, seed: int) -> Any:
    """A pi 1.x session with system messages, context edits and usage entries."""
    folder = require_peer("latest")
    return _node([str(EXTRAS_SCRIPT), str(folder), str(out), str(seed)], folder)


def pi_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """Context messages as pi's dicts, to compare with what pi's context builder returns."""
    codec = pi_codec()
    return [codec.message_to_dict(message) for message in messages]


def pi_model(model: Any) -> Any:
    return None if model is None else {"provider": model["provider"], "modelId": model["model_id"]}


__all__ = [
    "BUILDS",
    "FIXTURES",
    "fixtures_dir",
    "generate_extras",
    "in_ci",
    "peer",
    "peer_dir",
    "pi_messages",
    "pi_model",
    "require_peer",
]
