"""``sessiontree replay``: the session as it was, and stepping through its events."""

from __future__ import annotations


def test_replay_to_n_shows_the_session_after_n_events(demo, cli, cli_json) -> None:
    """``--to N`` is the view after N events: N-1 entries, its leaf and its context."""
    view = cli_json("replay", "--to", "10")
    assert view["version"] == 10 and view["entries"] == 9
    assert [m["role"] for m in view["messages"]] == ["user", "assistant", "tool_result", "assistant", "tool_result", "assistant"]
    assert view["leaf_id"] == demo["ids"]["diagnosis"]
    out = cli("replay", "--to", "10").stdout
    assert "as of event 10" in out and demo["ids"]["quick_fix"] not in out


def test_replay_at_a_time_matches_the_event_then(demo, cli_json) -> None:
    """``--at TIME`` with an entry's own timestamp shows the session right after that entry."""
    steps = cli_json("replay", "--step")["steps"]
    tenth = steps[9]
    view = cli_json("replay", "--at", tenth["timestamp"])
    assert view["version"] == 10 and view["leaf_id"] == tenth["leaf_after"]


def test_replay_steps_show_leaf_and_context_changes(demo, cli, cli_json) -> None:
    """Stepping lists every event with its leaf and context change; a leaf move and a compaction shrink it."""
    steps = cli_json("replay")["steps"]
    assert len(steps) == 40 and steps[0]["type"] == "session"
    by_type = {s["type"]: s for s in steps}
    move = by_type["leaf"]
    assert move["leaf_after"] == demo["ids"]["diagnosis"] and move["removed"] == 6
    compaction = by_type["compaction"]
    assert compaction["removed"] > 0 and compaction["added"][0] == "compaction_summary"
    assert steps[-1]["leaf_after"] == demo["leaf_id"]
    user = next(s for s in steps if s["id"] == demo["ids"]["first_user"])
    assert user["added"] == ["user"] and user["removed"] == 0
    out = cli("replay", "--step", "--from", "20", "--to", "22").stdout
    assert f"→ {demo['ids']['diagnosis']}" in out and "-6 = 6" in out


def test_replay_out_of_range_or_bad_time_fails_cleanly(demo, cli) -> None:
    """A version past the end, or a time that is not ISO 8601, is one error line."""
    assert "no version 999" in cli("replay", "--to", "999", fails=True).stderr
    assert "ISO 8601" in cli("replay", "--at", "yesterday", fails=True).stderr
    assert "did not exist yet" in cli("replay", "--at", "2000-01-01T00:00:00Z", fails=True).stderr
