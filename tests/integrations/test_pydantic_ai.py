"""pydantic-ai's real agent loop stored through SessionTreeConversationStore, offline (TestModel, FunctionModel).

Two turns with tool calls, a reopen from the repository URL, a continuation; the sessions verify and the command line
shows them. The message mapping is checked case by case, and its round trip (load == save) as a property.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.conversation import Conversation
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    BinaryContent,
    BinaryImage,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.messages import TextContent as PaTextContent
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

from sessiontree import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    open_repo,
    verify,
)
from sessiontree.integrations.pydantic_ai import SessionTreeConversationStore
from sessiontree.integrations.pydantic_ai_messages import encode

SESSIONTREE = str(Path(sys.executable).parent / "sessiontree")


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def turn(agent: Agent[None, str], url: str, conversation_id: str, prompt: str) -> Any:
    """One request as a server handles it: a fresh store on the repository, load (or start), run, save."""
    store = SessionTreeConversationStore(url)
    try:
        conversation = await store.load(conversation_id) or Conversation(conversation_id=conversation_id)
        result = await agent.run(prompt, conversation=conversation)
        await store.save(result)
        return result
    finally:
        store.close()


def cli(*args: str) -> str:
    done = subprocess.run([SESSIONTREE, *args], capture_output=True, text=True, check=True, env={"COLUMNS": "200"})
    return done.stdout


def native_messages(url: str, conversation_id: str) -> list[Any]:
    """The messages of the session's current branch, as sessiontree's own context shows them."""
    with open_repo(url) as repo:
        return list(repo.open(conversation_id).build_context().messages)


# -- the agent loop -------------------------------------------------------------------------------


def test_two_turns_with_a_tool_reopen_and_continue(tmp_path: Path) -> None:
    """TestModel calls the tool, then answers; a new store on the same folder loads it equal and continues."""
    agent: Agent[None, str] = Agent(TestModel(), instructions="Be brief.")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    url = str(tmp_path / "sessions")
    first = run(turn(agent, url, "chat-1", "What is 0 + 0?"))
    second = run(turn(agent, url, "chat-1", "And again?"))
    assert second.all_messages()[: len(first.all_messages())] == first.all_messages()
    loaded = run(SessionTreeConversationStore(url).load("chat-1"))
    assert loaded.messages == second.all_messages()
    assert loaded.usage == second.usage

    roles = [type(m).__name__ for m in native_messages(url, "chat-1")]
    assert roles == ["UserMessage", "AssistantMessage", "ToolResultMessage", "AssistantMessage", "UserMessage",
                     "AssistantMessage"]
    report = verify(tmp_path / "sessions" / "chat-1.jsonl")
    assert report.ok, report.problems
    shown = cli("--repo", url, "show", "chat-1")
    assert "user: What is 0 + 0?" in shown and "add(a=0, b=0)" in shown and "tool_result add: 0" in shown
    assert "pydantic_ai.record" in shown
    context = cli("--repo", url, "context", "chat-1")
    assert "6 messages" in context and "And again?" in context


def _planner(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Thinks, calls two tools at once, then answers with what they returned."""
    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    if returns and all(p.outcome == "success" for p in returns):
        return ModelResponse(parts=[TextPart(" and ".join(str(p.content) for p in returns))], model_name="planner")
    return ModelResponse(
        parts=[ThinkingPart("two lookups", signature="sig", provider_name="function"),
               ToolCallPart("weather", {"city": "Paris"}, tool_call_id="w1"),
               ToolCallPart("clock", {"city": "Paris"}, tool_call_id="c1")],
        model_name="planner", usage=RequestUsage(input_tokens=10, output_tokens=5), finish_reason="tool_call",
    )


def test_parallel_tool_calls_thinking_and_a_retry_on_sqlite(tmp_path: Path) -> None:
    """FunctionModel: two tool calls at once (one retried first), thinking; each return is its own tool_result."""
    agent: Agent[None, str] = Agent(FunctionModel(_planner))
    tries: list[str] = []

    @agent.tool_plain
    def weather(city: str) -> str:
        return f"sunny in {city}"

    @agent.tool_plain
    def clock(city: str) -> str:
        tries.append(city)
        if len(tries) == 1:
            raise ModelRetry("try again")
        return "noon"

    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    first = run(turn(agent, url, "chat-2", "Weather and time in Paris?"))
    assert first.output == "sunny in Paris and noon"
    run(turn(agent, url, "chat-2", "Once more"))
    messages = native_messages(url, "chat-2")
    thinking = messages[1]
    assert isinstance(thinking, AssistantMessage) and thinking.stop_reason == "toolUse"
    assert thinking.content[0] == ThinkingContent("two lookups", signature="sig")
    assert [b.name for b in thinking.content[1:]] == ["weather", "clock"]
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_name, r.is_error) for r in results[:2]] == [("weather", False), ("clock", True)]
    assert "try again" in results[1].content[0].text
    with open_repo(url) as repo:
        assert verify(repo.open("chat-2").storage).ok
    assert run(SessionTreeConversationStore(url).load("chat-2")).messages[-1].parts[0].content == "sunny in Paris and noon"


# -- the mapping -------------------------------------------------------------------------------------

T = datetime(2026, 12, 1, 12, 0, 0, 123000, tzinfo=UTC)
MS = 1_796_126_400_123


def test_a_request_maps_part_by_part() -> None:
    """A user prompt is a UserMessage, each tool return a ToolResultMessage (errors flagged), images kept as images;
    a system prompt has no message of its own."""
    png = BinaryContent(b"\x89PNG", media_type="image/png")
    request = ModelRequest(parts=[
        SystemPromptPart("sys"), ToolReturnPart("a", {"x": 1}, tool_call_id="1", timestamp=T),
        ToolReturnPart("b", "no", tool_call_id="2", outcome="failed", timestamp=T),
        UserPromptPart(["look", PaTextContent("here"), png, ImageUrl("https://example.com/x.png")], timestamp=T),
    ], timestamp=T)
    ours, payload = encode(request)
    assert ours == [
        ToolResultMessage(tool_call_id="1", tool_name="a", content=[TextContent('{"x":1}')], timestamp=MS),
        ToolResultMessage(tool_call_id="2", tool_name="b", content=[TextContent('{"error":"no"}')], is_error=True,
                          timestamp=MS),
        UserMessage([TextContent("look"), TextContent("here"), ImageContent("iVBORw==", "image/png")], timestamp=MS),
    ]
    assert ModelMessagesTypeAdapter.validate_python([payload])[0].parts[0] == SystemPromptPart("sys", timestamp=request.parts[0].timestamp)
    assert encode(ModelRequest(parts=[SystemPromptPart("only")]))[0] == []
    assert encode(ModelRequest.user_text_prompt("hi"))[0][0].content == "hi"


def test_a_response_maps_to_one_assistant_message() -> None:
    """Text, thinking and tool calls become blocks; model, provider, usage and the stop reason come along."""
    response = ModelResponse(
        parts=[ThinkingPart("hm", signature="s", provider_name="anthropic"), TextPart("ok"),
               ToolCallPart("f", '{"a": [1, 2]}', tool_call_id="t")],
        usage=RequestUsage(input_tokens=3, output_tokens=4, cache_read_tokens=1), model_name="claude",
        provider_name="anthropic", finish_reason="tool_call", timestamp=T,
    )
    [ours], _ = encode(response)
    assert ours.content == (ThinkingContent("hm", signature="s"), TextContent("ok"), ToolCall(id="t", name="f", arguments={"a": [1, 2]}))
    assert (ours.provider, ours.model, ours.stop_reason, ours.timestamp) == ("anthropic", "claude", "toolUse", MS)
    assert (ours.usage.input, ours.usage.output, ours.usage.cache_read, ours.usage.total_tokens) == (3, 4, 1, 7)


def test_split_and_unmapped_requests_are_stored_and_loaded(tmp_path: Path) -> None:
    """Two tool returns are two entries (the second keeps the pydantic-ai id); a system-only request is a custom entry."""
    call = ModelResponse(parts=[ToolCallPart("a", {}, tool_call_id="1"), ToolCallPart("b", {}, tool_call_id="2")])
    messages = [ModelRequest(parts=[SystemPromptPart("rules")]), ModelRequest.user_text_prompt("go"), call,
                ModelRequest(parts=[ToolReturnPart("a", 1, tool_call_id="1"), ToolReturnPart("b", 2, tool_call_id="2")])]
    url = str(tmp_path / "s")
    store = SessionTreeConversationStore(url)
    entries = run(store.save(Conversation(conversation_id="c", messages=messages)))
    session = open_repo(url).open("c")
    kinds = [(e.type, getattr(e, "custom_type", None) or e.message.role) for e in session.get_entries()]
    assert kinds == [("custom", "pydantic_ai.message"), ("message", "user"), ("message", "assistant"),
                     ("message", "tool_result"), ("message", "tool_result"), ("custom", "pydantic_ai.record")]
    ids = [e.id for e in session.get_entries()]
    assert ids[:3] == [e.id for e in entries[:3]] and ids[3] == f"{entries[3].id}:1" and ids[4] == entries[3].id
    assert run(SessionTreeConversationStore(url).load("c")).messages == messages


def test_tool_arguments_the_log_cannot_carry_as_json_are_saved_and_loaded(tmp_path: Path) -> None:
    """Infinity and bytes in arguments built in code: the save does not fail; the load gives what pydantic-ai's own
    serialiser gives back for them (it is the stored copy); the readable view holds their text (bytes as base64)."""
    call = ModelResponse(parts=[ToolCallPart("f", {"x": float("inf"), "raw": b"\xff", "n": [float("-inf"), 1]},
                                             tool_call_id="1")])
    messages = [ModelRequest.user_text_prompt("go"), call]
    url = str(tmp_path / "s")
    run(SessionTreeConversationStore(url).save(Conversation(conversation_id="c", messages=messages)))
    own = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))
    assert run(SessionTreeConversationStore(url, repair=False).load("c")).messages == own
    (view,) = [b for e in open_repo(url).open("c").find_entries("message") for b in getattr(e.message, "content", ())
               if getattr(b, "name", None) == "f"]
    assert view.arguments == {"x": "inf", "raw": "_w==", "n": ["-inf", 1]}


# -- the round trip, as a property ------------------------------------------------------------------

_text = st.text(max_size=12)
_moments = st.datetimes(min_value=datetime(2001, 1, 1), max_value=datetime(2099, 1, 1), timezones=st.just(UTC))
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
    max_leaves=6,
)
_user_items = st.lists(
    _text | st.builds(PaTextContent, _text)
    | st.builds(BinaryContent, st.binary(max_size=8), media_type=st.just("application/pdf"))
    | st.builds(BinaryImage, st.binary(max_size=8), media_type=st.just("image/png"))  # how pydantic-ai loads any image
    | st.builds(ImageUrl, st.just("https://example.com/a.png")),
    min_size=1, max_size=3,
)
_request_parts = st.lists(
    st.builds(SystemPromptPart, _text, timestamp=_moments)
    | st.builds(UserPromptPart, _text | _user_items, timestamp=_moments)
    | st.builds(ToolReturnPart, _text, _json, tool_call_id=_text, timestamp=_moments,
                outcome=st.sampled_from(["success", "failed", "retried"])),
    max_size=3,
)
_response_parts = st.lists(
    st.builds(TextPart, _text)
    | st.builds(ThinkingPart, _text, signature=st.none() | _text, provider_name=st.just("p"))
    | st.builds(ToolCallPart, _text, st.dictionaries(st.sampled_from(["a", "b"]), _json, max_size=2) | _text,
                tool_call_id=_text),
    max_size=3,
)
_messages = st.lists(
    st.builds(ModelRequest, _request_parts, timestamp=st.none() | _moments, instructions=st.none() | _text)
    | st.builds(ModelResponse, _response_parts, timestamp=_moments, model_name=st.none() | _text,
                usage=st.builds(RequestUsage, input_tokens=st.integers(0, 10**6), output_tokens=st.integers(0, 10**6)),
                finish_reason=st.none() | st.sampled_from(["stop", "length", "tool_call", "error"])),
    max_size=6,
)


@pytest.mark.parametrize("backend", ["memory", "jsonl"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=_messages)
def test_what_is_loaded_equals_what_was_saved(backend: str, messages: list[ModelMessage]) -> None:
    """Any list of messages, saved and loaded by a new store, comes back equal (==), in one save or one per message (as
    stored: ``repair=False``); by default it loads repaired, every tool call answered once right after it."""
    with tempfile.TemporaryDirectory() as folder:
        repo = open_repo("memory:" if backend == "memory" else folder)
        store = SessionTreeConversationStore(repo)
        run(store.save(Conversation(conversation_id="whole", messages=list(messages))))
        conversation = Conversation(conversation_id="stepwise")
        run(store.save(conversation))
        for message in messages:
            conversation.messages.append(message)
            run(store.save(conversation))
        fresh = SessionTreeConversationStore(repo, repair=False)
        for conversation_id in ("whole", "stepwise"):
            loaded = run(fresh.load(conversation_id))
            assert loaded.messages == messages
        repaired = run(SessionTreeConversationStore(repo).load("whole")).messages
        assert _unpaired(repaired) == []
        if _unpaired(messages) == []:
            assert repaired == messages
        repo.close()


def _unpaired(messages: list[ModelMessage]) -> list[str]:
    """The call ids that break the pairing: each call answered once in the requests right after its response (before a
    user prompt), no return elsewhere, no id used twice."""
    broken: list[str] = []
    seen: set[str] = set()
    pending: set[str] = set()
    for message in messages:
        if isinstance(message, ModelResponse):
            broken += sorted(pending)
            pending = set()
            for call in (p for p in message.parts if type(p) is ToolCallPart):
                broken += [call.tool_call_id] if call.tool_call_id in seen else []
                seen.add(call.tool_call_id)
                pending.add(call.tool_call_id)
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                broken += [] if part.tool_call_id in pending else [part.tool_call_id]
                pending.discard(part.tool_call_id)
            elif isinstance(part, UserPromptPart):
                broken += sorted(pending)
                pending = set()
    return broken + sorted(pending)


def _interrupted(url: str, conversation_id: str, *later: ModelMessage) -> None:
    """A conversation whose run stopped after the model asked for two tools (``later``: what followed): saved as it
    was."""
    store = SessionTreeConversationStore(url)
    messages = [ModelRequest(parts=[UserPromptPart("Weather and time in Paris?")]),
                ModelResponse(parts=[ToolCallPart("weather", {"city": "Paris"}, tool_call_id="w1"),
                                     ToolCallPart("clock", {"city": "Paris"}, tool_call_id="c1")]), *later]
    run(store.save(Conversation(conversation_id=conversation_id, messages=messages)))
    store.close()


def test_a_run_interrupted_mid_tool_call_loads_as_a_history_the_next_run_accepts(tmp_path: Path) -> None:
    """pydantic-ai refuses a new prompt after unanswered tool calls; the loaded history answers them with an error
    return, TestModel runs a further turn, and the save writes that return under the call (nothing rewritten)."""
    url = str(tmp_path / "sessions")
    _interrupted(url, "cut")
    agent: Agent[None, str] = Agent(TestModel(call_tools=[]))
    raw = run(SessionTreeConversationStore(url, repair=False).load("cut"))
    with pytest.raises(UserError, match="unprocessed tool calls"):
        run(agent.run("Still there?", conversation=raw))
    result = run(turn(agent, url, "cut", "Still there?"))
    sent = result.all_messages()
    returns = [p for m in sent for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [(p.tool_call_id, p.outcome) for p in returns] == [("w1", "interrupted"), ("c1", "interrupted")]
    assert returns[1].content == "No result was recorded for this tool call (interrupted)."
    with open_repo(url) as repo:
        session = repo.open("cut")
        assert session.check_context() == []
        messages = [e.message for e in session.get_branch() if e.type == "message"]
        assert [m.role for m in messages[:5]] == ["user", "assistant", "tool_result", "tool_result", "user"]
        assert messages[2].is_error and messages[2].tool_call_id == "w1"
    assert run(SessionTreeConversationStore(url).load("cut")).messages == sent


def test_a_history_repaired_further_back_saves_as_a_branch(tmp_path: Path) -> None:
    """A call answered only after the next prompt: the loaded history has the answer in place; the save keeps the
    stored messages as a branch of the session and the next load is the repaired history the run saw."""
    url = str(tmp_path / "sessions")
    _interrupted(url, "late", ModelRequest(parts=[ToolReturnPart("weather", "Sunny", tool_call_id="w1")]),
                 ModelRequest(parts=[UserPromptPart("Hello?")]), ModelResponse(parts=[TextPart("Hi.")]),
                 ModelRequest(parts=[ToolReturnPart("clock", "Noon", tool_call_id="c1")]),
                 ModelResponse(parts=[TextPart("It is noon.")]))
    with open_repo(url) as repo:
        kinds = [p.kind for p in repo.open("late").check_context()]
    assert kinds == ["result_out_of_place"]
    agent: Agent[None, str] = Agent(TestModel(call_tools=[], custom_output_text="Noted."))
    result = run(turn(agent, url, "late", "Thanks"))
    after_calls = [(type(p).__name__, getattr(p, "tool_call_id", None)) for p in result.all_messages()[2].parts]
    assert after_calls[:2] == [("ToolReturnPart", "w1"), ("ToolReturnPart", "c1")]
    assert run(SessionTreeConversationStore(url).load("late")).messages == result.all_messages()
    with open_repo(url) as repo:
        session = repo.open("late")
        assert session.check_context() == []
        assert len([e for e in session.get_entries() if e.type == "message"]) > len(result.all_messages())
