"""``sessiontree demo``: the README's first command, run as a user would run it."""

from __future__ import annotations

import json
from pathlib import Path

from sessiontree.domain.events import ENTRY_TYPES


def test_demo_writes_a_session_into_dot_sessions_and_shows_tree_and_context(cli, tmp_path: Path) -> None:
    """On an empty directory the demo creates ./.sessions/<id>.jsonl and prints its tree and context."""
    out = cli("demo").stdout
    files = list((tmp_path / ".sessions").glob("*.jsonl"))
    assert len(files) == 1
    assert files[0].name in out
    assert "Fix the flaky cache test" in out  # the name
    assert "[diagnosis]" in out and "[fixed]" in out  # labels on their entries
    assert "◀ leaf" in out and "⑂ 2" in out  # the leaf and the branch point
    assert "compaction" in out and "branch_summary" in out
    assert "17 messages" in out  # the context heading


def test_demo_twice_makes_two_sessions_with_the_same_content(cli, cli_json) -> None:
    """Running the demo again adds a second session (nothing fails or is overwritten), with the same ids."""
    first = cli_json("demo")
    second = cli_json("demo")
    assert first["session_id"] != second["session_id"]
    assert first["ids"] == second["ids"] and first["leaf_id"] == second["leaf_id"]
    listed = cli_json("ls")
    assert [s["id"] for s in listed] == [second["session_id"], first["session_id"]]


def test_demo_session_has_every_entry_type_and_two_branches(demo, cli_json) -> None:
    """The sample holds all eleven entry types, usage on replies, and two branch tips."""
    stats = cli_json("stats")
    assert set(stats["whole"]["entries_by_type"]) == set(ENTRY_TYPES)
    assert stats["whole"]["total_tokens"] > 0 and stats["whole"]["cost_total"] > 0
    assert len(stats["branches"]) == 2
    assert set(stats["whole"]["by_model"]) == {"anthropic/claude-sonnet-4-5", "openai/gpt-5-mini"}


def test_demo_context_uses_the_compaction_and_the_branch_summary(demo, cli_json) -> None:
    """The demo's current context starts with the compaction summary, then the branch summary."""
    context = cli_json("context")
    roles = [m["role"] for m in context["messages"]]
    assert roles[:3] == ["compaction_summary", "branch_summary", "user"]
    assert "custom" in roles and "tool_result" in roles
    assert context["model"] == {"provider": "anthropic", "model_id": "claude-sonnet-4-5"}
    assert context["thinking_level"] == "medium"


def test_demo_honours_repo_option(cli, tmp_path: Path) -> None:
    """``--repo DIR`` puts the demo session in that directory instead of ./.sessions."""
    report = json.loads(cli("demo", "--repo", "elsewhere", "--json").stdout)
    assert (tmp_path / "elsewhere" / f"{report['session_id']}.jsonl").is_file()
    assert not (tmp_path / ".sessions").exists()
