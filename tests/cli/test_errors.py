"""Failures: one clear line on stderr, exit status 1, never a traceback (unless ``--debug``)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def test_missing_repository(cli) -> None:
    """Reading from a directory with no ./.sessions says so and suggests the demo."""
    proc = cli("ls", fails=True)
    assert "no session repository at .sessions" in proc.stderr and "sessiontree demo" in proc.stderr
    assert "no session repository" in cli("show", "--repo", "nowhere", fails=True).stderr


def test_unknown_session_id(demo, cli) -> None:
    """An id, prefix or name that matches nothing is ``not_found`` naming it."""
    proc = cli("show", "no-such-session", fails=True)
    assert "not_found" in proc.stderr and "no-such-session" in proc.stderr


def test_session_by_prefix_and_by_name(demo, cli_json) -> None:
    """A unique id prefix or the session's name selects the session."""
    assert cli_json("stats", demo["session_id"][:20])["session_id"] == demo["session_id"]
    assert cli_json("stats", "Fix the flaky cache test")["session_id"] == demo["session_id"]


def test_bad_session_files(cli, tmp_path: Path) -> None:
    """A corrupt or missing session file is one line naming the file (and line)."""
    (tmp_path / "bad.jsonl").write_text("not json at all\n")
    proc = cli("show", "bad.jsonl", fails=True)
    assert "bad.jsonl:1" in proc.stderr and "corrupt" in proc.stderr
    header = '{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":""}\n'
    (tmp_path / "mid.jsonl").write_text(header + "{oops\n")
    assert "mid.jsonl:2" in cli("context", "mid.jsonl", fails=True).stderr
    assert "no such session file" in cli("stats", "gone.jsonl", fails=True).stderr


def test_usage_errors_are_one_line_with_status_1(cli) -> None:
    """An unknown command or a bad option value is a one-line usage error, exit 1."""
    assert "invalid choice" in cli("frobnicate", fails=True).stderr
    assert "invalid int value" in cli("replay", "--to", "ten", fails=True).stderr
    assert "--help" in cli("show", "--filter", "bogus", fails=True).stderr


def test_debug_shows_the_traceback(script: str, tmp_path: Path) -> None:
    """``--debug`` prints the traceback before the error line."""
    proc = subprocess.run([script, "ls", "--debug"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and proc.stderr.strip().splitlines()[-1].startswith("sessiontree: error:")


def test_help_lists_every_command(cli) -> None:
    """``--help`` names every command of SPEC section 6."""
    out = cli("--help").stdout
    for command in ("demo", "ls", "show", "context", "stats", "replay", "fork", "label", "name", "import", "export", "verify"):
        assert command in out
