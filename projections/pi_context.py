"""pi's later context rules, as an entry transform (pi 1.x; docs/pi.md describes them).

pi 1.x added two steps to building a context, after the rules of SPEC section 3 that both pi builds share:
``context_edit`` entries replace or hide what an entry contributes on their branch, and a compaction's ``systemMessage``
comes right before its summary. Entries of those kinds reach this module as they were read (``UnknownEntryAppended``,
``UnknownMessage``, a compaction's ``extra``) with pi's wire fields, so the transform needs the pi codec's decoders;
they are passed in, keeping this module free of storage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import MessageAppended
from sessiontree.domain.messages import AssistantMessage, TextContent, ToolResultMessage

EDITABLE_ROLES = frozenset({"user", "assistant", "tool_result", "custom"})
Decoder = Callable[[Any], Any]


def _is_system_message(entry: Any) -> bool:
    return entry.type == "message" and getattr(entry.message, "role", None) == "system"


def apply_compaction_system_message(entries: Sequence[Any], decode_message: Decoder) -> list[Any]:
    """Put the latest compaction's ``systemMessage`` before it; drop system messages kept
    from before it (``entries`` is the output of the default compaction transform)."""
    if not entries or entries[0].type != "compaction":
        return list(entries)
    compaction = entries[0]
    cut = compaction.version
    out = [e for e in entries[1:] if not (e.version < cut and _is_system_message(e))]
    system = compaction.extra.get("systemMessage")
    if not isinstance(system, dict):
        return [compaction, *out]
    message = MessageAppended(
        originator_id=compaction.originator_id, originator_version=compaction.originator_version,
        timestamp=compaction.timestamp, id=compaction.id, parent_id=compaction.parent_id, message=decode_message(system),
    )
    return [message, compaction, *out]


def _replace_content(entry: Any, content: Any, decode_content: Decoder) -> Any:
    """``entry`` with the content of its user, assistant, tool-result or custom message replaced."""
    if entry.type == "custom_message":
        return attrs.evolve(entry, content=decode_content(content))
    if entry.type != "message":
        return entry
    message = entry.message
    if getattr(message, "role", None) not in EDITABLE_ROLES:
        return entry
    if isinstance(content, str) and isinstance(message, (AssistantMessage, ToolResultMessage)):
        new = (TextContent(text=content),)
    else:
        new = decode_content(content)
    return attrs.evolve(entry, message=attrs.evolve(message, content=new))


def apply_context_edits(entries: Sequence[Any], decode_content: Decoder) -> list[Any]:
    """Apply the latest ``context_edit`` per target (among ``entries``) to its target."""
    edits: dict[str, Any] = {}
    for entry in entries:
        if entry.type == "context_edit":
            target = entry.data.get("targetId")
            if isinstance(target, str):
                edits[target] = entry
    if not edits:
        return list(entries)
    out = []
    for entry in entries:
        edit = edits.get(entry.id)
        if edit is None:
            out.append(entry)
            continue
        replacement = edit.data.get("replacement")
        if replacement is None:
            continue
        if not isinstance(replacement, dict) or "content" not in replacement:
            raise SessionError("corrupt", f"context_edit {edit.id!r}: replacement must be null or an object with 'content'")
        try:
            out.append(_replace_content(entry, replacement["content"], decode_content))
        except (TypeError, ValueError) as exc:
            raise SessionError("corrupt", f"context_edit {edit.id!r}: bad replacement content ({exc})") from None
    return out


def pi_entry_transform(decode_content: Decoder, decode_message: Decoder) -> Callable[[list[Any]], list[Any]]:
    """The entry transform that gives pi 1.x's meaning to system messages and context edits
    (it runs after the default compaction transform, like every entry transform)."""

    def transform(entries: list[Any]) -> list[Any]:
        return apply_context_edits(apply_compaction_system_message(entries, decode_message), decode_content)

    transform.__name__ = "pi_context_rules"
    # Appending an entry that is not a context edit leaves the earlier output as it was and passes the entry through (edits
    # only target entries already there; a new entry comes after any compaction), so a session may extend its cached context.
    transform.incremental = lambda entry: entry.type != "context_edit"  # type: ignore[attr-defined]  # a function attribute
    return transform


__all__ = ["apply_compaction_system_message", "apply_context_edits", "pi_entry_transform"]
