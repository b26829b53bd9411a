"""The write path of a JSONL append, recorded: every call from one library module into
another. docs/architecture.md draws exactly these calls; a change that adds a hop must
change both, on purpose.

Code generated at run time (the wire encoders, attrs' __init__) runs inside the module
that asked for it and is not a module of its own here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

_SUPPORT = str(Path(__file__).resolve().parent / "support")
if _SUPPORT not in sys.path:
    sys.path.insert(0, _SUPPORT)

import sessiontree_testkit as kit  # noqa: E402

from sessiontree import AssistantMessage, Cost, JsonlSessionStorage, Session, TextContent, Usage  # noqa: E402

LAYERS = {"domain", "projections", "application", "wire", "storage", "pi", "audit", "content", "search", "retention"}

# (caller module, callee module, callee) in call order: docs/architecture.md, "The write path".
DOCUMENTED = [
    ("application/session.py", "domain/ids.py", "RandomIds.__call__"),  # the injected id generator
    ("application/session.py", "domain/ids.py", "UtcTimestamps.__call__"),  # the injected clock
    ("application/session.py", "domain/aggregate.py", "append_message"),  # the command
    ("domain/aggregate.py", "domain/values.py", "check_message"),
    ("domain/values.py", "domain/messages.py", "check_fields"),  # field types: checked once, at the append command
    ("domain/aggregate.py", "domain/log.py", "EntryLog.has"),
    ("application/session.py", "storage/jsonl.py", "JsonlSessionStorage.append"),
    # the pipeline (storage/pipeline.py): redact -> encode -> outline -> seal
    ("storage/jsonl.py", "storage/pipeline.py", "LinePipeline.redacted"),
    ("storage/pipeline.py", "content/redaction.py", "_Walk.entry"),  # redaction on write (on by default)
    ("storage/jsonl.py", "storage/pipeline.py", "LinePipeline.encode"),
    ("storage/pipeline.py", "wire/codec.py", "Codec.encode_event"),
    ("wire/codec.py", "wire/encoders.py", "Encoders.line"),  # the wire struct, written by msgspec
    ("storage/jsonl.py", "storage/pipeline.py", "LinePipeline.outlines"),  # no content to keep out of line here
    ("storage/jsonl.py", "storage/jsonl_file.py", "AppendingFile.lock"),  # the file's flock, for this append only
    ("storage/jsonl.py", "storage/jsonl_file.py", "AppendingFile.catch_up"),  # others' lines: one lseek
    ("storage/jsonl.py", "storage/pipeline.py", "LinePipeline.seal"),  # seal, after the file's last line
    ("storage/pipeline.py", "audit/chain.py", "seal_lines"),
    ("storage/jsonl.py", "storage/jsonl_file.py", "AppendingFile.write"),  # the log's append
    ("storage/jsonl.py", "storage/jsonl_file.py", "AppendingFile.unlock"),
    ("storage/jsonl.py", "audit/chain.py", "ChainHead.set"),
    ("storage/jsonl.py", "storage/mapped.py", "MappedLines.extend"),  # the loader's lines: the mapped file's, then ours
    ("application/session.py", "domain/aggregate.py", "project"),  # the fold
    ("domain/aggregate.py", "domain/log.py", "EntryLog.add"),  # the loader port's ``held``: keep the line, not the objects
]


def _module(code: Any) -> str | None:
    path = Path(code.co_filename)
    return f"{path.parent.name}/{path.name}" if path.parent.name in LAYERS else None


def record_append(session: Session, message: Any) -> list[tuple[str, str, str]]:
    calls: list[tuple[str, str, str]] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or frame.f_back is None:
            return
        callee, caller = _module(frame.f_code), _module(frame.f_back.f_code)
        if callee and caller and callee != caller:
            calls.append((caller, callee, frame.f_code.co_qualname))

    sys.setprofile(profile)
    try:
        session.append_message(message)
    finally:
        sys.setprofile(None)
    return calls


def _reply(text: str) -> AssistantMessage:
    usage = Usage(input=10, output=5, total_tokens=15, cost=Cost(total=0.01))
    return AssistantMessage(content=[TextContent(text=text)], provider="p", model="m", usage=usage)


def test_an_append_makes_only_the_documented_calls_between_modules(tmp_path: Path) -> None:
    """An agent's append (a session in use, its context built): the documented calls, in order."""
    session = Session(JsonlSessionStorage.create(tmp_path / "s.jsonl"))
    session.append_message(kit.user("hello"))
    session.append_message(_reply("first"))  # encoders are made on first use: the recorded append is not the first
    session.build_context()
    assert record_append(session, _reply("hi")) == DOCUMENTED
    assert len({(caller, callee) for caller, callee, _ in DOCUMENTED}) == 14  # module pairs


def test_the_first_append_makes_the_redactor(tmp_path: Path) -> None:
    """The recording sees more than the documented path when there is more: the first append makes the pipeline's
    redactor (a session that only reads makes none), which then redacts the entry."""
    session = Session(JsonlSessionStorage.create(tmp_path / "s.jsonl"))
    calls = record_append(session, kit.user("hello"))
    walk = ("storage/pipeline.py", "content/redaction.py", "_Walk.entry")
    made = [c for c in calls if c[0].startswith("content/") or (c[1].startswith("content/") and c != walk)]
    assert ("storage/pipeline.py", "content/redaction.py", "entry_redactor") in made  # the walk over an entry, made
    assert calls.index(walk) > calls.index(made[-1])  # then it redacts the entry
    rest = [c for c in calls if c not in made]
    assert [c for c in rest if c in DOCUMENTED or c[1] not in ("storage/jsonl_file.py", "storage/files.py")] == DOCUMENTED
