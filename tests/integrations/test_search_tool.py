"""sessiontree.search_tool(repo): a plain, typed, documented function that pydantic-ai registers as a tool and an agent
calls to search its own past sessions (offline: FunctionModel and TestModel drive the real agent loop)."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any, get_type_hints

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import sessiontree_testkit as kit

from sessiontree import open_repo, search_tool

pydantic_ai = pytest.importorskip("pydantic_ai")
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402


def _past(tmp_path: Path) -> Any:
    repo = open_repo(tmp_path / "sessions")
    old = repo.create(cwd="/srv/app", name="the cache bug", session_id="old-chat")
    old.append_message(kit.user("Why does test_cache fail one run in ten?"), entry_id="q1")
    old.append_message(kit.assistant("The TTL comparison races the clock; inject a fake clock."), entry_id="a1")
    old.close()
    return repo


def test_the_tool_is_a_plain_function_with_typed_parameters_and_a_docstring(tmp_path: Path) -> None:
    tool = search_tool(_past(tmp_path))
    assert tool.__name__ == "search_sessions" and "Search the past sessions" in (tool.__doc__ or "")
    hints = get_type_hints(tool)
    assert hints["query"] is str and hints["return"] == list[dict[str, Any]]
    assert list(inspect.signature(tool).parameters) == ["query", "role", "since", "session"]
    [hit] = tool("clock", role="assistant")
    assert (hit["session_id"], hit["entry_id"], hit["kind"]) == ("old-chat", "a1", "assistant")
    assert "**clock**" in hit["snippet"] and hit["on_active_branch"] is True and hit["session_name"] == "the cache bug"
    json.dumps(hit)  # what the agent gets back is plain JSON


def test_pydantic_ai_registers_it_and_the_model_calls_it(tmp_path: Path) -> None:
    """The model asks for the tool by name with the parameters its schema lists; the tool's hits come back to it."""
    seen: dict[str, Any] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        [tool] = info.function_tools
        seen["schema"] = tool.parameters_json_schema
        seen["description"] = tool.description
        returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if returns:
            hits = returns[-1].content
            return ModelResponse(parts=[TextPart(f"found {hits[0]['entry_id']} in {hits[0]['session_id']}")])
        return ModelResponse(parts=[ToolCallPart(tool.name, {"query": "fake clock", "role": "assistant"}, tool_call_id="s1")])

    agent = Agent(FunctionModel(model), tools=[search_tool(_past(tmp_path))])
    result = agent.run_sync("What did we decide about the flaky cache test?")
    assert result.output == "found a1 in old-chat"
    assert set(seen["schema"]["properties"]) == {"query", "role", "since", "session"}
    assert seen["schema"]["required"] == ["query"]
    assert "Search the past sessions" in seen["description"]


def test_test_model_calls_it_with_made_up_arguments_without_failing(tmp_path: Path) -> None:
    agent = Agent(TestModel(), tools=[search_tool(_past(tmp_path))])
    result = agent.run_sync("search")
    assert isinstance(result.output, str)
