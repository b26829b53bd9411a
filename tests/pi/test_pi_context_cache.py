"""pi sessions keep their context incrementally after appends, and still equal a fresh build."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import sessiontree_pi as pi

from sessiontree import AssistantMessage, JsonlSessionStorage, Session, TextContent, UserMessage


def _fresh(path: Path):
    return Session(JsonlSessionStorage.open(path)).build_context()


@pytest.mark.parametrize("name", ["small", "compaction", "branches"])
def test_appends_to_a_pi_fixture_extend_the_cached_context(name, tmp_path):
    """After appends the cached context of a pi file equals a rebuild from disk, without rebuilding."""
    path = tmp_path / f"{name}.jsonl"
    shutil.copyfile(pi.fixtures_dir() / f"{name}.jsonl", path)
    session = Session(JsonlSessionStorage.open(path))
    before = session.build_context()
    cache = session._context  # white box: the cache object that must survive appends
    assert cache is not None
    session.append_message(UserMessage(content="one more", timestamp=10))
    session.append_message(AssistantMessage(content=[TextContent(text="sure")], provider="p", model="m", timestamp=11))
    after = session.build_context()
    assert session._context is cache, "the cache was extended, not rebuilt"
    assert after.messages[: len(before.messages)] == before.messages
    assert after == session.build_context(leaf_id=session.leaf_id) == _fresh(path)


def test_a_context_edit_makes_the_cache_rebuild(tmp_path):
    """A context_edit can change earlier entries, so the cache does not extend over one."""
    path = pi.write_lines(
        tmp_path / "edit.jsonl",
        [
            pi.pi_header(),
            pi.pi_node("message", "a1", None, message=pi.user_msg("hello")),
            pi.pi_node("message", "a2", "a1", message=pi.assistant_msg("hi")),
        ],
    )
    session = Session(JsonlSessionStorage.open(path))
    session.build_context()
    with open(path, "ab") as out:  # another writer (pi) hides the greeting
        out.write(b'{"type":"context_edit","id":"a3","parentId":"a2","timestamp":"2026-01-01T00:00:03.000Z","targetId":"a1","replacement":null}\n')
    reopened = Session(JsonlSessionStorage.open(path))
    assert [m.role for m in reopened.build_context().messages] == ["assistant"]
    assert reopened.options.extends_with(reopened.get_entry("a3")) is False
    reopened.append_message(UserMessage(content="again", timestamp=5))
    assert reopened.build_context() == _fresh(path)
