"""``import`` and ``export``: pi dialect both ways, native JSONL, Markdown and HTML."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from sessiontree_pi import fixtures_dir


def test_pi_export_then_import_gives_the_same_session(demo, cli, cli_json, tmp_path: Path) -> None:
    """A session exported as a pi file and imported elsewhere keeps its id, tree and context."""
    cli("export", "--format", "pi", "-o", "pi.jsonl")
    lines = (tmp_path / "pi.jsonl").read_text().splitlines()
    assert json.loads(lines[1])["parentId"] is None  # pi's camelCase dialect
    imported = cli_json("import", "pi.jsonl", "--repo", "other")
    assert imported[0]["dialect"] == "pi" and imported[0]["session_id"] == demo["session_id"]
    here = cli_json("context")
    there = cli_json("context", "--repo", "other")
    assert there["messages"] == here["messages"] and there["leaf_id"] == here["leaf_id"]
    def tree(rows: list) -> list:
        return [{k: v for k, v in row.items() if k != "entry"} for row in rows]

    assert tree(cli_json("show", "--repo", "other")["rows"]) == tree(cli_json("show")["rows"])


def test_native_export_is_the_session_line_for_line(demo, cli, tmp_path: Path) -> None:
    """``export --format native`` writes the same lines the repository holds."""
    out = cli("export", "--format", "native").stdout
    stored = (tmp_path / ".sessions" / f"{demo['session_id']}.jsonl").read_text()
    assert out == stored


def test_markdown_and_html_export_of_a_branch(demo, cli, tmp_path: Path) -> None:
    """Markdown has the turns, the compaction and the labels; HTML escapes the text."""
    markdown = cli("export", "--format", "markdown").stdout
    assert markdown.startswith("# Fix the flaky cache test")
    assert "## User" in markdown and "## Compaction" in markdown and "`[fixed]`" in markdown
    assert "Revert that and do A: inject a clock." in markdown
    side = cli("export", "--leaf", demo["ids"]["quick_fix_end"]).stdout
    assert "Try B first" in side and "Revert that" not in side
    cli("export", "--format", "html", "-o", "branch.html")
    page = (tmp_path / "branch.html").read_text()
    assert page.startswith("<!doctype html>") and "&lt;" not in page.split("<body>")[0]
    assert "Revert that and do A: inject a clock." in page


def test_export_refuses_to_overwrite_a_file(demo, cli, tmp_path: Path) -> None:
    """An existing ``--output`` file is left alone: ``already_exists``."""
    (tmp_path / "taken.md").write_text("mine")
    assert "already_exists" in cli("export", "-o", "taken.md", fails=True).stderr
    assert (tmp_path / "taken.md").read_text() == "mine"


def test_import_of_a_bad_file_or_a_changed_duplicate_fails_cleanly(demo, cli, tmp_path: Path) -> None:
    """A file that is not a session, or a session already in the repository with other lines, is one error line; the
    same session again is already there, not an error."""
    (tmp_path / "junk.jsonl").write_text("hello\n")
    proc = cli("import", "junk.jsonl", fails=True)
    assert "junk.jsonl:1" in proc.stderr and "corrupt" in proc.stderr
    cli("export", "--format", "native", "-o", "copy.jsonl")
    assert "already there 1" in cli("import", "copy.jsonl").stdout
    cli("label", demo["ids"]["diagnosis"], "grown", "-s", "copy.jsonl")  # the source changed since
    assert "already_exists" in cli("import", "copy.jsonl", fails=True).stderr
    assert "no such session file" in cli("import", "missing.jsonl", fails=True).stderr


def test_real_pi_file_imports_and_exports_byte_for_byte(cli, cli_json, tmp_path: Path) -> None:
    """A file pi wrote is shown and read in place, imported, and exported back unchanged."""
    source = tmp_path / "pi-session.jsonl"
    shutil.copy(fixtures_dir() / "branches.jsonl", source)
    assert "Branches sample" in cli("show", str(source)).stdout
    (item,) = cli_json("import", str(source))
    assert item["dialect"] == "pi" and (tmp_path / ".sessions" / f"{item['session_id']}.jsonl").is_file()
    assert cli_json("context", item["session_id"])["messages"] == cli_json("context", str(source))["messages"]
    cli("export", item["session_id"], "--format", "pi", "-o", "back.jsonl")
    assert (tmp_path / "back.jsonl").read_bytes() == source.read_bytes()


def test_an_export_writes_content_kept_out_of_line_inline(cli, tmp_path: Path) -> None:
    """`export --format native` and `--format pi` give files that need nothing beside them: the image is inline."""
    import base64

    from sessiontree import ImageContent, JsonlSessionRepo, UserMessage, verify

    image = base64.b64encode(b"a picture " * 300).decode()
    repo = JsonlSessionRepo(tmp_path / ".sessions")
    session = repo.create(cwd=str(tmp_path))
    session.append_message(UserMessage([ImageContent(image, "image/png")]))
    session.close()
    (tmp_path / "out").mkdir()
    for kind in ("native", "pi"):
        target = tmp_path / "out" / f"{kind}.jsonl"
        cli("export", "--format", kind, "-o", str(target), session.id)
        assert image.encode() in target.read_bytes() and b"$blob" not in target.read_bytes()
        assert verify(target).ok
    assert not (tmp_path / "out" / ".blobs").exists()
