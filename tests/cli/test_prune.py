"""``sessiontree prune`` through the console script: the plan is printed first; a dry run changes nothing; without a
terminal nothing is deleted unless ``--yes``; on a terminal it asks; archives verify, show and refuse appends."""

from __future__ import annotations

import gzip
import json
import os
import pty
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sessiontree_cli_runner import SCRIPT, _env, run

from sessiontree import UserMessage, open_repo

OLD = datetime(2025, 1, 1, tzinfo=UTC)


def _sessions(root: Path, *specs: tuple[str, timedelta, bool]) -> dict[str, str]:
    """Sessions named ``name``, last changed ``age`` ago, labelled or not, in ``root`` (a JSONL repository)."""
    made = {}
    for name, age, labelled in specs:
        when = datetime.now(UTC) - age
        with open_repo(root, clock=lambda when=when: when) as repo:
            session = repo.create(cwd="/home/me/project", name=name)
            first = session.append_message(UserMessage(content=f"{name}: first question", timestamp=0))
            if labelled:
                session.append_label_change(first, "keep")
            session.close()
            made[name] = session.id
    return made


@pytest.fixture
def repo(tmp_path: Path) -> dict[str, str]:
    """``.sessions`` with two sessions 120 days old (one labelled) and one of yesterday."""
    return _sessions(tmp_path / ".sessions", ("old", timedelta(days=120), False),
                     ("old-labelled", timedelta(days=120), True), ("recent", timedelta(days=1), False))


def _files(tmp_path: Path) -> set[str]:
    return {p.name for p in (tmp_path / ".sessions").glob("*.jsonl")}


def test_the_dry_run_lists_the_plan_and_deletes_nothing(tmp_path: Path, repo: dict[str, str]) -> None:
    """--dry-run prints every session it would delete (id, name, size) and the ones it keeps, and deletes none."""
    before = _files(tmp_path)
    out = run(("prune", "--older-than", "90d", "--dry-run"), tmp_path).stdout
    assert "would delete 1 session" in out and repo["old"] in out and "'old'" in out and "2 entries" in out
    assert f"kept {repo['old-labelled']}: labelled" in out and repo["recent"] not in out
    assert _files(tmp_path) == before


def test_without_a_terminal_nothing_is_deleted_unless_yes(tmp_path: Path, repo: dict[str, str]) -> None:
    """Piped, prune prints the plan, deletes nothing and fails asking for --yes; with --yes it deletes."""
    before = _files(tmp_path)
    failed = run(("prune", "--older-than", "90d"), tmp_path, fails=True, stdin="y\n")
    assert repo["old"] in failed.stdout and "pass --yes" in failed.stderr and _files(tmp_path) == before
    done = run(("prune", "--older-than", "90d", "--yes"), tmp_path).stdout
    assert f"deleted {repo['old']}" in done and "pruned 1 session of 1" in done
    assert _files(tmp_path) == before - {f"{repo['old']}.jsonl"}


def test_no_keep_labelled_prunes_labelled_sessions_too(tmp_path: Path, repo: dict[str, str]) -> None:
    """--no-keep-labelled selects old sessions whatever their labels."""
    result = json.loads(run(("prune", "--older-than", "90d", "--no-keep-labelled", "--yes", "--json"), tmp_path).stdout)
    assert set(result["pruned"]) == {repo["old"], repo["old-labelled"]} and result["dry_run"] is False
    assert _files(tmp_path) == {f"{repo['recent']}.jsonl"}


def test_archives_verify_show_and_refuse_appends(tmp_path: Path, repo: dict[str, str]) -> None:
    """--archive DIR writes <id>.jsonl.gz files that verify, show and give the context; label refuses to write."""
    run(("prune", "--older-than", "90d", "--archive", "old-sessions", "--yes"), tmp_path)
    archive = f"old-sessions/{repo['old']}.jsonl.gz"
    assert gzip.decompress((tmp_path / archive).read_bytes()).count(b"\n") == 3
    assert "0 error(s)" in run(("verify", "old-sessions"), tmp_path).stdout
    assert "hash-chained" in run(("verify", archive), tmp_path).stdout
    assert "old: first question" in run(("context", archive), tmp_path).stdout
    assert "old: first question" in run(("show", archive), tmp_path).stdout
    refused = run(("name", archive, "new name"), tmp_path, fails=True)
    assert "archive, read-only" in refused.stderr


def test_the_json_plan_names_each_session(tmp_path: Path, repo: dict[str, str]) -> None:
    """--json --dry-run gives the plan for scripts: id, name, cwd, last change, entries, bytes, archive."""
    plan = json.loads(run(("prune", "--older-than", "90d", "--archive", "a", "--dry-run", "--json"), tmp_path).stdout)
    (item,) = plan["sessions"]
    assert item["id"] == repo["old"] and item["name"] == "old" and item["cwd"] == "/home/me/project"
    assert item["entries"] == 2 and item["bytes"] == (tmp_path / ".sessions" / f"{repo['old']}.jsonl").stat().st_size
    assert item["archive"] == os.path.join("a", f"{repo['old']}.jsonl.gz") and not (tmp_path / "a").exists()


@pytest.mark.parametrize("age", ["90", "ninety days", "-3d", "1.5d"])
def test_a_bad_age_is_one_clear_error(tmp_path: Path, repo: dict[str, str], age: str) -> None:
    """--older-than takes 90d, 12h, 2w...; anything else is a usage error naming the option."""
    assert "--older-than" in run(("prune", "--older-than", age), tmp_path, fails=True).stderr


def test_a_folder_of_pi_sessions_is_refused(tmp_path: Path) -> None:
    """A pi sessions folder is never pruned: one error line naming why."""
    folder = tmp_path / "pi" / "--home-me--"
    folder.mkdir(parents=True)
    header = {"type": "session", "version": 3, "id": "p1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/p"}
    (folder / "s.jsonl").write_text(json.dumps(header) + "\n")
    failed = run(("prune", "--repo", "pi", "--older-than", "1d", "--yes"), tmp_path, fails=True)
    assert "pi's session files are read-only" in failed.stderr and (folder / "s.jsonl").exists()


@pytest.mark.parametrize(("answer", "deleted"), [("y\n", True), ("n\n", False), ("\n", False)])
def test_on_a_terminal_prune_asks_first(tmp_path: Path, repo: dict[str, str], answer: str, deleted: bool) -> None:
    """On a terminal, prune lists the plan, asks "[y/N]", and deletes only on yes."""
    main, side = pty.openpty()
    proc = subprocess.Popen([SCRIPT, "prune", "--older-than", "90d"], cwd=tmp_path, env=_env(), stdin=side,
                            stdout=subprocess.PIPE, stderr=side, text=True)
    os.close(side)
    asked = b""
    while b"[y/N]" not in asked:
        asked += os.read(main, 1024)
    os.write(main, answer.encode())
    out, _ = proc.communicate(timeout=60)
    os.close(main)
    assert proc.returncode == 0 and repo["old"] in out and b"Delete 1 session?" in asked
    assert (f"{repo['old']}.jsonl" not in _files(tmp_path)) is deleted
    assert ("nothing was deleted" in out) is not deleted


def test_import_restores_an_archive_byte_for_byte(tmp_path: Path, repo: dict[str, str]) -> None:
    """`import ARCHIVE_DIR` brings pruned sessions back with the same lines, so verify reports the same head."""
    path = tmp_path / ".sessions" / f"{repo['old']}.jsonl"
    original = path.read_bytes()
    run(("prune", "--older-than", "90d", "--archive", "old-sessions", "--yes"), tmp_path)
    assert not path.exists()
    assert "imported 1" in run(("import", "old-sessions"), tmp_path).stdout
    assert path.read_bytes() == original
    assert "already there 1" in run(("import", f"old-sessions/{repo['old']}.jsonl.gz"), tmp_path).stdout


def test_a_folder_of_archives_is_a_read_only_repository(tmp_path: Path, repo: dict[str, str]) -> None:
    """--repo archive:DIR lists, shows and verifies the archived sessions; a write is one clear error."""
    run(("prune", "--older-than", "90d", "--archive", "old-sessions", "--yes"), tmp_path)
    listing = json.loads(run(("ls", "--repo", "archive:old-sessions", "--json"), tmp_path).stdout)
    assert [(row["id"], row["name"]) for row in listing] == [(repo["old"], "old")]
    assert "0 error(s)" in run(("verify", "--repo", "archive:old-sessions"), tmp_path).stdout
    assert "old: first question" in run(("show", "--repo", "archive:old-sessions"), tmp_path).stdout
    assert "read-only" in run(("name", "--repo", "archive:old-sessions", "renamed"), tmp_path, fails=True).stderr


def test_json_without_yes_prints_the_plan_and_deletes_nothing(tmp_path: Path, repo: dict[str, str]) -> None:
    """--json never prompts: without --yes it prints the plan, fails with a JSON error, and deletes nothing."""
    before = _files(tmp_path)
    failed = run(("prune", "--older-than", "90d", "--json"), tmp_path, fails=True)
    assert [s["id"] for s in json.loads(failed.stdout)["sessions"]] == [repo["old"]]
    assert "--yes" in json.loads(failed.stderr)["error"]["message"] and _files(tmp_path) == before


def test_content_kept_out_of_line_goes_to_the_archive_and_comes_back(tmp_path: Path) -> None:
    """A pruned session's image goes with its archive (the archive folder's blob store), leaves the repository, and
    `import` restores the log byte for byte with its image."""
    import base64

    from sessiontree import ImageContent, TextContent

    image = base64.b64encode(b"a picture " * 300).decode()
    when = datetime.now(UTC) - timedelta(days=120)
    with open_repo(tmp_path / ".sessions", clock=lambda: when) as repo:
        session = repo.create(cwd="/home/me/project", name="with a picture")
        session.append_message(UserMessage(content=[TextContent(text="look"), ImageContent(data=image, mime_type="image/png")]))
        session.close()
    path = tmp_path / ".sessions" / f"{session.id}.jsonl"
    original = path.read_bytes()
    blob_files = lambda folder: [p for p in folder.rglob("*") if p.is_file() and p.name != "lock"]  # noqa: E731
    assert len(blob_files(tmp_path / ".sessions" / ".blobs")) == 1
    run(("prune", "--older-than", "90d", "--archive", "old-sessions", "--yes"), tmp_path)
    assert not path.exists() and blob_files(tmp_path / ".sessions" / ".blobs") == []  # no other session names it
    assert "1 blob(s) match" in run(("verify", "old-sessions"), tmp_path).stdout
    assert "imported 1" in run(("import", "old-sessions"), tmp_path).stdout
    assert path.read_bytes() == original
    with open_repo(tmp_path / ".sessions") as repo:
        assert repo.open(session.id).build_context().messages[0].content[1].data == image
