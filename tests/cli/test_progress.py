"""Progress bars (issue 19): on a terminal, for work that takes longer than a second; never piped, never with --json."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
import sessiontree_testkit as kit

from sessiontree import JsonlSessionStorage, Session
from sessiontree.cli import output


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _advance_through(monkeypatch: pytest.MonkeyPatch, delay: float, *, json: bool = False) -> str:
    screen = _Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    monkeypatch.setattr(output, "JSON_ERRORS", json)
    with output.progress("verifying", 3, delay=delay) as advance:
        for _ in range(3):
            advance(1)
    return screen.getvalue()


def test_a_bar_appears_once_the_work_has_taken_its_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past its delay, work on a terminal shows rich's bar (on stderr)."""
    assert "verifying" in _advance_through(monkeypatch, 0.0)


def test_quick_work_and_json_output_show_no_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work done within the delay shows nothing; with --json nothing either, whatever the time."""
    assert _advance_through(monkeypatch, 60.0) == ""
    assert _advance_through(monkeypatch, 0.0, json=True) == ""


def test_a_quick_command_on_a_terminal_prints_no_bar(tmp_path: Path) -> None:
    """``sessiontree replay --step --json`` on a terminal: its JSON on stdout, and nothing on stderr."""
    path = tmp_path / "s.jsonl"
    with Session(JsonlSessionStorage.create(path)) as session:
        for n in range(30):
            session.append_message(kit.user(f"m{n}"))
    script = Path(sys.executable).parent / "sessiontree"
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([str(script), "replay", "--step", str(path), "--json"], stdout=subprocess.PIPE,
                              stderr=follower, text=True, timeout=60, cwd=tmp_path)
    finally:
        os.close(follower)
    os.set_blocking(leader, False)
    try:
        shown = os.read(leader, 1 << 16)
    except (BlockingIOError, OSError):
        shown = b""
    os.close(leader)
    assert proc.returncode == 0
    assert '"version"' in proc.stdout
    assert shown == b""
