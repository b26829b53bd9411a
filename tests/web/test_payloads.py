"""What the JSON endpoints answer, against what the library and the command line say about the same session."""

from __future__ import annotations

import json

from sessiontree_cli_runner import run

from sessiontree import JsonlSessionRepo, UserMessage


def _get(server, path):
    status, body, _ = server.get(path)
    assert status == 200, (path, body[:300])
    return json.loads(body)


def test_the_context_endpoint_is_the_command_lines_context(serve, demo):
    server = serve(demo["repo"])
    sid, cwd = demo["session_id"], demo["repo"].parent
    for leaf in (demo["ids"]["quick_fix_end"], demo["ids"]["compaction"], "approach-B"):
        got = _get(server, f"/api/sessions/{sid}/context?entry={leaf}")
        expected = json.loads(run(("context", "--repo", str(demo["repo"]), "--leaf", leaf, "--json"), cwd).stdout)
        assert got == expected
    at = _get(server, f"/api/sessions/{sid}/context?version=12")  # time travel: the context after 12 events
    then = json.loads(run(("replay", "--repo", str(demo["repo"]), "--to", "12", "--json"), cwd).stdout)
    assert at["version"] == 12 and at["messages"] == then["messages"] and at["leaf_id"] == then["leaf_id"]


def test_replay_steps_say_what_each_event_changed(serve, demo):
    server = serve(demo["repo"])
    sid = demo["session_id"]
    cli = json.loads(run(("replay", "--repo", str(demo["repo"]), "--step", "--json"), demo["repo"].parent).stdout)["steps"]
    for step in cli:
        got = _get(server, f"/api/sessions/{sid}/replay/{step['version']}")
        assert got["event"]["id"] == step["id"] and got["event"]["type"] == step["type"]
        assert (got["leaf_before"], got["leaf_after"]) == (step["leaf_before"], step["leaf_after"])
        assert len(got["removed"]) == step["removed"] and [m["role"] for m in got["added"]] == step["added"]
        assert got["context_size"] == step["context_size"]


def test_diff_finds_where_two_branches_part(serve, demo):
    server = serve(demo["repo"])
    ids = demo["ids"]
    d = _get(server, f"/api/sessions/{demo['session_id']}/diff?a={ids['quick_fix_end']}&b={ids['done']}")
    assert d["diverge_at"] == ids["diagnosis"]
    assert d["a"]["only"][0]["id"] != d["b"]["only"][0]["id"]
    assert d["a"]["only"][-1]["id"] == ids["quick_fix_end"] and d["b"]["only"][-1]["id"] == ids["done"]
    assert "model" in d["settings_differ"]  # B ran on gpt-5-mini, A back on claude
    assert d["shared_messages"] == 0  # the compaction replaced the turns they share by its summary
    before = _get(server, f"/api/sessions/{demo['session_id']}/diff?a={ids['quick_fix_end']}&b={ids['real_fix']}")
    assert before["shared_messages"] == 6 and before["b"]["context_rest"][0]["role"] == "branch_summary"
    same = _get(server, f"/api/sessions/{demo['session_id']}/diff?a={ids['done']}&b={ids['done']}")
    assert same["a"]["only_count"] == same["b"]["only_count"] == 0 and same["settings_differ"] == []


def test_a_long_context_comes_a_page_at_a_time(serve, tmp_path):
    with JsonlSessionRepo(tmp_path / "r") as repo:
        session = repo.create(cwd="/w")
        for i in range(250):
            session.append_message(UserMessage(content=f"message {i + 1}"))
        session.close()
    server = serve(tmp_path / "r")
    page = _get(server, f"/api/sessions/{session.id}/context?view=page")
    assert page["total_messages"] == 250 and page["start"] == 151
    assert [m["index"] for m in page["messages"]] == list(range(151, 251))
    first = _get(server, f"/api/sessions/{session.id}/context?view=page&start=1&count=10")
    assert [m["blocks"][0]["text"] for m in first["messages"]] == [f"message {i}" for i in range(1, 11)]
    status, body, _ = server.get(f"/sessions/{session.id}/context?start=101")
    assert status == 200 and b"messages 101\xe2\x80\x93200 of 250" in body


def test_a_long_branch_charts_at_most_400_bars_and_sums_them(serve, tmp_path):
    """The usage page's calls chart: 1,000 model calls share 400 bars at most, their totals kept."""
    import re as _re

    from sessiontree import AssistantMessage, Cost, TextContent, Usage

    with JsonlSessionRepo(tmp_path / "r") as repo:
        session = repo.create(cwd="/w")
        for i in range(1000):
            session.append_message(UserMessage(content=f"q{i}"))
            session.append_message(AssistantMessage([TextContent(f"a{i}")], model="m",
                                                    usage=Usage(input=7, output=3, total_tokens=10, cost=Cost(total=0.001))))
        session.close()
    server = serve(tmp_path / "r")
    usage = _get(server, f"/api/sessions/{session.id}/usage")
    assert len(usage["calls"]) == 1000 and usage["tokens"] == 10_000 and round(usage["cost"], 6) == 1.0
    status, body, _ = server.get(f"/sessions/{session.id}/usage")
    page = body.decode()
    bars = page.count('class="hit"')
    assert status == 200 and 0 < bars <= 400 and "calls a bar" in page
    assert "<b>10,000</b> tokens" in page and "<b>$1.0000</b> cost" in page
    assert len(_re.findall(r'class="bar input"', page)) == bars
