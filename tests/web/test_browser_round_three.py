"""The viewer after issue 37's round (items 9-14) and issue 32's markup attack, in headless chromium, with
screenshots in test-artefacts/web/: branches drawn as branches, folding, the whole entry, a diff that picks its
branches, the usage charts, true numbers and no 404, and pi's sessions read-only."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

pytestmark = pytest.mark.browser

REFRESH = '"><meta http-equiv="refresh" content="0;url=about:blank">'
IMG = '"><img src=x id=injected onerror="document.title=\'pwned\'">'


def _no_404s(page: Any) -> list[str]:
    """Collects every response of 400 or more the page gets (static files, the favicon, JSON)."""
    bad: list[str] = []
    page.on("response", lambda r: bad.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    return bad


def _entry_line(pi_id: str, parent: str, kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, "id": pi_id, "parentId": parent, "timestamp": "2026-12-03T10:00:00.000Z", **fields})


def test_markup_in_an_entry_type_or_role_is_shown_as_typed(page, serve, pi_repo, shot):
    """Issue 32, item 9: a file's entry type and a message's role holding markup. Before the fix tree.js put them
    into a class attribute unescaped: the meta refresh redirected the page, the image ran its handler."""
    lines = pi_repo["file"].read_text().splitlines()
    last = json.loads(lines[-1])["id"]
    lines.append(_entry_line("bad00001", last, "message", message={"role": "x" + IMG, "content": "odd role " + IMG}))
    lines.append(_entry_line("bad00002", "bad00001", "custom_x" + REFRESH, data=REFRESH))
    lines.append(_entry_line("bad00003", "bad00002", "message", message={"role": "user", "content": "after " + REFRESH}))
    pi_repo["file"].write_text("\n".join(lines) + "\n")
    server = serve(pi_repo["repo"])
    sid = pi_repo["session_id"]
    page.goto(server.url)
    page.goto(server.base + f"/sessions/{sid}?filter=all")
    page.locator('.row[data-id="bad00003"]').wait_for()
    for entry_id in ("bad00001", "bad00002"):
        page.locator(f'.row[data-id="{entry_id}"]').click()
        page.locator("#entry h2").filter(has_text=entry_id).wait_for()
        page.locator("#entry #parts").wait_for()
    page.wait_for_timeout(600)  # a refresh of 0 s would have fired by now
    assert page.url.startswith(server.base + f"/sessions/{sid}")
    assert page.locator("meta[http-equiv]").count() == 0 and page.locator("#injected").count() == 0
    assert page.title() != "pwned"
    assert "custom_x" in page.locator('.row[data-id="bad00002"]').inner_text()
    assert 'http-equiv="refresh"' in page.locator("#entry").inner_text()  # shown as typed
    shot(page, "markup-as-text")
    for where in (f"/sessions/{sid}/context?entry=bad00003", f"/sessions/{sid}/diff?b=bad00003",
                  f"/sessions/{sid}/replay", f"/sessions/{sid}/usage"):
        page.goto(server.base + where)
        page.wait_for_timeout(300)
        assert page.locator("meta[http-equiv]").count() == 0 and page.locator("#injected").count() == 0, where


def test_branches_are_drawn_with_lines_and_fold_with_their_size_and_summary(page, serve, demo, shot):
    """Item 9: the two side branches after the diagnosis get ├ and └ lines, the branch point an SVG icon (drawn:
    it has a size), and folding the abandoned branch shows its row count and the summary written when it was left."""
    server = serve(demo["repo"])
    sid, ids = demo["session_id"], demo["ids"]
    page.goto(server.url)
    page.goto(server.base + f"/sessions/{sid}")
    fork = page.locator(f'.row[data-id="{ids["diagnosis"]}"] .fork svg')
    box = fork.bounding_box()
    assert box is not None and box["width"] >= 10 and box["height"] >= 10
    tree = json.loads(page.locator("#tree-data").text_content())
    starts = [r for r in tree["rows"] if r["branch_start"]]
    assert [r["guides"] for r in starts] == ["├", "└"]  # two branches, drawn apart
    first_b = starts[0]["id"]
    row = page.locator(f'.row[data-id="{first_b}"]')
    assert row.locator("svg.guides path").count() == 1
    inside = [r["id"] for r in tree["rows"] if r["guides"] == "│"]
    assert ids["quick_fix_end"] in inside
    shot(page, "lines")
    row.locator("button.fold").click()
    folded = page.locator(f'.row[data-id="{first_b}"] .folded')
    folded.wait_for()
    assert f"+{len(inside)} rows folded" in folded.inner_text()
    assert "summary: Tried B" in folded.inner_text()
    assert page.locator(f'.row[data-id="{ids["quick_fix_end"]}"]').count() == 0
    assert "fold=" in page.url
    shot(page, "folded")
    page.reload()  # the folding is in the address
    page.locator(f'.row[data-id="{first_b}"] .folded').wait_for()
    page.locator(f'.row[data-id="{first_b}"] button.fold').click()
    page.locator(f'.row[data-id="{ids["quick_fix_end"]}"]').wait_for()


def test_clicking_an_entry_shows_it_whole(page, serve, tmp_path, shot):
    """Item 10: text, tool arguments and results, usage and cost, the stored entry; long parts clipped with
    "show all", which loads the whole part; a link to the context at that entry."""
    from sessiontree import AssistantMessage, Cost, JsonlSessionRepo, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage

    output = "\n".join(f"line {i}: " + "y" * 30 for i in range(500))
    with JsonlSessionRepo(tmp_path / "r") as repo:
        session = repo.create(cwd="/w")
        session.append_message(UserMessage(content="list the files"))
        call = session.append_message(AssistantMessage(
            [TextContent("Running ls."), ToolCall(id="c1", name="bash", arguments={"command": "ls -la", "timeout": 30})],
            provider="anthropic", model="claude-x",
            usage=Usage(input=1200, output=80, cache_read=300, total_tokens=1580, cost=Cost(input=0.0036, output=0.0012, total=0.0048))))
        result = session.append_message(ToolResultMessage(tool_call_id="c1", tool_name="bash", content=[TextContent(output)]))
        session.close()
    server = serve(tmp_path / "r")
    page.goto(server.url)
    page.goto(server.base + f"/sessions/{session.id}")
    page.locator(f'.row[data-id="{call}"]').click()
    panel = page.locator("#entry")
    panel.locator("dl.facts").filter(has_text="claude-x").wait_for()
    text = panel.inner_text()
    assert "Running ls." in text and '"command": "ls -la"' in text and '"timeout": 30' in text
    assert "in 1,200" in text and "out 80" in text and "total 1,580" in text and "$0.0048" in text
    shot(page, "assistant")
    page.locator(f'.row[data-id="{result}"]').click()
    panel.locator("h2").filter(has_text=result).wait_for()
    assert "bash" in panel.locator("dl.facts").inner_text()
    block = panel.locator(".part pre").first
    assert len(block.inner_text()) < len(output)
    panel.locator('.part button.more[data-part="0"]').click()
    panel.locator('.part button.more[data-part="0"]').wait_for(state="detached")
    assert block.inner_text() == output
    shot(page, "tool-result")
    panel.locator("#to-context").click()
    page.wait_for_url(re.compile(f"/context\\?entry={result}"))
    page.locator("article.msg").nth(2).wait_for()


def test_the_diff_opens_on_the_leaf_against_the_latest_other_tip(page, serve, demo, shot):
    """Item 11: no arguments, A is the current leaf and B the most recent other branch tip; the tips are offered;
    only model, thinking level and tools are settings; changed messages are side by side with words marked."""
    server = serve(demo["repo"])
    sid, ids = demo["session_id"], demo["ids"]
    page.goto(server.url)
    page.goto(server.base + f"/sessions/{sid}/diff")
    a = page.locator("#pick-a").input_value()
    b = page.locator("#pick-b").input_value()
    assert a == demo["leaf_id"] and b == ids["quick_fix_end"] and a != b
    tips = page.locator("#pick-b option").all_inner_texts()
    assert len(tips) == 2 and any("(current branch)" in t for t in tips)
    assert page.locator("#settings-differ li").count() >= 1
    differ = page.locator("#settings-differ").inner_text()
    assert "model" in differ and "messages" not in differ and "tokens" not in differ
    assert page.locator("#side-by-side tbody tr").count() >= 1
    shot(page, "default")
    page.select_option("#pick-b", demo["leaf_id"])  # picking a tip compares at once
    page.wait_for_url(re.compile(f"b={demo['leaf_id']}"))
    assert "same entry" in page.locator("#diverge").inner_text()
    shot(page, "picked")


def test_a_changed_message_is_paired_with_its_words_marked(page, serve, tmp_path, shot):
    """Item 11: two branches whose replies differ in a word: the replies sit side by side on one row, the word
    struck on A's side and marked on B's; a message only one side has sits alone."""
    from sessiontree import AssistantMessage, JsonlSessionRepo, TextContent, UserMessage

    with JsonlSessionRepo(tmp_path / "r") as repo:
        session = repo.create(cwd="/w")
        ask = session.append_message(UserMessage(content="run the tests"))
        a = session.append_message(AssistantMessage([TextContent("I will run pytest -x on the whole suite now.")]))
        session.move_to(ask)
        session.append_message(AssistantMessage([TextContent("I will run pytest -q on the whole suite now.")]))
        b = session.append_message(UserMessage(content="and then?"))
        session.close()
    server = serve(tmp_path / "r")
    page.goto(server.url)
    page.goto(server.base + f"/sessions/{session.id}/diff?a={a}&b={b}")
    changed = page.locator("#side-by-side tr.changed")
    assert changed.count() == 1
    assert changed.locator("td").nth(0).locator("del").inner_text() == "-x"
    assert changed.locator("td").nth(1).locator("ins").inner_text() == "-q"
    assert page.locator("#side-by-side tr.only_b").count() == 1
    assert "and then?" in page.locator("#side-by-side tr.only_b").inner_text()
    shot(page, "changed")


def test_the_usage_page_charts_tokens_cost_compactions_and_branches(page, serve, demo, shot):
    """Item 12: one bar per model call along the current branch with the compaction marked, the running cost, and
    a bar per branch; the replay page has its slider over versions."""
    server = serve(demo["repo"])
    sid = demo["session_id"]
    usage = json.loads(server.get(f"/api/sessions/{sid}/usage")[1])
    page.goto(server.url)
    page.goto(server.base + f"/sessions/{sid}/usage")
    chart = page.locator("#calls-chart")
    assert chart.locator("rect.hit").count() == len(usage["calls"]) > 0
    assert chart.locator(".compaction-mark").count() == len(usage["compactions"]) == 1
    assert chart.locator("polyline.cost-line").count() == 1
    branches = page.locator("#branches-chart g.branch")
    assert branches.count() == len(usage["branches"]) == 2
    assert page.locator("#branches-chart g.branch.current").count() == 1
    total = page.locator("#usage-total").inner_text()
    assert f"{usage['tokens']:,}" in total and f"${usage['cost']:.4f}" in total
    shot(page, "charts")
    chart.locator("rect.hit").first.click()
    page.wait_for_url(re.compile(f"/context\\?entry={usage['calls'][0]['id']}"))
    page.goto(server.base + f"/sessions/{sid}/replay")
    slider = page.locator("#slider")
    assert slider.get_attribute("type") == "range" and slider.get_attribute("max") == str(demo["entries"] + 1)
    slider.fill("5")
    page.locator("#step-title").filter(has_text="event 5 of").wait_for()
    strip = page.locator("#event-strip")  # a tick per version, compactions and leaf moves marked
    assert strip.locator("rect.tick").count() == demo["entries"] + 1
    assert strip.locator("rect.tick.compaction").count() == 1 and strip.locator("rect.tick.move").count() >= 1
    box = strip.bounding_box()
    compaction = int(strip.locator("rect.tick.compaction").get_attribute("x").split(".")[0])
    strip.click(position={"x": (compaction + 5) / 1000 * box["width"], "y": 9})  # clicking a tick goes there
    page.locator("#step-title").filter(has_text="compaction").wait_for()
    shot(page, "replay")


def test_numbers_are_true_and_no_request_fails(page, serve, tmp_path, demo, shot):
    """Item 13: the context header counts the branch's messages, not the page's; no request 404s (the search page's
    script, the favicon); the sessions page's boxes have labels and their placeholders fit."""
    from sessiontree import JsonlSessionRepo, UserMessage

    with JsonlSessionRepo(demo["repo"]) as repo:
        session = repo.create(cwd="/long")
        for i in range(150):
            session.append_message(UserMessage(content=f"message {i + 1}"))
        session.close()
    server = serve(demo["repo"])
    failed = _no_404s(page)
    page.goto(server.url)
    page.locator('#sessions [data-field="verify"] .badge.ok').first.wait_for()
    spark = page.locator(f'#sessions tr[data-id="{demo["session_id"]}"] .spark')  # tokens as a bar, the largest full
    spark.wait_for()
    assert spark.evaluate("el => el.getBoundingClientRect().width") > 20
    for box in ("#search-box", "#filter"):
        label = page.locator(f'label[for="{box[1:]}"]')
        assert label.count() == 1 and label.inner_text().strip()
        fits = page.locator(box).evaluate(
            "el => { const c = document.createElement('canvas').getContext('2d'); c.font = getComputedStyle(el).font;"
            " return c.measureText(el.placeholder).width <= el.clientWidth; }")
        assert fits, box
    shot(page, "sessions")
    page.goto(server.base + f"/sessions/{session.id}/context")
    assert page.locator("article.msg").count() == 100
    assert page.locator("#context-meta").inner_text().startswith("150 messages")
    page.goto(server.base + "/search?q=cache")
    page.locator("#hits li").first.wait_for()
    page.goto(server.base + f"/sessions/{demo['session_id']}/usage")
    page.goto(server.base + f"/sessions/{demo['session_id']}/diff")
    page.wait_for_timeout(300)
    assert server.get("/favicon.ico")[0] == 200
    assert failed == []


def test_pi_sessions_are_read_only_unless_allowed(page, serve, pi_repo, shot):
    """Item 14: a pi file is reported ``read_only: true``; rename, label and move are not offered and a write is
    refused; with ``serve --allow-writes`` they are back and land in pi's file."""
    sid = pi_repo["session_id"]
    before = pi_repo["file"].read_bytes()
    server = serve(pi_repo["repo"])
    assert json.loads(server.get(f"/api/sessions/{sid}")[1])["read_only"] is True
    status, body, _ = server.request("POST", f"/api/sessions/{sid}/name", b'{"name": "x"}',
                                     headers={"Content-Type": "application/json"})
    error = json.loads(body)["error"]
    assert status == 409 and error["code"] == "read_only" and "--allow-writes" in error["message"]
    assert not error["message"].startswith("read_only")
    page.goto(server.url)
    page.goto(server.base + f"/sessions/{sid}")
    page.locator("#read-only").wait_for()
    assert page.locator("#rename").count() == 0
    page.locator(f'.row[data-id="{pi_repo["ids"]["diagnosis"]}"]').click()
    page.locator("#entry #parts").wait_for()
    assert page.locator("#label-form").count() == 0 and page.locator("#move-form").count() == 0
    assert "--allow-writes" in page.locator("#read-only-note").inner_text()
    shot(page, "read-only")
    assert pi_repo["file"].read_bytes() == before
    server.stop()

    writable = serve(pi_repo["repo"], "--allow-writes")
    assert json.loads(writable.get(f"/api/sessions/{sid}")[1])["read_only"] is False
    page.goto(writable.url)
    page.goto(writable.base + f"/sessions/{sid}")
    page.fill("#rename input[name=name]", "renamed in pi's file")
    page.click("#rename button")
    page.locator("#session-name").filter(has_text="renamed in pi's file").wait_for()
    assert b"renamed in pi's file" in pi_repo["file"].read_bytes()


def test_api_errors_do_not_repeat_their_code(serve, demo):
    """Item 8: ``{"error": {"code": "not_found", "message": "no session ..."}}``, not "not_found: no session ..."."""
    server = serve(demo["repo"])
    for path in ("/api/sessions/nosuch", f"/api/sessions/{demo['session_id']}/context?entry=zzzzzzzz",
                 f"/api/sessions/{demo['session_id']}/export?format=docx", f"/api/sessions/{demo['session_id']}/replay/9999"):
        status, body, _ = server.get(path)
        error = json.loads(body)["error"]
        assert status in (400, 404) and error["message"] and not error["message"].startswith(error["code"]), (path, error)

