"""Checked against pi itself: both published builds (0.73.1 and 1.6.0) through the pi-peer harness.

pi writes fresh files of every shape and we must see them as pi does; we append to pi
files and move the leaf, and pi must resume on the same leaf with the same context; pi
then continues such a file and we must follow. Needs node and the harness
(``scripts/install-pi-peer.sh``); in CI a missing harness fails these tests.
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest
import sessiontree_pi as pi

from sessiontree import (
    AssistantMessage,
    Cost,
    JsonlSessionStorage,
    Session,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from sessiontree.pi.pi_convert import export_pi, import_pi

pytestmark = pytest.mark.pi

SHAPES = ("small", "compaction", "branches", "bench")
SEEDS = (1, 2, 3)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, int], tuple[Path, Any]]:
    """Files pi wrote (every shape, several seeds, both builds) with pi's own report on each."""
    pi.require_peer()
    folder = tmp_path_factory.mktemp("pi-generated")

    def make(key: tuple[str, str, int]) -> tuple[tuple[str, str, int], tuple[Path, Any]]:
        build, shape, seed = key
        path = folder / f"{build}-{shape}-{seed}.jsonl"
        pi.peer("gen", path, "--shape", shape, "--seed", str(seed), "--entries", "400", build=build)
        return key, (path, pi.peer("expected", path, build=build))

    keys = [(b, s, n) for b in pi.BUILDS for s in SHAPES for n in SEEDS]
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(make, keys))


@pytest.mark.parametrize("build", pi.BUILDS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_files_pi_writes_read_as_pi_reads_them(generated, build, shape, seed, tmp_path):
    """A file pi just wrote opens on pi's leaf with pi's path, name, labels, tree and context,
    is not written to, and comes back byte for byte through a native copy."""
    path, expected = generated[(build, shape, seed)]
    before = path.read_bytes()
    session = Session(JsonlSessionStorage.open(path))
    assert pi.pi_view(session) == pi.expected_view(expected)
    assert path.read_bytes() == before
    import_pi(path, tmp_path / "native.jsonl")
    export_pi(tmp_path / "native.jsonl", tmp_path / "back.jsonl")
    assert (tmp_path / "back.jsonl").read_bytes() == before


def both_builds_see(path: Path) -> list[Any]:
    """pi's report on ``path`` (leaf, path, name, labels, full context) from each build."""
    return [pi.peer("expected", path, build=b) for b in pi.BUILDS]


def assistant(text: str, ts: int, call: str | None = None) -> AssistantMessage:
    content = [TextContent(text=text)] + ([ToolCall(id=call, name="read", arguments={"path": "a.ts"})] if call else [])
    return AssistantMessage(
        content=content,
        provider="anthropic",
        model="claude-sonnet-4-5",
        api="anthropic-messages",
        usage=Usage(input=10, output=5, total_tokens=15, cost=Cost(input=0.01, output=0.02, total=0.03)),
        stop_reason="toolUse" if call else "stop",
        timestamp=ts,
    )


def append_turn(session: Session, text: str, ts: int) -> str:
    first = session.append_message(UserMessage(content=[TextContent(text=text)], timestamp=ts))
    session.append_message(assistant("calling a tool", ts + 1, call=f"call_{ts}"))
    session.append_message(
        ToolResultMessage(tool_call_id=f"call_{ts}", tool_name="read", content=[TextContent(text="file")], timestamp=ts + 2)
    )
    session.append_message(assistant(f"done with {text}", ts + 3))
    return first


def assert_pi_resumes_on_our_leaf(path: Path, session: Session) -> None:
    """Both pi builds open ``path`` on our leaf (or on our leaf marker just under it) with our context."""
    last = orjson.loads(path.read_bytes().splitlines()[-1])
    ours = pi.pi_messages(session.build_context().messages)
    for seen in both_builds_see(path):
        if last.get("customType") == "sessiontree/leaf":
            assert seen["leafId"] == last["id"] and last["parentId"] == session.leaf_id
            assert seen["pathLength"] == len(session.get_branch()) + 1
        else:
            assert seen["leafId"] == session.leaf_id
            assert seen["pathLength"] == len(session.get_branch())
        assert seen["contextMessages"] == ours, seen["pi"]
        assert seen["context"]["thinkingLevel"] == session.build_context().thinking_level
        assert seen["context"]["model"] == pi.pi_model(session.build_context().model)
        assert seen["sessionName"] == session.get_session_name()
        assert seen["labelsSet"] == len(session.get_labels())


def test_pi_resumes_where_we_moved_the_leaf(generated, tmp_path):
    """After our appends and leaf moves, both pi builds resume on our leaf with our context."""
    path = tmp_path / "session.jsonl"
    shutil.copyfile(generated[("latest", "branches", 1)][0], path)
    session = Session(JsonlSessionStorage.open(path))
    earlier = session.get_branch()[6].id
    append_turn(session, "one more turn", 1_800_000_000_000)
    session.append_label_change(earlier, "interesting")
    session.append_session_info("Moved by sessiontree")
    session.move_to(earlier)
    assert_pi_resumes_on_our_leaf(path, session)

    append_turn(session, "on the old branch", 1_800_000_100_000)
    assert_pi_resumes_on_our_leaf(path, session)

    session.move_to(earlier, summary={"summary": "Tried another way.", "details": {"readFiles": []}})
    assert_pi_resumes_on_our_leaf(path, session)

    session.move_to(None)
    assert_pi_resumes_on_our_leaf(path, session)


@pytest.mark.parametrize("build", pi.BUILDS)
def test_we_follow_when_pi_continues_from_our_leaf(generated, build, tmp_path):
    """When pi resumes at our leaf marker and appends, we read the branch pi continued."""
    path = tmp_path / "session.jsonl"
    shutil.copyfile(generated[("legacy", "compaction", 2)][0], path)
    session = Session(JsonlSessionStorage.open(path))
    target = session.get_branch()[-8].id
    session.move_to(target)
    session.close()
    pi.continue_in_pi(path, build)
    reopened = Session(JsonlSessionStorage.open(path))
    for seen in both_builds_see(path):
        assert seen["leafId"] == reopened.leaf_id
        assert seen["pathLength"] == len(reopened.get_branch())
        assert seen["contextMessages"] == pi.pi_messages(reopened.build_context().messages)
    assert reopened.get_branch()[-3].parent_id == target


@pytest.mark.parametrize("seed", SEEDS)
def test_pi_1x_additions_read_as_pi_1x_reads_them(tmp_path, seed):
    """context_edit and usage entries, system and bashExecution messages: pi 1.6.0's view."""
    path = tmp_path / "extras.jsonl"
    pi.generate_extras(path, seed)
    session = Session(JsonlSessionStorage.open(path))
    assert pi.pi_view(session) == pi.expected_view(pi.peer("expected", path, build="latest"))
    import_pi(path, tmp_path / "native.jsonl")
    export_pi(tmp_path / "native.jsonl", tmp_path / "back.jsonl")
    assert (tmp_path / "back.jsonl").read_bytes() == path.read_bytes()


V1_LINES = [
    {"type": "session", "id": "v1-session", "timestamp": "2025-12-01T00:00:00.000Z", "cwd": "/w"},
    {"type": "model_change", "timestamp": "2025-12-01T00:00:00.100Z", "provider": "anthropic", "modelId": "m1"},
    {"type": "thinking_level_change", "timestamp": "2025-12-01T00:00:00.200Z", "thinkingLevel": "low"},
    {"type": "message", "timestamp": "2025-12-01T00:00:01.000Z", "message": {"role": "user", "content": "first", "timestamp": 1}},
    {"type": "message", "timestamp": "2025-12-01T00:00:02.000Z",
     "message": {"role": "assistant", "content": [{"type": "text", "text": "one"}], "provider": "anthropic", "model": "m1", "stopReason": "stop", "timestamp": 2}},
    {"type": "message", "timestamp": "2025-12-01T00:00:03.000Z", "message": {"role": "user", "content": "second", "timestamp": 3}},
    {"type": "compaction", "timestamp": "2025-12-01T00:00:04.000Z", "summary": "Earlier work", "firstKeptEntryIndex": 5, "tokensBefore": 50},
    {"type": "message", "timestamp": "2025-12-01T00:00:05.000Z",
     "message": {"role": "hookMessage", "customType": "hook", "content": "from a hook", "display": True, "timestamp": 5}},
]
V2_LINES = [
    {"type": "session", "version": 2, "id": "v2-session", "timestamp": "2025-12-30T00:00:00.000Z", "cwd": "/w"},
    {"type": "message", "id": "a0000001", "parentId": None, "timestamp": "2025-12-30T00:00:01.000Z", "message": {"role": "user", "content": "q", "timestamp": 1}},
    {"type": "message", "id": "a0000002", "parentId": "a0000001", "timestamp": "2025-12-30T00:00:02.000Z",
     "message": {"role": "hookMessage", "customType": "hook", "content": [{"type": "text", "text": "h"}], "display": False, "timestamp": 2}},
    {"type": "label", "id": "a0000003", "parentId": "a0000002", "timestamp": "2025-12-30T00:00:03.000Z", "targetId": "a0000001", "label": "start"},
    {"type": "branch_summary", "id": "a0000004", "parentId": "a0000001", "timestamp": "2025-12-30T00:00:04.000Z", "fromId": "a0000001", "summary": "gone"},
    {"type": "custom_message", "customType": "note", "content": "n", "display": True, "id": "a0000005", "parentId": "a0000004", "timestamp": "2025-12-30T00:00:05.000Z"},
]


@pytest.mark.parametrize("build", pi.BUILDS)
@pytest.mark.parametrize("lines", [V1_LINES, V2_LINES], ids=["v1", "v2"])
def test_old_versions_read_as_pi_migrates_them(tmp_path, build, lines):
    """Version 1 and 2 files give pi's migrated view (pi draws random ids; ours are derived)."""
    path = tmp_path / "old.jsonl"
    path.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in lines))
    before = path.read_bytes()
    ours = pi.pi_view(Session(JsonlSessionStorage.open(path)))
    theirs = pi.expected_view(pi.peer("expected", path, build=build))
    ours.pop("leafId"), theirs.pop("leafId")
    assert ours == theirs
    assert path.read_bytes() == before


@pytest.mark.parametrize("build", pi.BUILDS)
def test_native_sessions_exported_to_pi_read_the_same_in_pi(tmp_path, build):
    """A native session exported with export_pi gives pi our leaf, path, labels, name and context."""
    native = Session(JsonlSessionStorage.create(tmp_path / "native.jsonl", cwd="/w"))
    native.append_model_change("anthropic", "claude-sonnet-4-5")
    native.append_thinking_level_change("high")
    first = append_turn(native, "start", 1_800_000_000_000)
    native.append_custom_message_entry("note", [TextContent(text="remember")], details={"n": 1})
    second = append_turn(native, "continue", 1_800_000_001_000)
    native.append_compaction("Summary of the start.", second, 1234, details={"readFiles": []})
    native.append_custom_entry("state", {"step": 2})
    native.move_to(first, summary={"summary": "Left the first try."})
    append_turn(native, "second try", 1_800_000_002_000)
    native.append_label_change(first, "origin")
    native.append_session_info("Exported")
    export_pi(tmp_path / "native.jsonl", tmp_path / "pi.jsonl")
    expected = pi.peer("expected", tmp_path / "pi.jsonl", build=build)
    assert expected["leafId"] == native.leaf_id
    assert expected["pathLength"] == len(native.get_branch())
    assert expected["sessionName"] == "Exported" and expected["labelsSet"] == 1
    assert expected["contextMessages"] == pi.pi_messages(native.build_context().messages)
    assert expected["context"]["model"] == pi.pi_model(native.build_context().model)
