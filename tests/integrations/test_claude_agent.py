"""The Claude Agent SDK store (sessiontree.integrations.claude_agent): the SDK's own conformance suite on every backend,
a Claude Code transcript kept as a conversation tree, idempotent appends and what the command line shows."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import claude_code_kit as kit
import pytest
import sessiontree_pg as pg
from claude_agent_sdk import InMemorySessionStore
from claude_agent_sdk.testing import run_session_store_conformance
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import SessionError, open_repo
from sessiontree.integrations.claude_agent import SessionTreeSessionStore
from sessiontree.integrations.claude_code_entries import session_id_for
from sessiontree.repository import SessionRepo

CLI = str(Path(sys.executable).with_name("sessiontree"))
KEY = {"project_key": kit.PROJECT, "session_id": kit.SESSION}
BACKENDS = ["jsonl", "memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def cli(repo: str, *args: str) -> str:
    return subprocess.run([CLI, "--repo", repo, *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(params=BACKENDS)
def repos(request: Any, tmp_path: Path) -> Iterator[Any]:
    """A maker of fresh, empty repositories of one backend (the conformance suite wants one per contract)."""
    with ExitStack() as stack:
        made: list[SessionRepo] = []

        def make() -> SessionRepo:
            n = len(made)
            if made:
                made[-1].close()  # the suite is done with the last one: a server has few connections to spare
            if request.param == "postgres":
                url = pg.url(stack.enter_context(pg.temp_schema("claude")))
            else:
                url = {"jsonl": str(tmp_path / f"sessions{n}"), "memory": "memory:",
                       "sqlite": f"sqlite:///{tmp_path / f's{n}.db'}"}[request.param]
            made.append(open_repo(url))
            made[-1].url_for_test = url  # type: ignore[attr-defined]
            return made[-1]

        yield make
        if made:
            made[-1].close()


def test_the_sdk_conformance_suite_passes_with_nothing_skipped(repos):
    asyncio.run(run_session_store_conformance(lambda: SessionTreeSessionStore(repos())))


def test_a_transcript_loads_back_deep_equal_and_is_a_conversation_tree(repos):
    repo = repos()
    store = SessionTreeSessionStore(repo)
    lines = kit.transcript()
    asyncio.run(store.append(KEY, lines[:4]))
    asyncio.run(store.append(KEY, lines[4:]))
    assert asyncio.run(store.load(KEY)) == lines
    with repo.open(session_id_for(KEY)) as session:
        assert session.header.cwd == "/home/ada/weather"
        assert session.header.metadata["claude_code"] == KEY
        # the lines with a uuid are the entries with that id, under their parentUuid; the edit of the prompt branches
        assert session.entry("a1").parent_id == "u1" and session.entry("t1").parent_id == "a1"
        assert {e.id for e in session.get_children("u1")} == {"a1", "a4"}
        assert session.entry("u9").parent_id is None
        assert session.leaf_id == "a4"
        roles = [type(m).__name__ for m in session.build_context().messages]
        assert roles == ["UserMessage", "AssistantMessage"]  # the branch u1 -> a4
        messages = {e.id: e.message for e in session.get_entries() if e.type == "message"}
        assert set(messages) == {"u1", "a1", "t1", "a2", "u2", "a3", "u9", "a4"}
        assert messages["t1"].tool_name == "get_weather" and messages["t1"].content[0].text == "Sunny in Paris"
        assert messages["a1"].usage.cache_write == 100 and messages["a1"].model == "claude-sonnet-4-5"
        # a mapped line keeps no second copy of its content: the skeleton has none
        assert "content" not in messages["a1"].extra["claude_code"]["line"]["message"]
        assert [e.data["type"] for e in session.find_entries("custom")] == ["summary", "custom-title", "system"]


def test_lines_with_a_uuid_are_written_once_and_lines_without_one_as_they_come(repos):
    store = SessionTreeSessionStore(repos())
    lines = kit.transcript()
    for _ in range(2):
        asyncio.run(store.append(KEY, lines))
    no_uuid = [line for line in lines if "uuid" not in line]
    assert asyncio.run(store.load(KEY)) == lines + no_uuid


def test_a_held_session_never_serves_content_erased_by_another_object(repos):
    """The store keeps its session open between calls; an erasure made through another object (another process, the
    command line) is what the next load shows, on every backend."""
    repo = repos()
    store = SessionTreeSessionStore(repo)
    asyncio.run(store.append(KEY, kit.transcript()))
    assert "Sunny in Paris" in json.dumps(asyncio.run(store.load(KEY)))  # held open from now on
    with repo.open(session_id_for(KEY)) as other:
        other.redact("t1", reason="the user asked")  # the tool's result, and the reply that quotes it
        other.redact("a2", reason="the user asked")
    assert "Sunny in Paris" not in json.dumps(asyncio.run(store.load(KEY)))


def test_a_batch_with_a_line_the_log_cannot_hold_writes_nothing(repos):
    store = SessionTreeSessionStore(repos())
    with pytest.raises(SessionError) as caught:
        asyncio.run(store.append(KEY, [{"type": "user", "uuid": "x"}, {"type": "x", "n": float("nan")}]))
    assert caught.value.code == "invalid_entry"
    assert asyncio.run(store.load(KEY)) is None
    with pytest.raises(ValueError, match="session_id"):
        asyncio.run(store.load({"project_key": "p", "session_id": ""}))


def test_keys_of_any_text_are_kept_apart_and_listed_back(repos):
    store = SessionTreeSessionStore(repos())
    keys = [{"project_key": "/home/ada/my project", "session_id": "a.b"},
            {"project_key": "/home/ada/my project", "session_id": "a_b"},
            {"project_key": "/home/ada/my project", "session_id": "x" * 300},
            {"project_key": "p" * 300, "session_id": "a.b", "subpath": "subagents/agent-1"}]
    for n, key in enumerate(keys):
        asyncio.run(store.append(key, [{"type": "x", "n": n}]))
    for n, key in enumerate(keys):
        assert asyncio.run(store.load(key)) == [{"type": "x", "n": n}]
    listed = asyncio.run(store.list_sessions("/home/ada/my project"))
    assert sorted(s["session_id"] for s in listed) == sorted(["a.b", "a_b", "x" * 300])
    assert asyncio.run(store.list_subkeys({"project_key": "p" * 300, "session_id": "a.b"})) == ["subagents/agent-1"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
blocks = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text()}, optional={"citations": json_values}),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": st.text(), "signature": st.text() | st.none()}),
    st.fixed_dictionaries({"type": st.just("tool_use"), "id": st.text(min_size=1), "name": st.text(),
                           "input": st.dictionaries(st.text(max_size=5), json_values, max_size=3)}),
    st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": st.text()},
                          optional={"content": st.text() | st.lists(st.fixed_dictionaries(
                              {"type": st.just("text"), "text": st.text()}), max_size=2), "is_error": st.booleans()}),
    st.dictionaries(st.sampled_from(["type", "x", "source"]), json_values, max_size=3),
)


@st.composite
def transcripts(draw: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    uuids: list[str] = []
    for n in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["user", "assistant", "summary", "system"]))
        line: dict[str, Any] = {"type": kind, **draw(st.dictionaries(st.sampled_from(["cwd", "extra", "timestamp"]),
                                                                   json_values, max_size=2))}
        if draw(st.booleans()):
            line["uuid"] = draw(st.sampled_from([*uuids, f"id-{n}"])) if uuids else f"id-{n}"
            line["parentUuid"] = draw(st.sampled_from([None, "elsewhere", *uuids]))
            uuids.append(line["uuid"])
        if kind in ("user", "assistant"):
            content = draw(st.text() | st.lists(blocks, max_size=3))
            line["message"] = {"role": draw(st.sampled_from([kind, "other"])), "content": content,
                               **draw(st.dictionaries(st.sampled_from(["model", "usage", "id"]), json_values, max_size=2))}
        out.append(line)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(transcripts(), max_size=3))
def test_any_transcript_loads_back_as_the_sdk_reference_store_does(batches):
    """Against the SDK's InMemorySessionStore, with lines of a uuid seen before dropped (the dedup the SDK asks for)."""
    ours = SessionTreeSessionStore(open_repo("memory:", redactors=None))
    reference = InMemorySessionStore()
    seen: set[str] = set()
    for batch in batches:
        asyncio.run(ours.append(KEY, batch))
        fresh = [line for line in batch if line.get("uuid") is None or line["uuid"] not in seen]
        seen.update(line["uuid"] for line in batch if line.get("uuid"))
        dedup = []
        for line in fresh:  # a uuid repeated inside one batch is written once too
            if line.get("uuid") is None or all(line["uuid"] != other.get("uuid") for other in dedup):
                dedup.append(line)
        asyncio.run(reference.append(KEY, dedup))
    if not any(batches):
        assert asyncio.run(ours.load(KEY)) is None
    else:
        assert asyncio.run(ours.load(KEY)) == asyncio.run(reference.load(KEY))


@pytest.mark.parametrize("repos", ["jsonl", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
def test_the_command_line_shows_and_verifies_a_mirrored_session(repos):  # on disk: another process reads it
    repo = repos()
    store = SessionTreeSessionStore(repo)
    asyncio.run(store.append(KEY, kit.transcript()))
    url = repo.url_for_test
    sid = session_id_for(KEY)
    shown = cli(url, "show", sid)
    for text in ("user: Weather in Paris?", 'get_weather(city="Paris")', "tool_result get_weather: Sunny in Paris",
                 "assistant (claude-sonnet-4-5): Sunny in Paris.", "a4 ◀ leaf assistant (claude-sonnet-4-5): Let me check Paris again."):
        assert text in shown
    context = json.loads(cli(url, "context", sid, "--leaf", "a3", "--json"))
    assert [m["role"] for m in context["messages"]] == ["user", "assistant", "tool_result", "assistant", "user", "assistant"]
    assert "0 error(s)" in cli(url, "verify")


def test_importing_the_store_without_the_sdk_names_the_extra():
    code = ("import sys; sys.modules['claude_agent_sdk'] = None\n"
            "try:\n    import sessiontree.integrations.claude_agent\nexcept ModuleNotFoundError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ("missing_extra: sessiontree.integrations.claude_agent needs claude-agent-sdk: "
                           "pip install 'sessiontree[claude-agent]'")
