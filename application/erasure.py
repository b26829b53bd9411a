"""Erasure: ``session.redact(entry_id, reason=...)`` removes one entry's content and keeps the log verifiable.

The entry's line is rewritten as a *stub*: the same entry (type, id, parent, timestamp, roles and tool-call ids, so the
tree and the shape of the context stay) with its content replaced by ``[redacted]`` and a top-level ``"redacted": true``.
The stub keeps the chain digest the original line recorded, so every later line still chains, and signed checkpoints
stay valid. Before the line is rewritten, a *redaction record* is appended (a ``custom`` entry of type
``sessiontree.redaction``): which entry, the digest it had, why, and who asked. verify accepts a stub only when such a
record names its entry and digest; anything else that changes a line still fails. docs/audit.md explains what this
proves.
"""

from __future__ import annotations

import getpass
from typing import Any

import attrs

from sessiontree.domain import aggregate as commands
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import (
    BranchSummarized,
    ContextCompacted,
    CustomEntryAppended,
    CustomMessageAppended,
    Entry,
    MessageAppended,
)
from sessiontree.domain.messages import (
    NO_EXTRA,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)

RECORD_TYPE = "sessiontree.redaction"
PLACEHOLDER = "[redacted]"
STUB_KEY = "redacted"


def erased_message(message: Any) -> Any:
    """The placeholder of a message: its role, and for tool use the ids that pair calls with results."""
    text = (TextContent(PLACEHOLDER),)
    if isinstance(message, UserMessage):
        return UserMessage(PLACEHOLDER, timestamp=message.timestamp)
    if isinstance(message, AssistantMessage):
        calls = tuple(ToolCall(id=b.id, name=b.name) for b in message.content if isinstance(b, ToolCall))
        return attrs.evolve(message, content=text + calls, error_message=None, extra=NO_EXTRA)
    if isinstance(message, ToolResultMessage):
        return attrs.evolve(message, content=text, details=None, extra=NO_EXTRA)
    if isinstance(message, UnknownMessage):
        return UnknownMessage(role=message.role, data={"role": message.role, "content": PLACEHOLDER})
    if attrs.has(type(message)):  # the summaries and custom messages of a retained tail
        fields = attrs.fields_dict(type(message))
        changes: dict[str, Any] = {name: PLACEHOLDER for name in ("summary", "content") if name in fields}
        changes.update({name: None for name in ("details",) if name in fields})
        return attrs.evolve(message, **changes, **({"extra": NO_EXTRA} if "extra" in fields else {}))
    raise SessionError("invalid_entry", f"cannot erase a message of type {type(message).__name__}")


def erased(entry: Entry) -> Entry:
    """The stub of ``entry``: the same entry with its content replaced (``invalid_entry`` for entries that hold none)."""
    marked = {STUB_KEY: True}
    if isinstance(entry, MessageAppended):
        return attrs.evolve(entry, message=erased_message(entry.message), extra=marked)
    if isinstance(entry, CustomEntryAppended):
        if entry.custom_type == RECORD_TYPE:
            raise SessionError("invalid_entry", f"entry {entry.id} is a redaction record; records cannot be erased")
        return attrs.evolve(entry, data=None, extra=marked)
    if isinstance(entry, CustomMessageAppended):
        return attrs.evolve(entry, content=PLACEHOLDER, details=None, extra=marked)
    if isinstance(entry, ContextCompacted):
        tail = entry.retained_tail
        return attrs.evolve(entry, summary=PLACEHOLDER, details=None, extra=marked,
                            retained_tail=None if tail is None else tuple(erased_message(m) for m in tail))
    if isinstance(entry, BranchSummarized):
        return attrs.evolve(entry, summary=PLACEHOLDER, details=None, extra=marked)
    raise SessionError(
        "invalid_entry", f"entry {entry.id} is a {entry.type} entry, which holds no content to erase (messages, custom "
        "entries, custom messages, compactions and branch summaries do)",
    )


def is_stub(entry: Any) -> bool:
    return bool(entry.extra) and entry.extra.get(STUB_KEY) is True


def records(session: Any) -> dict[str, Any]:
    """The redaction records of a session by the id of the entry each erased (the last record counts)."""
    found = {}
    for entry in session.find_entries("custom"):
        data = entry.data
        if entry.custom_type == RECORD_TYPE and isinstance(data, dict) and isinstance(data.get("entry_id"), str):
            found[data["entry_id"]] = entry
    return found


def redact(session: Any, entry_id: str, reason: str, by: str | None = None) -> str:
    """Erase the content of ``entry_id`` (see the module's docstring); returns the redaction record's id. Redacting an
    entry again completes an erasure that was recorded but interrupted, and otherwise changes nothing."""
    if not isinstance(reason, str) or not reason.strip():
        raise SessionError("invalid_entry", "a redaction needs a reason (reason='...')")
    if by is not None and not isinstance(by, str):
        raise TypeError(f"by must be a str or None, not {by!r}")
    storage = session.storage
    storage.check_writable()
    if not storage.can_replace_lines:
        raise SessionError("storage", f"session {session.id} at {storage.location} cannot be redacted in place: "
                           f"{storage.why_no_replace}")
    with session._lock:
        entry = session.entry(entry_id)
        known = records(session).get(entry.id)
        if is_stub(entry):
            if known is None:
                raise SessionError("corrupt", f"entry {entry.id} is a redaction stub that no redaction record names")
            return str(known.id)
        stub = storage.codec.encode_event(erased(entry))
        digest = storage.recorded_digest(entry.version)
        if known is None:
            data = {"entry_id": entry.id, "version": entry.version, "digest": digest, "reason": reason,
                    "by": by if by is not None else _who()}
            record_id = session._run(lambda agg, id, now: commands.append_custom_entry(
                agg, RECORD_TYPE, data, id=id, timestamp=now), None)
        else:
            record_id = known.id
        storage.replace_line(entry.version, stub, digest)
        session.reload()
        return str(record_id)


def _who() -> str | None:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (a container without passwd entry)
        return None


__all__ = ["PLACEHOLDER", "RECORD_TYPE", "STUB_KEY", "erased", "erased_message", "is_stub", "records", "redact"]
