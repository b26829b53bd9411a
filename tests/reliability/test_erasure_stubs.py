"""Round three (issue 32, item 15): a stub carries nothing but names, times and counts.

A stub keeps the digest of the line it replaced, so the chain cannot check its fields: verify does. These attacks put
text where a stub keeps structure (a tool-call name, a 100-digit timestamp, an unknown field of the usage) and passed
verify before round three.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from sessiontree import AssistantMessage, JsonlSessionRepo, TextContent, ToolCall, ToolResultMessage, Usage
from sessiontree.audit.verify import verify
from sessiontree.domain.erasure import NAME_LIMIT


def _erased_session(tmp_path: Path, **call: str) -> tuple[Path, str]:
    session = JsonlSessionRepo(tmp_path).create()
    entry = session.append_message(AssistantMessage(
        content=[TextContent("the plan"), ToolCall(id=call.get("id", "t1"), name=call.get("name", "bash"), arguments={"cmd": "ls"})],
        provider="anthropic", model="claude", usage=Usage(input=3, output=4, total_tokens=7), timestamp=1))
    session.append_message(ToolResultMessage(tool_call_id=call.get("id", "t1"), tool_name=call.get("name", "bash"),
                                             content=[TextContent("README.md")], timestamp=2))
    session.redact(entry, reason="asked")
    return Path(session.storage.location), entry


def _edit_stub(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    lines = path.read_bytes().splitlines()
    for n, line in enumerate(lines):
        record = orjson.loads(line)
        if record.get("redacted") is True:
            change(record)
            lines[n] = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()  # big ints too
    path.write_bytes(b"\n".join(lines) + b"\n")


def test_an_honest_erasure_verifies(tmp_path: Path) -> None:
    path, entry = _erased_session(tmp_path)
    report = verify(path)
    assert report.ok, report.problems
    assert [r["entry_id"] for r in report.redactions] == [entry]


@pytest.mark.parametrize("attack", ["tool-call name", "message timestamp", "entry timestamp", "usage field", "model"])
def test_text_put_into_a_stub_is_refused(tmp_path: Path, attack: str) -> None:
    path, _ = _erased_session(tmp_path)
    words = "the launch code is 0000 and the vault is behind the painting"

    def change(record: dict) -> None:  # type: ignore[type-arg]
        message = record["message"]
        if attack == "tool-call name":
            message["content"][1]["name"] = words
        elif attack == "message timestamp":
            message["timestamp"] = int("7" * 100)
        elif attack == "entry timestamp":
            record["timestamp"] = "2026-01-01T00:00:00Z" + "_" + words.replace(" ", "_")
        elif attack == "usage field":
            message["usage"] = {"input": 3, "output": 4, "total_tokens": 7, "note": words}
        else:
            message["model"] = words

    _edit_stub(path, change)
    report = verify(path)
    assert not report.ok
    assert any("marked erased" in problem for problem in (str(p) for p in report.problems))


def test_names_a_stub_cannot_carry_are_erased_too(tmp_path: Path) -> None:
    """A tool name too long (or with spaces) for a stub is replaced by the placeholder, so an honest erasure of any entry
    verifies; the result keeps its own name."""
    path, _ = _erased_session(tmp_path, name="a tool name with spaces " + "x" * NAME_LIMIT)
    report = verify(path)
    assert report.ok, report.problems
    stub = next(orjson.loads(line) for line in path.read_bytes().splitlines() if b'"redacted":true' in line)
    assert stub["message"]["content"][1]["name"] == "[redacted]"


def test_a_nanosecond_timestamp_is_not_text(tmp_path: Path) -> None:
    """An app that stamps messages in nanoseconds erases them like any other: the stub verifies."""
    import time

    session = JsonlSessionRepo(tmp_path).create()
    entry = session.append_message(AssistantMessage(content=[TextContent("x")], timestamp=time.time_ns()))
    session.redact(entry, reason="asked")
    report = verify(Path(session.storage.location))
    assert report.ok, report.problems
