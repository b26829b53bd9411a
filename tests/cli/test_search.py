"""``sessiontree search`` through the console script: hits, filters, --json, errors, and pi's folder left as it was."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import sessiontree_testkit as kit

from sessiontree import open_repo


def _sessions(folder: Path) -> None:
    repo = open_repo(folder)
    first = repo.create(cwd="/srv/a", name="cache bug", session_id="s-one")
    question = first.append_message(kit.user("Why is the cache test flaky?"), entry_id="q1")
    first.append_message(kit.assistant("The clock races the TTL."), entry_id="a1")
    first.move_to(question)
    first.append_message(kit.user("Try a fake clock then."), entry_id="q2")
    first.close()
    other = repo.create(cwd="/srv/b", session_id="s-two")
    other.append_message(kit.tool_result("c1", "bash", "clock skew detected"), entry_id="t1")
    other.close()
    repo.close()


def test_hits_name_the_session_the_entry_the_branch_and_the_command_to_open_it(cli: Any, tmp_path: Path) -> None:
    _sessions(tmp_path / ".sessions")
    out = cli("search", "clock").stdout
    assert "cache bug  a1  assistant" in out and "(on a side branch)" in out
    assert "cache bug  q2  user" in out and "(on the current branch)" in out
    assert "s-two  t1  tool" in out
    assert "The **clock** races the TTL." in out
    assert "sessiontree context s-one --leaf a1" in out
    context = cli("context", "s-one", "--leaf", "a1").stdout  # the command a hit shows does open it
    assert "The clock races the TTL." in context


def test_filters_and_json(cli: Any, cli_json: Any, tmp_path: Path) -> None:
    _sessions(tmp_path / ".sessions")
    hits = cli_json("search", "clock")["hits"]
    assert {(h["session_id"], h["entry_id"]) for h in hits} == {("s-one", "a1"), ("s-one", "q2"), ("s-two", "t1")}
    assert {h["entry_id"]: h["on_active_branch"] for h in hits}["a1"] is False
    assert hits[0]["context_command"].startswith("sessiontree context ")
    assert [h["entry_id"] for h in cli_json("search", "clock", "--role", "tool")["hits"]] == ["t1"]
    assert [h["entry_id"] for h in cli_json("search", "clock", "--cwd", "/srv/b")["hits"]] == ["t1"]
    assert [h["entry_id"] for h in cli_json("search", "fake clock", "--role", "user")["hits"]] == ["q2"]
    assert len(cli_json("search", "clock", "-n", "1")["hits"]) == 1
    assert cli_json("search", "clock", "--since", "2000-01-01", "--until", "2000-12-31")["hits"] == []
    assert len(cli_json("search", "clock*", "--since", "100000d")["hits"]) == 3
    assert "no entries match 'zebra'" in cli("search", "zebra").stdout


def test_an_entry_appended_since_is_found_by_the_next_search(cli_json: Any, tmp_path: Path) -> None:
    _sessions(tmp_path / ".sessions")
    assert cli_json("search", "capybara")["hits"] == []
    repo = open_repo(tmp_path / ".sessions")
    session = repo.open("s-two")
    session.append_message(kit.user("a capybara"), entry_id="cap")
    session.close()
    assert [h["entry_id"] for h in cli_json("search", "capybara")["hits"]] == ["cap"]
    index = tmp_path / ".sessions" / ".sessiontree-search.sqlite"
    assert stat.S_IMODE(index.stat().st_mode) == 0o600


def test_other_repositories_through_their_url(cli_json: Any, tmp_path: Path) -> None:
    source = open_repo(tmp_path / "files")
    _sessions(tmp_path / "files")
    target = open_repo(f"sqlite:///{tmp_path / 's.db'}")
    for info in source.list():
        target.copy_from(source, info.id).close()
    target.close()
    hits = cli_json("search", "clock", "--repo", f"sqlite:///{tmp_path / 's.db'}")["hits"]
    assert {h["entry_id"] for h in hits} == {"a1", "q2", "t1"}


def test_pi_folders_are_searched_without_writing_into_them(cli_json: Any, tmp_path: Path) -> None:
    pi = tmp_path / "pi-sessions" / "--srv-app--"
    pi.mkdir(parents=True)
    lines = [
        {"type": "session", "version": 3, "id": "pi-1", "timestamp": "2026-11-29T10:00:00.000Z", "cwd": "/srv/app"},
        {"type": "message", "id": "m1", "parentId": None, "timestamp": "2026-11-29T10:00:01.000Z",
         "message": {"role": "user", "content": [{"type": "text", "text": "migrate the schema"}], "timestamp": 1}},
        {"type": "message", "id": "m2", "parentId": "m1", "timestamp": "2026-11-29T10:00:02.000Z",
         "message": {"role": "assistant", "content": [{"type": "toolCall", "id": "t", "name": "bash",
                     "arguments": {"command": "alembic upgrade"}}], "provider": "p", "model": "m", "timestamp": 2}},
        {"type": "message", "id": "m3", "parentId": "m2", "timestamp": "2026-11-29T10:00:03.000Z",
         "message": {"role": "toolResult", "toolCallId": "t", "toolName": "bash",
                     "content": [{"type": "text", "text": "migration failed"}], "isError": True, "timestamp": 3}},
    ]
    (pi / "2026-11-29T10-00-00_pi-1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "pi-sessions").rglob("*"))
    cache = tmp_path / "cache"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    import subprocess

    from sessiontree_cli_runner import SCRIPT

    proc = subprocess.run([SCRIPT, "search", "migrat*", "--repo", str(tmp_path / "pi-sessions"), "--json"],
                          capture_output=True, text=True, env=env, check=True, cwd=tmp_path)
    hits = json.loads(proc.stdout)["hits"]
    assert {(h["entry_id"], h["kind"]) for h in hits} == {("m1", "user"), ("m3", "tool")}
    proc = subprocess.run([SCRIPT, "search", "alembic", "--repo", str(tmp_path / "pi-sessions"), "--json"],
                          capture_output=True, text=True, env=env, check=True, cwd=tmp_path)
    assert [h["kind"] for h in json.loads(proc.stdout)["hits"]] == ["assistant"]
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "pi-sessions").rglob("*")) == before
    [index] = (cache / "sessiontree" / "search").glob("*.sqlite")
    assert stat.S_IMODE(index.stat().st_mode) == 0o600
    assert stat.S_IMODE(index.parent.stat().st_mode) == 0o700


def test_bad_input_is_one_error_line(cli: Any, tmp_path: Path) -> None:
    _sessions(tmp_path / ".sessions")
    assert "no word to search for" in cli("search", "***", fails=True).stderr
    assert "cannot read the time" in cli("search", "clock", "--since", "yesterday", fails=True).stderr
    assert "--limit must be 1 or more" in cli("search", "clock", "-n", "0", fails=True).stderr
    cli("search", "clock", "--role", "robot", fails=True)
    cli("search", "clock", "--json", "--since", "nope", fails=True)
    assert "no session repository" in cli("search", "x", "--repo", str(tmp_path / "nowhere"), fails=True).stderr
