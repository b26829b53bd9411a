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

import orjson
import pytest

from sessiontree.pi.pi import pi_codec

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
    return _node([str(EXTRAS_SCRIPT), str(folder), "gen", str(out), str(seed)], folder)


def continue_in_pi(path: Path, build: str) -> Any:
    """Let pi resume ``path`` in place and append a user message and a reply."""
    folder = require_peer(build)
    return _node([str(EXTRAS_SCRIPT), str(folder), "continue", str(path), build], folder)


def pi_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """Context messages as pi's dicts, to compare with what pi's context builder returns."""
    codec = pi_codec()
    return [codec.message_to_dict(message) for message in messages]


def pi_model(model: Any) -> Any:
    return None if model is None else {"provider": model["provider"], "modelId": model["model_id"]}


VIEW_KEYS = (
    "entries", "entryTypes", "leafId", "leafType", "pathLength", "sessionName", "labelsSet", "tree", "context",
    "contextMessages",
)


def _tree_counts(roots: list[Any]) -> dict[str, int]:
    nodes = branch_points = max_children = 0
    stack = list(roots)
    while stack:
        node = stack.pop()
        nodes += 1
        branch_points += len(node.children) > 1
        max_children = max(max_children, len(node.children))
        stack.extend(node.children)
    return {"roots": len(roots), "nodes": nodes, "branchPoints": branch_points, "maxChildren": max_children}


def pi_view(session: Any) -> dict[str, Any]:
    """What pi-peer's ``expected`` command reports about a file, computed by this library."""
    dialect = pi_codec().dialect
    types: dict[str, int] = {}
    for entry in session.get_entries():
        key = f"message:{dialect.role(entry.message.role)}" if entry.type == "message" else entry.type
        types[key] = types.get(key, 0) + 1
    context = session.build_context()
    messages = pi_messages(context.messages)
    roles: dict[str, int] = {}
    for message in messages:
        roles[message["role"]] = roles.get(message["role"], 0) + 1
    leaf = session.leaf_id
    return {
        "entries": len(session.get_entries()),
        "entryTypes": types,
        "leafId": leaf,
        "leafType": session.get_entry(leaf).type if leaf is not None else None,
        "pathLength": len(session.get_branch()),
        "sessionName": session.get_session_name(),
        "labelsSet": len(session.get_labels()),
        "tree": _tree_counts(session.get_tree()),
        "context": {
            "messages": len(messages),
            "roles": roles,
            "thinkingLevel": context.thinking_level,
            "model": pi_model(context.model),
        },
        "contextMessages": messages,
    }


# -- hand-written pi lines ----------------------------------------------------------------

SESSION_ID = "01a22719-3541-759d-a745-5e5f131c9378"


def write_lines(path: Path, objs: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in objs))
    return path


def pi_header(version: int | None = 3, **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "session"}
    if version is not None:
        out["version"] = version
    return {**out, "id": SESSION_ID, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w", **more}


def pi_node(entry_type: str, entry_id: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {"type": entry_type, "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z", **fields}


def user_msg(text: str, ts: int = 1) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}


def assistant_msg(text: str, ts: int = 2) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "a",
        "provider": "p",
        "model": "m",
        "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                  "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.3}},
        "stopReason": "stop",
        "timestamp": ts,
    }


def expected_view(expected: dict[str, Any]) -> dict[str, Any]:
    """The same keys from pi's own report (``expected`` output or a golden file)."""
    return {key: expected[key] for key in VIEW_KEYS}


__all__ = [
    "BUILDS",
    "FIXTURES",
    "SESSION_ID",
    "assistant_msg",
    "continue_in_pi",
    "expected_view",
    "fixtures_dir",
    "generate_extras",
    "in_ci",
    "peer",
    "peer_dir",
    "pi_header",
    "pi_messages",
    "pi_model",
    "pi_node",
    "pi_view",
    "require_peer",
    "user_msg",
    "write_lines",
]
