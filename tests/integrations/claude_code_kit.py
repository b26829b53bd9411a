"""Claude Code transcript lines, as the CLI writes them (``~/.claude/projects/<project>/<session>.jsonl``), for the
Claude Agent SDK store's tests and the ``import --format claude-code`` tests."""

from __future__ import annotations

from typing import Any

SESSION = "8f14e45f-ceea-467f-a5b0-0bd2a1c2e0a1"
PROJECT = "-home-ada-weather"


def _base(uuid: str, parent: str | None, at: int) -> dict[str, Any]:
    return {
        "parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/home/ada/weather",
        "sessionId": SESSION, "version": "2.1.3", "gitBranch": "main", "uuid": uuid,
        "timestamp": f"2026-01-02T10:00:{at:02d}.000Z",
    }


def transcript() -> list[dict[str, Any]]:
    """Two turns with a tool call (thinking, tool use, tool result), a title and a summary line without a uuid, then a
    second answer to the first question on a side branch (the user edited their prompt: a second child of the root)."""
    return [
        {"type": "summary", "summary": "Weather in Paris", "leafUuid": "a4"},
        {**_base("u1", None, 1), "type": "user", "message": {"role": "user", "content": "Weather in Paris?"}},
        {**_base("a1", "u1", 2), "type": "assistant", "requestId": "req_1", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "thinking", "thinking": "Look it up.", "signature": "sig=="},
                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}],
            "stop_reason": "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 30, "cache_read_input_tokens": 0,
                      "cache_creation_input_tokens": 100, "service_tier": "standard"}}},
        {**_base("t1", "a1", 3), "type": "user", "toolUseResult": {"stdout": "Sunny", "stderr": ""}, "message": {
            "role": "user", "content": [{"tool_use_id": "toolu_1", "type": "tool_result", "content": "Sunny in Paris"}]}},
        {**_base("a2", "t1", 4), "type": "assistant", "message": {
            "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "Sunny in Paris.", "citations": None}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 50, "output_tokens": 5}}},
        {"type": "custom-title", "customTitle": "Paris weather", "sessionId": SESSION},
        {**_base("s1", "a2", 5), "type": "system", "subtype": "turn_duration", "durationMs": 2100, "isMeta": False},
        {**_base("u2", "s1", 6), "type": "user", "message": {"role": "user", "content": [
            {"type": "text", "text": "And tomorrow?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}},
        {**_base("a3", "u2", 7), "type": "assistant", "message": {
            "id": "msg_3", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "Rain tomorrow."}], "stop_reason": "end_turn", "usage": {}}},
        {**_base("u9", None, 8), "type": "user", "message": {"role": "user", "content": "Weather in Rome?"}},
        {**_base("a4", "u1", 9), "type": "assistant", "message": {
            "id": "msg_4", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "Let me check Paris again."}], "stop_reason": "end_turn"}},
    ]
