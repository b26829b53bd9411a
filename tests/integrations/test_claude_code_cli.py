"""``sessiontree import --format claude-code`` and ``export --format claude-code``, through the console script: a Claude
Code transcript file goes in and comes back out deep-equal, on JSONL, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import claude_code_kit as kit
import pytest
import sessiontree_pg as pg

from sessiontree import open_repo
from sessiontree.integrations.claude_agent import SessionTreeSessionStore
from sessiontree.integrations.claude_code_entries import session_id_for

CLI = str(Path(sys.executable).with_name("sessiontree"))
SID = session_id_for({"project_key": kit.PROJECT, "session_id": kit.SESSION})


def cli(repo: str, *args: str, fails: bool = False) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([CLI, "--repo", repo, *args], capture_output=True, text=True)
    assert proc.returncode == (1 if fails else 0), proc.stderr
    return proc


def write(path: Path, lines: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture(params=["jsonl", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: Any, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        with pg.temp_schema("ccli") as schema:
            yield pg.url(schema)
        return
    yield {"jsonl": str(tmp_path / "sessions"), "sqlite": f"sqlite:///{tmp_path / 's.db'}"}[request.param]


def test_a_transcript_goes_in_and_comes_back_out_deep_equal(url, tmp_path):
    lines = kit.transcript()
    source = write(tmp_path / "projects" / kit.PROJECT / f"{kit.SESSION}.jsonl", lines)
    out = json.loads(cli(url, "import", "--format", "claude-code", str(source), "--json").stdout)
    assert [(i["status"], i["session_id"], i["dialect"]) for i in out] == [("imported", SID, "claude-code")]
    exported = cli(url, "export", "--format", "claude-code", "-s", SID).stdout
    assert [json.loads(line) for line in exported.splitlines()] == lines
    # the same file again is already there; the file grown by a turn gets the new lines only
    assert json.loads(cli(url, "import", "--format", "claude-code", str(source), "--json").stdout)[0]["status"] == "already_there"
    more = [*lines, {"type": "user", "uuid": "u3", "parentUuid": "a4", "message": {"role": "user", "content": "Thanks"}}]
    write(source, more)
    cli(url, "import", "--format", "claude-code", str(source))
    exported = cli(url, "export", "--format", "claude-code", "-s", SID).stdout
    assert [json.loads(line) for line in exported.splitlines()] == more
    # the SDK store sees the imported transcript as the one it would have mirrored
    repo = open_repo(url)
    try:
        key = {"project_key": kit.PROJECT, "session_id": kit.SESSION}
        assert asyncio.run(SessionTreeSessionStore(repo).load(key)) == more
    finally:
        repo.close()
    assert "0 error(s)" in cli(url, "verify").stdout
    context = json.loads(cli(url, "context", SID, "--json").stdout)
    assert [m["role"] for m in context["messages"]] == ["user", "assistant", "user"]


def test_a_projects_folder_is_imported_with_its_subagent_transcripts(tmp_path):
    """``import --format claude-code ~/.claude/projects``: each main transcript, and each subagent's under its session."""
    url = str(tmp_path / "sessions")
    projects = tmp_path / "projects"
    write(projects / kit.PROJECT / f"{kit.SESSION}.jsonl", kit.transcript())
    sub = [{"type": "user", "uuid": "x1", "parentUuid": None, "isSidechain": True,
            "message": {"role": "user", "content": "Find the forecast"}}]
    write(projects / kit.PROJECT / kit.SESSION / "subagents" / "agent-a1.jsonl", sub)
    out = json.loads(cli(url, "import", "--format", "claude-code", str(projects), "--json").stdout)
    assert sorted(i["status"] for i in out) == ["imported", "imported"]
    store = SessionTreeSessionStore(open_repo(url))
    try:
        key = {"project_key": kit.PROJECT, "session_id": kit.SESSION}
        assert asyncio.run(store.list_subkeys(key)) == ["subagents/agent-a1"]
        assert asyncio.run(store.load({**key, "subpath": "subagents/agent-a1"})) == sub
        assert [s["session_id"] for s in asyncio.run(store.list_sessions(kit.PROJECT))] == [kit.SESSION]
    finally:
        store.close()


def test_a_transcript_that_differs_a_bad_line_and_a_session_of_no_transcript_are_refused(tmp_path):
    url = str(tmp_path / "sessions")
    source = write(tmp_path / "p" / f"{kit.SESSION}.jsonl", kit.transcript())
    cli(url, "import", "--format", "claude-code", str(source))
    other = write(tmp_path / "q" / "p" / f"{kit.SESSION}.jsonl", kit.transcript()[1:])
    proc = cli(url, "import", "--format", "claude-code", str(other), fails=True)
    assert "already_exists" in proc.stderr and "with other lines" in proc.stderr
    bad = tmp_path / "p" / "bad.jsonl"
    bad.write_text('{"type": "user"}\n{not json\n')
    proc = cli(url, "import", "--format", "claude-code", str(bad), fails=True)
    assert "corrupt" in proc.stderr and "bad.jsonl:2" in proc.stderr
    assert not open_repo(url).exists(session_id_for({"project_key": "p", "session_id": "bad"}))
    repo = open_repo(url)
    plain = repo.create("", session_id="plain")
    plain.close()
    repo.close()
    proc = cli(url, "export", "--format", "claude-code", "-s", "plain", fails=True)
    assert "holds no Claude Code transcript lines" in proc.stderr
