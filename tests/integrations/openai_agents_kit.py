"""Shared by the Agents SDK integration tests: a scripted model that runs the SDK's real agent loop offline, the
repositories the tests run on (one store opened again as another process would), and Hypothesis strategies for items.

Loaded as a plain module (the test modules put this folder on ``sys.path``); it puts ``tests/support`` there too.
"""

from __future__ import annotations

import copy
import json
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

SUPPORT = str(Path(__file__).resolve().parents[1] / "support")
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)

import sessiontree_pg as pg  # noqa: E402
from agents import function_tool, set_tracing_disabled  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary  # noqa: E402

from sessiontree import InMemorySessionRepo, SessionRepo, open_repo  # noqa: E402

set_tracing_disabled(True)  # the SDK would otherwise export traces over the network

BACKENDS = ("jsonl", "memory", "sqlite", "postgres")


def new_id() -> str:
    return f"conv-{uuid.uuid4().hex[:12]}"


@contextmanager
def repositories(backend: str, folder: Path) -> Iterator[Callable[[], SessionRepo]]:
    """A function opening the backend's store again on each call (memory: the one repository), all closed afterwards."""
    opened: list[SessionRepo] = []

    def again(url: str) -> Callable[[], SessionRepo]:
        def open_again() -> SessionRepo:
            opened.append(open_repo(url))
            return opened[-1]
        return open_again

    try:
        if backend == "memory":
            opened.append(InMemorySessionRepo())
            yield lambda: opened[0]
        elif backend == "postgres":
            with pg.temp_schema("oa") as schema:
                yield again(pg.url(schema))
                for repo in opened:
                    repo.close()
        else:
            yield again(str(folder / "sessions") if backend == "jsonl" else f"sqlite:{folder / 'sessions.db'}")
    finally:
        for repo in opened:
            repo.close()


# -- the agent loop ------------------------------------------------------------------------------------------------


class ScriptedModel(Model):
    """Answers each model call with the next scripted list of output items and records what it was sent."""

    def __init__(self, *turns: list[Any]) -> None:
        self.turns = list(turns)
        self.inputs: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        self.inputs.append(copy.deepcopy(input))
        usage = Usage(requests=1, input_tokens=20, output_tokens=5, total_tokens=25)
        return ModelResponse(output=self.turns.pop(0), usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the tests run the non-streaming loop")


def say(text: str, n: int = 1) -> ResponseOutputMessage:
    return ResponseOutputMessage(id=f"msg_{n}", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


def call(name: str, arguments: dict[str, Any], n: int = 1) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", id=f"fc_{n}", call_id=f"call_{n}", name=name,
                                    arguments=json.dumps(arguments), status="completed")


def think(text: str, n: int = 1) -> ResponseReasoningItem:
    return ResponseReasoningItem(id=f"rs_{n}", type="reasoning", summary=[Summary(type="summary_text", text=text)])


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21 degrees"


# -- items -----------------------------------------------------------------------------------------------------------

texts = st.text(max_size=12)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                           max_leaves=6)
# Names an item's own fields use, and ours: an odd item may carry any of them, with any value.
FIELD_NAMES = ("id", "status", "type", "role", "text", "content", "name", "arguments", "call_id", "output",
               "openai_agents", "phase", "summary", "annotations", "image_url")
odd_fields = st.dictionaries(st.sampled_from(FIELD_NAMES) | texts, json_values, max_size=3)
# Fields a well-formed item may carry beyond those its kind needs (never one that changes its kind).
extras = st.dictionaries(st.sampled_from(("id", "status", "phase", "annotations", "logprobs", "namespace"))
                         | texts.filter(lambda name: name not in FIELD_NAMES), json_values, max_size=2)


def _with(base: dict[str, Any], more: st.SearchStrategy[dict[str, Any]] = extras) -> st.SearchStrategy[dict[str, Any]]:
    """``base`` (whose values may be strategies) plus some extra fields that do not replace its own."""
    return st.tuples(st.fixed_dictionaries(base), more).map(lambda pair: {**pair[1], **pair[0]})


_DATA_URL = texts.map(lambda s: "data:image/png;base64," + s.encode().hex())
blocks = st.one_of(
    _with({"type": st.sampled_from(("input_text", "output_text")), "text": texts}),
    _with({"type": st.just("input_image"), "image_url": _DATA_URL | texts, "detail": st.just("auto")}),
    _with({"type": st.sampled_from(("input_file", "refusal", "text", "thinking", "tool_call", "image"))}),
)
content = texts | st.lists(blocks, max_size=3)
arguments = st.one_of(
    st.dictionaries(texts, json_values, max_size=3).map(json.dumps),
    st.dictionaries(texts, json_values, max_size=3).map(lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False)),
    st.dictionaries(texts, json_values, max_size=2).map(lambda v: json.dumps(v, indent=1)),
    json_values.map(json.dumps), texts,
)
user_items = _with({"role": st.just("user"), "content": content})
assistant_items = _with({"role": st.just("assistant"), "content": content}) | _with(
    {"role": st.just("assistant"), "type": st.just("message"), "id": texts, "status": st.just("completed"),
     "content": st.lists(blocks, max_size=3)})
call_items = _with({"type": st.just("function_call"), "call_id": texts, "name": texts, "arguments": arguments})
output_items = _with({"type": st.just("function_call_output"), "call_id": texts, "output": content})
_parts = st.lists(_with({"type": st.just("summary_text"), "text": texts}), max_size=2)
reasoning_items = _with({"type": st.just("reasoning"), "id": texts, "summary": _parts}) | _with(
    {"type": st.just("reasoning"), "id": texts, "summary": _parts, "content": _parts, "encrypted_content": texts})
# The kinds that map to messages, each well formed.
mapped_items = user_items | assistant_items | call_items | output_items | reasoning_items
other_items = st.one_of(
    _with({"role": st.sampled_from(("system", "developer")), "content": content}),
    _with({"type": st.sampled_from(("web_search_call", "computer_call", "item_reference", "compaction", "mcp_call"))}),
    odd_fields, json_values,
)


def _break(item: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    return {**item, field: value}


# A mapped item with one field replaced by any JSON value (a None text, a number for a list, ...).
broken_items = st.builds(_break, mapped_items, st.sampled_from(FIELD_NAMES), json_values)
any_items = mapped_items | other_items | broken_items
