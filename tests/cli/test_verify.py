"""``sessiontree verify``: every problem reported with its file and line."""

from __future__ import annotations

import json
from pathlib import Path


def _damaged(tmp_path: Path, demo: dict) -> Path:
    good = (tmp_path / ".sessions" / f"{demo['session_id']}.jsonl").read_bytes().splitlines(keepends=True)
    bad = tmp_path / "damaged"
    bad.mkdir()
    lines = [*good[:5], b'{"type":"message","id":"zz"\n', *good[5:8], good[2]]
    lines.append(b'{"type":"label","id":"lab00001","parent_id":null,"timestamp":"2026-01-01T00:00:00.000Z","target_id":"gone0000","label":"x"}\n')
    lines.append(b'{"type":"message","id":"torn')
    (bad / "broken.jsonl").write_bytes(b"".join(lines))
    return bad


def test_verify_a_clean_repository(demo, cli, cli_json) -> None:
    """The demo repository verifies clean: exit 0, one report, no problems."""
    report = cli_json("verify")
    assert report["ok"] is True and report["files"] == 1 and report["errors"] == 0
    assert "✓" in cli("verify").stdout


def test_verify_reports_each_problem_with_file_and_line(demo, cli, tmp_path: Path) -> None:
    """Bad JSON, a duplicate id, a dangling label and a torn tail are each reported at their line."""
    bad = _damaged(tmp_path, demo)
    proc = cli("verify", str(bad), fails=True)
    out = proc.stdout
    path = str(bad / "broken.jsonl")
    assert f"{path}:6: error: invalid JSON" in out
    assert f"{path}:10: error: duplicate entry id" in out
    assert f"{path}:11: warning: label entry 'lab00001'" in out
    assert f"{path}:12: warning: torn last line" in out
    assert "2 error(s)" in proc.stderr


def test_verify_json_lists_problems(demo, cli, tmp_path: Path) -> None:
    """``--json`` gives per-file problems with line, severity and message (exit status still 1)."""
    bad = _damaged(tmp_path, demo)
    proc = cli("verify", str(bad / "broken.jsonl"), "--json", fails=True)
    report = json.loads(proc.stdout)
    problems = report["reports"][0]["problems"]
    assert [(p["line"], p["severity"]) for p in problems] == [(6, "error"), (10, "error"), (11, "warning"), (12, "warning")]


def test_verify_headerless_and_missing_files(cli, tmp_path: Path) -> None:
    """A file with no header is an error at line 1; a missing path is one error line."""
    (tmp_path / "x.jsonl").write_text('{"type":"message"}\n')
    assert "x.jsonl:1: error" in cli("verify", "x.jsonl", fails=True).stdout
    assert "no such file" in cli("verify", "nothing-here", fails=True).stderr
