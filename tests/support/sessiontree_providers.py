"""Checkers for the providers' documented tool-call ordering rules, each on the request shape its API takes.

* Anthropic Messages: every ``tool_use`` block is answered by a ``tool_result`` block in the very next (user) message,
  and every ``tool_result`` answers a ``tool_use`` of the message right before; ``tool_use`` ids are unique.
* OpenAI Chat Completions: an assistant message's ``tool_calls`` are followed by one ``tool`` message per call id, and a
  ``tool`` message answers a call of the assistant message its run of tool messages follows.
* OpenAI Responses: each ``function_call`` item is paired with one ``function_call_output`` item after it (same
  ``call_id``); call ids are unique.

Each checker returns a ``Counter`` of ``(kind, tool_call_id)`` with the kinds of ``Session.check_context``, classified
the way the docs state the rule: a result that does not answer the call it should is a duplicate when its call is
answered, else the first such result is out of place; a result whose id no call has is an orphan; an unanswered call
with no stray result is missing. Strays pair with the nearest call of their id before them, else the first after.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sessiontree import AssistantMessage, ToolCall, ToolResultMessage


def anthropic_request(messages: list[Any]) -> list[dict[str, Any]]:
    """The messages as Anthropic's API takes them (consecutive tool results in one user message)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, ToolResultMessage):
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "is_error": m.is_error}
            if out and out[-1]["role"] == "user" and out[-1]["content"] and out[-1]["content"][0]["type"] == "tool_result":
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif isinstance(m, AssistantMessage):
            out.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": b.id, "name": b.name, "input": dict(b.arguments)} if isinstance(b, ToolCall)
                else {"type": "text", "text": getattr(b, "text", "")} for b in m.content]})
        else:
            out.append({"role": "user", "content": [{"type": "text", "text": m.role}]})
    return out


def chat_request(messages: list[Any]) -> list[dict[str, Any]]:
    """The messages as OpenAI Chat Completions takes them."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, ToolResultMessage):
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": "..."})
        elif isinstance(m, AssistantMessage):
            calls = [{"id": b.id, "type": "function", "function": {"name": b.name, "arguments": "{}"}}
                     for b in m.content if isinstance(b, ToolCall)]
            out.append({"role": "assistant", "content": "", **({"tool_calls": calls} if calls else {})})
        else:
            out.append({"role": "user", "content": m.role})
    return out


def responses_input(messages: list[Any]) -> list[dict[str, Any]]:
    """The messages as OpenAI Responses input items."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, ToolResultMessage):
            out.append({"type": "function_call_output", "call_id": m.tool_call_id, "output": "..."})
        elif isinstance(m, AssistantMessage):
            out.append({"type": "message", "role": "assistant", "content": []})
            out.extend({"type": "function_call", "call_id": b.id, "name": b.name, "arguments": "{}"}
                       for b in m.content if isinstance(b, ToolCall))
        else:
            out.append({"type": "message", "role": "user", "content": m.role})
    return out


def _classify(uses: list[tuple[int, str]], answers: dict[int, int], strays: list[tuple[int, str]]) -> Counter:
    """uses: (position, id) of every call; answers: use -> how many results answered it in place; strays: (position, id)
    of results that answered nothing in place."""
    found: Counter = Counter()
    seen: set[str] = set()
    for _, call_id in uses:
        if call_id in seen:
            found["duplicate_call_id", call_id] += 1
        seen.add(call_id)
    assigned: dict[int, list[int]] = {}
    for n, (pos, call_id) in enumerate(strays):
        same = [u for u, (p, i) in enumerate(uses) if i == call_id]
        before = [u for u in same if uses[u][0] < pos]
        use = before[-1] if before else (same[0] if same else None)
        if use is None:
            found["orphan_result", call_id] += 1
        else:
            assigned.setdefault(use, []).append(n)
    for u, (_, call_id) in enumerate(uses):
        extra = answers.get(u, 0)
        got = assigned.get(u, [])
        if extra > 1:
            found["duplicate_result", call_id] += extra - 1
        if extra:
            found["duplicate_result", call_id] += len(got)
        elif got:
            found["result_out_of_place", call_id] += 1
            found["duplicate_result", call_id] += len(got) - 1
        else:
            found["missing_result", call_id] += 1
    return +found


def anthropic_problems(messages: list[Any]) -> Counter:
    request = anthropic_request(messages)
    uses: list[tuple[int, str]] = []
    use_at: dict[int, list[int]] = {}
    for i, m in enumerate(request):
        if m["role"] == "assistant":
            for b in m["content"]:
                if b["type"] == "tool_use":
                    use_at.setdefault(i, []).append(len(uses))
                    uses.append((i, b["id"]))
    answers: dict[int, int] = {}
    strays: list[tuple[int, str]] = []
    for j, m in enumerate(request):
        for b in m["content"] if m["role"] == "user" else ():
            if b["type"] != "tool_result":
                continue
            mine = [u for u in use_at.get(j - 1, []) if uses[u][1] == b["tool_use_id"]]
            if mine:  # a repeated id in one message: the first call still unanswered, else the last
                u = next((u for u in mine if not answers.get(u)), mine[-1])
                answers[u] = answers.get(u, 0) + 1
            else:
                strays.append((j, b["tool_use_id"]))
    return _classify(uses, answers, strays)


def chat_problems(messages: list[Any]) -> Counter:
    request = chat_request(messages)
    uses: list[tuple[int, str]] = []
    use_at: dict[int, list[int]] = {}
    answers: dict[int, int] = {}
    strays: list[tuple[int, str]] = []
    owner: int | None = None  # the assistant message whose run of tool messages this is
    for i, m in enumerate(request):
        if m["role"] == "assistant":
            owner = i if m.get("tool_calls") else None
            for call in m.get("tool_calls", ()):
                use_at.setdefault(i, []).append(len(uses))
                uses.append((i, call["id"]))
        elif m["role"] == "tool":
            mine = [u for u in use_at.get(owner, []) if uses[u][1] == m["tool_call_id"]] if owner is not None else []
            if mine:
                u = next((u for u in mine if not answers.get(u)), mine[-1])
                answers[u] = answers.get(u, 0) + 1
            else:
                strays.append((i, m["tool_call_id"]))
        else:
            owner = None
    return _classify(uses, answers, strays)


def responses_problems(messages: list[Any]) -> Counter:
    """Responses pairs by call_id alone: an output anywhere after its call answers it (the first such call still
    unanswered, when an id repeats)."""
    items = responses_input(messages)
    calls: list[tuple[int, str]] = []
    answers: dict[int, int] = {}
    strays: list[tuple[int, str]] = []
    for i, item in enumerate(items):
        if item["type"] == "function_call":
            calls.append((i, item["call_id"]))
        elif item["type"] == "function_call_output":
            before = [u for u, (_, c) in enumerate(calls) if c == item["call_id"]]
            if before:
                u = next((u for u in before if not answers.get(u)), before[-1])
                answers[u] = answers.get(u, 0) + 1
            else:
                strays.append((i, item["call_id"]))
    return _classify(calls, answers, strays)
