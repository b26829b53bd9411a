"""The viewer in a real browser (headless chromium): list -> tree -> context -> replay -> diff, on the demo
repository and on a pi file, with screenshots in test-artefacts/web/."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from sessiontree_cli_runner import run

pytestmark = pytest.mark.browser


def _context_json(repo: Any, leaf: str, cwd: Any) -> dict[str, Any]:
    return json.loads(run(("context", "--repo", str(repo), "--leaf", leaf, "--json"), cwd).stdout)


def click_through(page: Any, server: Any, demo: dict[str, Any], shot: Any, chained: bool) -> None:
    ids, sid = demo["ids"], demo["session_id"]
    page.goto(server.url)
    assert "token=" not in page.url  # moved into the cookie, out of the address bar
    row = page.locator(f'#sessions tr[data-id="{sid}"]')
    assert "Fix the flaky cache test" in row.inner_text()
    badge = row.locator('[data-field="verify"] .badge')
    badge.filter(has_text="chain ok" if chained else "not chained").wait_for()
    page.fill("#filter", "no such session")
    assert page.locator("#sessions tbody tr:visible").count() == 0
    page.fill("#filter", "FLAKY")
    assert page.locator("#sessions tbody tr:visible").count() == 1
    row.locator('[data-field="entries"]').filter(has_text=re.compile(f"^{demo['entries']}$")).wait_for()  # loads after the badge
    shot(page, "1-sessions")

    row.locator("a").click()
    page.wait_for_url(re.compile(f"/sessions/{sid}$"))
    leaf = page.locator(f'.row[data-id="{demo["leaf_id"]}"]')
    assert leaf.locator(".leaf").inner_text() == "leaf"
    assert page.locator(f'.row.t-compaction[data-id="{ids["compaction"]}"]').count() == 1
    assert page.locator(f'.row.t-branch_summary[data-id="{ids["branch_summary"]}"]').count() == 1
    assert page.locator(f'.row[data-id="{ids["diagnosis"]}"] .label').inner_text() == "diagnosis"
    assert page.locator(f'.row[data-id="{ids["diagnosis"]}"] .fork').inner_text().strip() == "2"
    assert page.locator(f'.row[data-id="{ids["diagnosis"]}"] .fork svg.fork-icon').count() == 1
    assert "off" in (page.locator(f'.row[data-id="{ids["quick_fix_end"]}"]').get_attribute("class") or "")
    page.locator("#verify").filter(has_text="chain ok" if chained else "not chained").wait_for()
    page.locator(f'.row[data-id="{ids["quick_fix_end"]}"]').click()
    page.locator("#entry h2").filter(has_text=ids["quick_fix_end"]).wait_for()
    shot(page, "2-tree")

    page.click("#to-context")
    page.wait_for_url(re.compile("/context\\?entry="))
    expected = _context_json(demo["repo"], ids["quick_fix_end"], demo["repo"].parent)
    assert page.locator("article.msg").count() == len(expected["messages"])
    meta = page.locator("#context-meta").inner_text()
    assert "openai/gpt-5-mini" in meta and f"≈{expected['estimated_tokens']:,} tokens" in meta
    assert f"thinking {expected['thinking_level']}" in meta
    shot(page, "3-context")

    page.click("header nav >> text=replay")
    page.locator("#step-title").filter(has_text=f"event {demo['entries'] + 1} of").wait_for()
    page.click("#first")
    page.locator("#step-title").filter(has_text="event 1 of").wait_for()
    page.click("#next")
    page.locator("#step-title").filter(has_text="event 2 of").wait_for()
    assert "model_change" in page.locator("#step-title").inner_text()
    page.click("#next")
    page.click("#next")
    page.click("#next")  # event 5: the first user message joins the context
    page.locator("#step-title").filter(has_text="event 5 of").wait_for()
    assert "+1" in page.locator("#change").inner_text() and page.locator(".changes li.added").count() == 1
    shot(page, "4-replay")

    page.goto(server.base + f"/sessions/{sid}")
    page.locator(f'.row[data-id="{ids["quick_fix_end"]}"]').click()
    page.click("#to-diff")
    page.wait_for_url(re.compile("/diff\\?"))
    diverge = page.locator("#diverge").inner_text()
    assert ids["diagnosis"] in diverge
    sides = page.locator(".side")
    assert ids["quick_fix_end"] in sides.nth(1).inner_text() and demo["leaf_id"] in sides.nth(0).inner_text()
    shot(page, "5-diff")


def test_click_through_the_demo_repository(page, serve, demo, shot):
    server = serve(demo["repo"])
    click_through(page, server, demo, shot, chained=True)


def test_click_through_a_pi_file(page, serve, pi_repo, shot):
    server = serve(pi_repo["repo"])
    click_through(page, server, pi_repo, shot, chained=False)


def test_a_clipped_block_expands_in_place(page, serve, tmp_path, shot):
    from sessiontree import JsonlSessionRepo, TextContent, ToolResultMessage, UserMessage

    lines = "\n".join(f"line {i}: " + "x" * 40 for i in range(3000))
    with JsonlSessionRepo(tmp_path / "big") as repo:
        session = repo.create(cwd="/w")
        session.append_message(UserMessage(content="show me the log"))
        leaf = session.append_message(ToolResultMessage(tool_call_id="t", tool_name="bash", content=[TextContent(text=lines)]))
        session.close()
    server = serve(tmp_path / "big")
    page.goto(server.url)
    page.goto(server.base + f"/sessions/{session.id}/context?entry={leaf}")
    block = page.locator("article.msg").nth(1).locator("pre.block")
    assert len(block.inner_text()) < 5_000
    button = page.locator("article.msg").nth(1).locator("button.more")
    assert "more characters" in button.inner_text()
    button.click()
    page.locator("article.msg").nth(1).locator("button.more").wait_for(state="detached")
    assert block.inner_text() == lines
    shot(page, "expanded")


def test_the_tree_of_a_large_session_is_virtualised(page, serve, tmp_path, shot):
    from sessiontree import JsonlSessionRepo, UserMessage

    with JsonlSessionRepo(tmp_path / "many") as repo:
        session = repo.create(cwd="/w")
        ids = [session.append_message(UserMessage(content=f"turn {i}")) for i in range(20_000)]
        session.close()
    server = serve(tmp_path / "many")
    page.goto(server.url)
    page.goto(server.base + f"/sessions/{session.id}")
    page.locator(f'.row[data-id="{ids[-1]}"]').wait_for()  # opens at the leaf
    assert page.locator(".row").count() < 200
    page.locator("#tree").evaluate("box => { box.scrollTop = 0; }")
    page.locator(f'.row[data-id="{ids[0]}"]').wait_for()
    page.locator("#tree").evaluate("box => { box.scrollTop = box.scrollHeight / 2; }")
    page.locator(f'.row[data-id="{ids[10_000]}"]').wait_for()
    assert page.locator(".row").count() < 200
    assert "turn 10000" in page.locator(f'.row[data-id="{ids[10_000]}"]').inner_text()
    shot(page, "middle")


@pytest.mark.parametrize("name", ["branches", "compaction", "small"])
def test_a_file_pi_wrote_reads_as_pi_reads_it(page, serve, tmp_path, shot, name):
    """The held pi fixtures (written by pi itself): the tree has pi's nodes, the context page pi's context."""
    import shutil

    from sessiontree_pi import fixtures_dir

    expected = json.loads((fixtures_dir() / f"{name}.expected.json").read_text())
    folder = tmp_path / "pi"
    folder.mkdir()
    shutil.copy(fixtures_dir() / f"{name}.jsonl", folder / f"{name}.jsonl")
    server = serve(folder)
    sid = expected["header"]["id"]
    page.goto(server.url)
    page.goto(server.base + f"/sessions/{sid}?filter=all")
    page.locator(f'.row[data-id="{expected["leafId"]}"] .leaf').wait_for()
    total = json.loads(page.locator("#tree-data").text_content())["total"]
    assert total == expected["tree"]["nodes"]
    page.locator("#verify").filter(has_text="not chained").wait_for()
    shot(page, "tree")
    page.goto(server.base + f"/sessions/{sid}/context")
    context = expected["context"]
    assert page.locator("article.msg").count() == context["messages"]
    meta = page.locator("#context-meta").inner_text()
    assert f"thinking {context['thinkingLevel']}" in meta
    if context["model"]:
        assert f"{context['model']['provider']}/{context['model']['modelId']}" in meta
    shot(page, "context")


def test_a_tampered_log_gets_a_bad_badge_naming_its_line(page, serve, demo, shot):
    lines = demo["file"].read_bytes().splitlines(keepends=True)
    assert b"test_entry_expires" in lines[4]  # the first user message
    lines[4] = lines[4].replace(b"test_entry_expires", b"test_entry_EXPIRES")
    demo["file"].write_bytes(b"".join(lines))
    server = serve(demo["repo"])
    report = json.loads(server.get(f"/api/sessions/{demo['session_id']}/verify")[1])
    assert report["ok"] is False and report["first_bad_line"] == 5
    page.goto(server.url)
    badge = page.locator(f'#sessions tr[data-id="{demo["session_id"]}"] [data-field="verify"] .badge')
    badge.filter(has_text="bad at line 5").wait_for()
    assert "bad" in (badge.get_attribute("class") or "")
    shot(page, "tampered")


def test_an_erased_entry_is_counted_on_the_badge(page, serve, demo, shot):
    from sessiontree import open_session

    session = open_session(demo["file"])
    first_user = session.find_entries("message")[0].id
    session.redact(first_user, reason="customer asked", by="support")
    session.close()
    server = serve(demo["repo"])
    report = json.loads(server.get(f"/api/sessions/{demo['session_id']}/verify")[1])
    assert report["ok"] is True and [r["entry_id"] for r in report["redactions"]] == [first_user]
    page.goto(server.url)  # the token, then the session's tree
    page.goto(server.base + f"/sessions/{demo['session_id']}")
    page.locator("#verify").filter(has_text="chain ok, 1 erased").wait_for()
    shot(page, "erased")


def test_a_log_too_damaged_to_open_still_gets_its_badge(page, serve, demo):
    lines = demo["file"].read_bytes().splitlines(keepends=True)
    lines[6] = b'{"type": "message", "id": \n'  # not JSON any more
    demo["file"].write_bytes(b"".join(lines))
    server = serve(demo["repo"])
    page.goto(server.url)
    row = page.locator(f'#sessions tr[data-id="{demo["session_id"]}"]')
    row.locator('[data-field="verify"] .badge').filter(has_text="bad at line 7").wait_for()
    row.locator('[data-field="entries"]').filter(has_text="-").wait_for()
    status, body, _ = server.get(f"/sessions/{demo['session_id']}")
    assert status == 400 and b"corrupt" in body  # the tree page says why it cannot show the session


def test_search_finds_an_entry_and_opens_its_context(page, serve, demo, shot):
    server = serve(demo["repo"])
    status, body, _ = server.get("/api/search?q=test_entry_expires")
    hits = json.loads(body)["hits"]
    assert status == 200 and hits and {h["session_id"] for h in hits} == {demo["session_id"]}
    assert server.get("/api/search?q=-only")[0] == 400  # no word to look for
    page.goto(server.url)
    page.fill('input[name="q"]', "test_entry_expires")
    page.press('input[name="q"]', "Enter")
    first = page.locator("#hits li.hit").first
    first.wait_for()
    assert page.locator("#hits mark").count() >= 1
    shot(page, "search")
    first.locator("a").click()
    page.locator("article.msg").first.wait_for()
    assert "/context?entry=" in page.url
