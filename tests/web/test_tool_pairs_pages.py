"""The web viewer and tool calls (issue 35), in a real browser: the tree marks the branch whose context a provider
would refuse, and the context page lists the problems and shows the context repaired."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _branches(folder: Path) -> tuple[str, str, str]:
    """A session with a sound branch and one whose run stopped after its tool call (the current leaf)."""
    from sessiontree import AssistantMessage, JsonlSessionRepo, TextContent, ToolCall, ToolResultMessage, UserMessage

    with JsonlSessionRepo(folder) as repo:
        session = repo.create(cwd="/w")
        root = session.append_message(UserMessage("weather?"))
        session.append_message(AssistantMessage([ToolCall(id="a1", name="weather")], stop_reason="toolUse"))
        sound = session.append_message(ToolResultMessage(tool_call_id="a1", tool_name="weather", content=[TextContent("sun")]))
        session.move_to(root)
        cut = session.append_message(AssistantMessage([ToolCall(id="b1", name="clock")], stop_reason="toolUse"))
        session.close()
        return session.id, sound, cut


def test_the_tree_marks_the_branch_with_problems_and_the_context_shows_the_repair(page: Any, serve: Any, tmp_path: Path,
                                                                                  shot: Any) -> None:
    """Only the interrupted branch's tip is marked; its context lists the missing result, and the repaired view
    shows the error result the repair adds, noted as such."""
    sid, sound, cut = _branches(tmp_path / "s")
    server = serve(tmp_path / "s")
    page.goto(server.url)
    page.goto(server.base + f"/sessions/{sid}")
    page.locator(f'.row[data-id="{cut}"]').wait_for()
    assert "1 tool-call problem" in page.locator(f'.row[data-id="{cut}"] .problems').inner_text()
    assert page.locator(f'.row[data-id="{sound}"] .problems').count() == 0
    shot(page, "tree")
    page.goto(server.base + f"/sessions/{sid}/context?entry={cut}")
    section = page.locator("#tool-pairs")
    assert "missing_result" in section.inner_text() and "b1" in section.inner_text()
    assert page.locator("article.msg").count() == 2
    section.get_by_text("show the context repaired").click()
    page.locator("article.msg").nth(2).wait_for()
    added = page.locator("article.msg").nth(2)
    assert "added by the repair" in added.inner_text()
    assert "No result was recorded for this tool call (interrupted)." in added.inner_text()
    assert "show it as logged" in page.locator("#tool-pairs").inner_text()
    shot(page, "repaired")
    page.goto(server.base + f"/sessions/{sid}/context?entry={sound}")
    assert page.locator("#tool-pairs").count() == 0
