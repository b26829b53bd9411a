"""Acting in the viewer: label an entry, move the leaf, rename the session; each lands in the log as an append."""

from __future__ import annotations

import json

import pytest
from sessiontree_cli_runner import run

pytestmark = pytest.mark.browser


def test_label_move_and_rename_from_the_tree_page(page, serve, demo, shot):
    server = serve(demo["repo"])
    sid, ids = demo["session_id"], demo["ids"]
    lines_before = demo["file"].read_text().count("\n")
    page.goto(server.url)
    page.goto(server.base + f"/sessions/{sid}")
    page.locator(f'.row[data-id="{ids["quick_fix_end"]}"]').click()
    page.locator("#label-form").wait_for()  # the panel shows once the entry has loaded
    page.fill("#label-form input[name=label]", "B-gave-up")
    page.click("#label-form button")
    page.locator(f'.row[data-id="{ids["quick_fix_end"]}"] .label').filter(has_text="B-gave-up").wait_for()

    page.locator(f'.row[data-id="{ids["quick_fix_end"]}"]').click()
    page.locator("#move-form").wait_for()
    page.click("#move-form button")
    page.locator(f'.row[data-id="{ids["quick_fix_end"]}"] .leaf').wait_for()

    page.fill("#rename input[name=name]", "Renamed <b>here</b>")
    page.click("#rename button")
    page.locator("#session-name").filter(has_text="Renamed <b>here</b>").wait_for()  # shown as typed, not as markup
    shot(page, "after-writes")

    shown = json.loads(run(("show", "--repo", str(demo["repo"]), "--filter", "all", "--json"), demo["repo"].parent).stdout)
    assert shown["leaf_id"] != ids["quick_fix_end"]  # the rename came after the move: the leaf is its entry
    assert shown["name"] == "Renamed <b>here</b>"
    rows = {r["id"]: r for r in shown["rows"]}
    assert rows[ids["quick_fix_end"]]["label"] == "B-gave-up"
    assert rows[shown["leaf_id"]]["parent_id"] == ids["quick_fix_end"]
    assert demo["file"].read_text().count("\n") == lines_before + 3  # a label, a leaf move and a rename: three appends
