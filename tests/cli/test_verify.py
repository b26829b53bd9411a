"""``sessiontree verify``: every problem reported with its file and line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from sessiontree_pi import fixtures_dir


def _demo_lines(tmp_path: Path, demo: dict) -> list[bytes]:
    return (tmp_path / ".sessions" / f"{demo['session_id']}.jsonl").read_bytes().splitlines(keepends=True)


def _damaged(tmp_path: Path, demo: dict) -> Path:
    """A copy of the demo with bad JSON at line 6, a duplicate id at line 10 and a torn tail."""
    good = _demo_lines(tmp_path, demo)
    bad = tmp_path / "damaged"
    bad.mkdir()
    lines = [*good[:5], b'{"type":"message","id":"zz"\n', *good[5:8], good[2], b'{"type":"message","id":"torn']
    (bad / "broken.jsonl").write_bytes(b"".join(lines))
    return bad


def test_verify_a_clean_repository(demo, cli, cli_json) -> None:
    """The demo repository verifies clean and hash-chained: exit 0, one report, no problems."""
    report = cli_json("verify")
    assert report["ok"] is True and report["files"] == 1 and report["errors"] == 0
    assert report["reports"][0]["chained"] is True
    assert "✓" in cli("verify").stdout


def test_verify_names_an_altered_line(demo, cli, tmp_path: Path) -> None:
    """Changing one character of a chained log is an error at exactly that line."""
    lines = _demo_lines(tmp_path, demo)
    index = next(i for i, line in enumerate(lines) if b"Revert that" in line)
    lines[index] = lines[index].replace(b"Revert that", b"Rewrite that")
    (tmp_path / "altered.jsonl").write_bytes(b"".join(lines))
    proc = cli("verify", "altered.jsonl", fails=True)
    assert f"altered.jsonl:{index + 1}: error: does not match its chain digest" in proc.stdout
    assert "1 error(s)" in proc.stderr


def test_verify_reports_each_problem_with_file_and_line(demo, cli, tmp_path: Path) -> None:
    """Bad JSON, a duplicate id and a torn tail are each reported at their own line."""
    bad = _damaged(tmp_path, demo)
    out = cli("verify", str(bad), fails=True).stdout
    path = str(bad / "broken.jsonl")
    assert f"{path}:6: error: invalid JSON" in out
    assert f"{path}:10: error: duplicate entry id" in out
    assert f"{path}:11: warning: torn last line" in out


def test_verify_json_lists_problems_and_warnings(demo, cli, tmp_path: Path) -> None:
    """``--json`` gives per-file problems and warnings with their lines (exit status still 1)."""
    bad = _damaged(tmp_path, demo)
    report = json.loads(cli("verify", str(bad / "broken.jsonl"), "--json", fails=True).stdout)
    (only,) = report["reports"]
    assert {6, 10} <= {p["line"] for p in only["problems"]}
    assert [w["line"] for w in only["warnings"]] == [11]
    assert report["ok"] is False and only["first_bad_line"] == 6


def test_verify_pi_files_and_require_chain(cli, tmp_path: Path) -> None:
    """A pi file passes with an 'unchained' warning, and fails under ``--require-chain``."""
    shutil.copy(fixtures_dir() / "small.jsonl", tmp_path / "pi.jsonl")
    out = cli("verify", "pi.jsonl").stdout
    assert "pi, not chained" in out and "warning" in out
    assert "not tamper-evident" in cli("verify", "pi.jsonl", "--require-chain", fails=True).stdout


def test_verify_headerless_and_missing_files(cli, tmp_path: Path) -> None:
    """A file with no header is an error at line 1; a missing path is one error line."""
    (tmp_path / "x.jsonl").write_text('{"type":"message"}\n')
    assert "x.jsonl:1: error" in cli("verify", "x.jsonl", fails=True).stdout
    assert "no such file" in cli("verify", "nothing-here", fails=True).stderr


def test_verify_checks_signed_checkpoints_with_key(demo, cli, tmp_path: Path) -> None:
    """With ``--key``, a signed checkpoint beside the file catches lines cut from the end."""
    from sessiontree.audit.checkpoints import save_checkpoint, sign_checkpoint

    path = tmp_path / ".sessions" / f"{demo['session_id']}.jsonl"
    key = tmp_path / "audit.key"
    key.write_bytes(b"0123456789abcdef0123456789abcdef")
    save_checkpoint(path, sign_checkpoint(path, key.read_bytes()))
    assert "1 signed checkpoint(s)" in cli("verify", str(path), "--key", str(key)).stdout
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-2]))
    assert "1 error(s)" in cli("verify", str(path), "--key", str(key), fails=True).stderr
    (tmp_path / "short.key").write_bytes(b"tiny")
    assert "at least 16 bytes" in cli("verify", str(path), "--key", "short.key", fails=True).stderr


def test_verify_checks_content_kept_out_of_line(cli, cli_json, tmp_path: Path) -> None:
    """A session holding an image: verify counts its blob; with the blob gone, the line that refers to it fails."""
    import base64

    from sessiontree import ImageContent, JsonlSessionRepo, TextContent, UserMessage

    repo = JsonlSessionRepo(tmp_path / ".sessions")
    session = repo.create(cwd=str(tmp_path))
    session.append_message(UserMessage([TextContent("the screenshot"), ImageContent(base64.b64encode(b"png" * 500).decode(), "image/png")]))
    session.close()
    assert "1 blob(s) match" in cli("verify").stdout
    assert cli_json("verify")["reports"][0]["blobs"] == 1
    (blob,) = [p for p in (tmp_path / ".sessions" / ".blobs").rglob("*") if p.is_file() and p.name != "lock"]
    blob.unlink()
    proc = cli("verify", fails=True)
    assert ".jsonl:2: error: content" in proc.stdout and "is missing" in proc.stdout
