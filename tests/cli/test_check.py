"""``sessiontree check`` and ``context --repair``, through the console script: problems listed with exit 1, a repair
that appends only under the leaf, and the repaired context shown."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from sessiontree_cli_runner import SCRIPT, run

from sessiontree import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage, open_repo


def _check(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SESSIONTREE_REPO"} | {"COLUMNS": "200", "PYTHONWARNINGS": "ignore"}
    return subprocess.run([SCRIPT, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


def _session(cwd: Path, *, late: bool = False) -> dict[str, str]:
    """A session named 'cut' whose last turn asked for two tools and got one result (with ``late``: then a user
    message, and the missing result after it)."""
    with open_repo(str(cwd / ".sessions")) as repo:
        session = repo.create(cwd=str(cwd), name="cut")
        ids = {"user": session.append_message(UserMessage("weather and time?"))}
        ids["call"] = session.append_message(AssistantMessage(
            [ToolCall(id="w1", name="weather"), ToolCall(id="t1", name="clock")], stop_reason="toolUse"))
        ids["w1"] = session.append_message(ToolResultMessage(tool_call_id="w1", tool_name="weather",
                                                             content=[TextContent("sunny")]))
        if late:
            ids["again"] = session.append_message(UserMessage("hello?"))
            ids["t1"] = session.append_message(ToolResultMessage(tool_call_id="t1", tool_name="clock",
                                                                 content=[TextContent("noon")]))
        return ids


def test_check_lists_the_problems_and_exits_1(tmp_path: Path) -> None:
    """A dangling call: one line per problem and a hint, exit 1; --json gives kind, entry, call id and message."""
    ids = _session(tmp_path)
    proc = _check(tmp_path, "check", "cut")
    assert proc.returncode == 1 and proc.stderr == ""
    assert "missing_result" in proc.stdout and ids["call"] in proc.stdout and "context --repair" in proc.stdout
    data = json.loads(_check(tmp_path, "--json", "check", "cut").stdout)
    assert data["problems"] == [{"kind": "missing_result", "entry_id": ids["call"], "tool_call_id": "t1",
                                 "message": f"tool call 't1' (clock) in entry {ids['call']} has no result before the "
                                            "end of the branch"}]
    assert _check(tmp_path, "check", "cut", "--leaf", ids["user"]).returncode == 0


def test_check_repair_appends_the_missing_result_and_then_passes(tmp_path: Path) -> None:
    """--repair appends one error result under the leaf; a second check exits 0; nothing before it changed."""
    _session(tmp_path)
    before = next((tmp_path / ".sessions").glob("*.jsonl")).read_bytes()
    data = json.loads(_check(tmp_path, "--json", "check", "cut", "--repair").stdout)
    assert len(data["appended"]) == 1 and data["problems_left"] == []
    after = next((tmp_path / ".sessions").glob("*.jsonl")).read_bytes()
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1
    assert "every tool call has its result" in run(("check", "cut"), tmp_path).stdout


def test_check_repair_leaves_history_alone_and_says_so(tmp_path: Path) -> None:
    """A result after the next user message: --repair appends nothing, explains, and still exits 1."""
    ids = _session(tmp_path, late=True)
    proc = _check(tmp_path, "check", "cut", "--repair")
    assert proc.returncode == 1
    assert "result_out_of_place" in proc.stdout and ids["t1"] in proc.stdout
    assert "appended 0 result(s)" in proc.stdout and "history an append cannot change" in proc.stdout
    refused = run(("check", "cut", "--repair", "--leaf", ids["user"]), tmp_path, fails=True)
    assert "--repair appends under the current leaf" in refused.stderr


def test_context_repair_shows_the_repaired_context(tmp_path: Path) -> None:
    """context --repair: the result moved next to its call, with the problems it repaired listed first."""
    _session(tmp_path, late=True)
    plain = json.loads(run(("--json", "context", "cut"), tmp_path).stdout)["messages"]
    repaired = json.loads(run(("--json", "context", "cut", "--repair"), tmp_path).stdout)["messages"]
    assert [m["role"] for m in plain] == ["user", "assistant", "tool_result", "user", "tool_result"]
    assert [m["role"] for m in repaired] == ["user", "assistant", "tool_result", "tool_result", "user"]
    text = run(("context", "cut", "--repair"), tmp_path).stdout
    assert "repaired: 1 tool-call problem(s)" in text and "result_out_of_place" in text
