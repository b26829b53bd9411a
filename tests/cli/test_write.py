"""``label``, ``name``, ``move``, ``fork`` and ``compact``: writes through the session API."""

from __future__ import annotations


def _entries(cli_json) -> int:
    return sum(cli_json("stats")["whole"]["entries_by_type"].values())


def test_label_sets_and_clears_a_label(demo, cli, cli_json) -> None:
    """A label shows on its entry in ``show``; ``--clear`` removes it."""
    target = demo["ids"]["real_fix"]
    cli("label", target, "approach-A")
    row = next(r for r in cli_json("show")["rows"] if r["id"] == target)
    assert row["label"] == "approach-A"
    cli("label", target, "--clear")
    row = next(r for r in cli_json("show")["rows"] if r["id"] == target)
    assert row["label"] is None


def test_label_of_an_unknown_entry_fails_and_appends_nothing(demo, cli, cli_json) -> None:
    """An unknown target is ``not_found``; the session is unchanged."""
    before = _entries(cli_json)
    proc = cli("label", "nope1234", "x", fails=True)
    assert "not_found" in proc.stderr and "nope1234" in proc.stderr
    assert _entries(cli_json) == before


def test_name_prints_sets_and_clears(demo, cli, cli_json) -> None:
    """``name`` prints the name; with text it renames; ``--clear`` clears."""
    assert cli("name").stdout.strip() == "Fix the flaky cache test"
    cli("name", "Cache flake, fixed")
    assert cli_json("name")["name"] == "Cache flake, fixed"
    cli("name", "--clear")
    assert cli_json("name")["name"] is None


def test_move_changes_the_leaf_and_can_summarise_the_branch_left(demo, cli_json) -> None:
    """``move`` puts the leaf on an entry; with ``--summary`` a branch summary becomes the leaf."""
    target = demo["ids"]["quick_fix_end"]
    moved = cli_json("move", target)
    assert moved["leaf_id"] == target and moved["branch_summary_id"] is None
    assert cli_json("context")["model"]["provider"] == "openai"
    back = cli_json("move", demo["ids"]["fixed"], "--summary", "Looked at B again.")
    assert back["leaf_id"] == back["branch_summary_id"]
    roles = [m["role"] for m in cli_json("context")["messages"]]
    assert roles[-1] == "branch_summary"


def test_move_to_an_unknown_entry_fails(demo, cli) -> None:
    """Moving to an id that is not in the session is one ``not_found`` line."""
    assert "not_found" in cli("move", "feedface", fails=True).stderr


def test_fork_before_a_user_message_makes_a_new_session(demo, cli_json) -> None:
    """``fork --entry USER --position before`` copies the path up to that message's parent."""
    fork = cli_json("fork", demo["session_id"], "--entry", demo["ids"]["real_fix"], "--position", "before")
    assert fork["session_id"] != demo["session_id"]
    assert fork["parent_session"] and demo["session_id"] in fork["parent_session"]
    sessions = cli_json("ls")
    assert {s["id"] for s in sessions} == {demo["session_id"], fork["session_id"]}
    assert cli_json("context", fork["session_id"])["messages"][-1]["role"] == "branch_summary"


def test_fork_before_a_non_user_entry_is_an_invalid_fork_target(demo, cli) -> None:
    """``before`` needs a user message: anything else is ``invalid_fork_target``."""
    proc = cli("fork", "--entry", demo["ids"]["diagnosis"], "--position", "before", fails=True)
    assert "invalid_fork_target" in proc.stderr


def test_compact_with_the_offline_summariser(demo, cli_json) -> None:
    """``compact --dry-run`` plans without writing; ``compact`` appends a compaction entry."""
    plan = cli_json("compact", "--keep-tokens", "40", "--dry-run")
    assert plan["compacted"] is False and plan["summarized_entries"] > 0
    done = cli_json("compact", "--keep-tokens", "40")
    assert done["compacted"] is True
    assert cli_json("context")["messages"][0]["role"] == "compaction_summary"
    assert cli_json("stats")["whole"]["entries_by_type"]["compaction"] == 2


def test_fork_of_a_tampered_session_is_refused_unless_salvaged(demo, cli, cli_json, tmp_path) -> None:
    """A session that fails verify is not forked (the fork would seal the damage into a valid
    chain); ``--salvage`` forks what can be read and the fork names the lines it skipped."""
    path = tmp_path / ".sessions" / f"{demo['session_id']}.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"timestamp":"', b'"timestamp":"1', 1)
    path.write_bytes(b"\n".join(lines))
    proc = cli("fork", demo["session_id"], fails=True)
    assert "corrupt" in proc.stderr and "does not verify" in proc.stderr
    fork = cli_json("fork", demo["session_id"], "--salvage")
    assert 3 in fork["source"]["skipped"]
    assert cli_json("verify", fork["location"])["ok"]
