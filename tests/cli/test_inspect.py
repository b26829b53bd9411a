"""``ls``, ``show``, ``context`` and ``stats`` on the demo session."""

from __future__ import annotations

from pathlib import Path

from sessiontree import JsonlSessionStorage, Session, TextContent, UserMessage


def test_ls_lists_sessions_with_name_cwd_count_first_message_and_time(demo, cli, cli_json, tmp_path: Path) -> None:
    """``ls --json`` gives what a session picker shows; the table shows the same."""
    (info,) = cli_json("ls")
    assert info["id"] == demo["session_id"]
    assert info["name"] == "Fix the flaky cache test"
    assert Path(info["cwd"]).is_absolute()
    assert info["message_count"] == 26
    assert info["first_message"].startswith("tests/test_cache.py::test_entry_expires fails")
    assert info["modified"].endswith("Z")
    assert demo["session_id"] in cli("ls").stdout


def test_ls_filters_by_name_and_since_and_refuses_a_bad_time(demo, cli, cli_json) -> None:
    """``ls --name`` matches part of the name, ignoring case; ``--since`` keeps sessions modified since then."""
    assert [i["id"] for i in cli_json("ls", "--name", "FLAKY", "--limit", "1")] == [demo["session_id"]]
    assert cli_json("ls", "--name", "nothing like it") == []
    assert cli_json("ls", "--since", "2999-01-01T00:00:00Z") == []
    assert len(cli_json("ls", "--since", "2000-01-01T00:00:00Z")) == 1
    assert "not an ISO 8601 time" in cli("ls", "--since", "yesterday", fails=True).stderr


def test_show_marks_leaf_labels_and_branch_points(demo, cli) -> None:
    """The default view has every entry but labels, with the leaf, labels and the fork marked."""
    out = cli("show").stdout
    ids = demo["ids"]
    leaf_row = next(line for line in out.splitlines() if demo["leaf_id"] in line and "session_info" in line)
    assert "◀ leaf" in leaf_row
    diagnosis = next(line for line in out.splitlines() if ids["diagnosis"] in line)
    assert "[diagnosis]" in diagnosis and "⑂ 2" in diagnosis
    assert "label:" not in out  # label entries are hidden by default


def test_show_filters(demo, cli_json) -> None:
    """``--filter user`` keeps user messages, ``labelled`` labelled entries, ``all`` adds label entries."""
    users = cli_json("show", "--filter", "user")["rows"]
    assert {r["entry"]["message"]["role"] for r in users} == {"user"} and len(users) == 4
    labelled = cli_json("show", "--filter", "labelled")["rows"]
    assert sorted(r["label"] for r in labelled) == ["approach-B", "diagnosis", "fixed"]
    everything = cli_json("show", "--filter", "all")["rows"]
    default = cli_json("show")["rows"]
    assert len(everything) - len(default) == 3  # the three label entries
    no_tools = cli_json("show", "--filter", "no-tools")["rows"]
    assert all(r["entry"].get("message", {}).get("role") != "tool_result" for r in no_tools)


def test_show_window_and_depth_limit_big_views(demo, cli, cli_json) -> None:
    """``--window N`` keeps N rows around the leaf; ``--depth 0`` folds the side branch."""
    rows = cli_json("show", "--window", "5")["rows"]
    assert len(rows) == 5 and rows[-1]["is_leaf"]
    out = cli("show", "--depth", "0").stdout
    assert "1 more branch" in out
    assert demo["ids"]["quick_fix"] not in out  # the side branch is folded away
    assert demo["ids"]["real_fix"] in out  # the current branch is always shown


def test_context_of_another_leaf_and_exact_json_payload(demo, cli, cli_json) -> None:
    """``--leaf`` gives the abandoned branch's context; ``--json`` the wire-form messages."""
    side = cli_json("context", "--leaf", demo["ids"]["quick_fix_end"])
    assert side["model"] == {"provider": "openai", "model_id": "gpt-5-mini"}
    assert [m["role"] for m in side["messages"]][-1] == "assistant"
    assert "compaction_summary" not in [m["role"] for m in side["messages"]]
    assert side["estimated_tokens"] > 0
    text = cli("context").stdout
    assert "#1 compaction_summary" in text and "tokens" in text


def test_context_with_an_unknown_leaf_fails_with_one_line(demo, cli) -> None:
    """An unknown ``--leaf`` id is a ``not_found`` error naming the id."""
    proc = cli("context", "--leaf", "deadbeef", fails=True)
    assert "not_found" in proc.stderr and "deadbeef" in proc.stderr


def test_stats_totals_per_branch_and_per_model(demo, cli, cli_json) -> None:
    """Whole-session totals add up over models plus summarisation usage; the current branch is marked."""
    stats = cli_json("stats")
    whole = stats["whole"]
    by_model = sum(m["total_tokens"] for m in whole["by_model"].values())
    assert whole["total_tokens"] > by_model  # compaction and branch summary usage count too
    current = [b for b in stats["branches"] if b["current"]]
    assert len(current) == 1 and current[0]["tip"] == demo["leaf_id"]
    out = cli("stats").stdout
    assert "anthropic/claude-sonnet-4-5" in out and "entries by type" in out


def test_session_text_is_shown_as_written_not_as_markup(cli, tmp_path: Path) -> None:
    """A message containing rich markup is printed verbatim from a session file path."""
    path = tmp_path / "s.jsonl"
    with Session(JsonlSessionStorage.create(path, cwd="/x")) as session:
        session.append_message(UserMessage(content=[TextContent(text="use [bold]this[/bold] <b>")], timestamp=1))
    assert "use [bold]this[/bold] <b>" in cli("show", str(path)).stdout
    assert "use [bold]this[/bold] <b>" in cli("context", str(path)).stdout


def test_show_limits_a_huge_tree_to_a_window_around_the_leaf_by_default(cli, cli_json, tmp_path: Path) -> None:
    """Over 1000 rows, ``show`` prints the 1000 around the leaf and counts the rest; ``--window 0`` shows all."""
    path = tmp_path / "long.jsonl"
    with Session(JsonlSessionStorage.create(path, cwd="/x")) as session:
        for i in range(1200):
            session.append_message(UserMessage(content=f"turn {i}", timestamp=i))
    out = cli("show", str(path)).stdout
    assert "… 200 earlier rows" in out and "turn 1199" in out and "turn 199:" not in out
    assert "turn 0" in cli("show", str(path), "--window", "0").stdout
    assert len(cli_json("show", str(path))["rows"]) == 1200  # --json has every row unless --window


def test_context_last_shows_the_tail_but_counts_everything(demo, cli) -> None:
    """``context --last 2`` prints the last two messages and says how many came before."""
    out = cli("context", "--last", "2").stdout
    assert "17 messages" in out and "… 15 earlier messages" in out
    assert "#16 custom" in out and "#17 assistant" in out and "#1 " not in out


def test_commands_work_on_a_sqlite_repository(cli, cli_json, tmp_path: Path) -> None:
    """``--repo sqlite:///file.db`` is the same experience: demo, ls, context, verify."""
    repo = "sqlite:///sessions.db"
    report = cli_json("demo", "--repo", repo)
    assert (tmp_path / "sessions.db").is_file()
    assert [s["id"] for s in cli_json("ls", "--repo", repo)] == [report["session_id"]]
    assert cli_json("context", "--repo", repo)["messages"][0]["role"] == "compaction_summary"
    assert cli_json("verify", "--repo", repo)["ok"] is True


def test_reading_a_missing_sqlite_repository_creates_nothing(cli, tmp_path: Path) -> None:
    """A read command on a SQLite file that does not exist fails and leaves no empty database."""
    assert "no SQLite session database" in cli("ls", "--repo", "sqlite:///absent.db", fails=True).stderr
    assert not (tmp_path / "absent.db").exists()
