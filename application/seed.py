"""The seed's names and call shapes (AgentCore.jl's session manager), for code ported from it.

Julia dispatches free functions on their first argument, so the seed writes ``appendMessage(session, msg)`` where
Python writes ``session.append_message(msg)``; both work here. The entry types keep their event names
(``MessageAppended``, ...) and are exported under the seed's names too, so the seed's ``isinstance`` dispatch ports
as it is. docs/porting.md maps every seed name and says where sessiontree differs on purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontree.domain.events import (
    ActiveToolsChanged,
    BranchSummarized,
    ContextCompacted,
    CustomEntryAppended,
    CustomMessageAppended,
    Entry,
    LabelChanged,
    LeafMoved,
    MessageAppended,
    ModelChanged,
    SessionRenamed,
    SessionStarted,
    ThinkingLevelChanged,
    parse_timestamp,
)
from sessiontree.domain.ids import now_iso
from sessiontree.domain.messages import BranchSummaryMessage, CompactionSummaryMessage, CustomMessage
from sessiontree.projections.context import (
    DEFAULT_OPTIONS,
    SessionContextBuildOptions,
    context_entries,
    default_compaction_transform,
    entry_to_messages,
    fold_settings,
)

if TYPE_CHECKING:
    from sessiontree.session import Session

# The seed's entry types: the same classes, so isinstance(entry, MessageEntry) is true of what a session gives back.
SessionTreeEntry = Entry
SessionHeader = SessionStarted
MessageEntry = MessageAppended
ThinkingLevelChangeEntry = ThinkingLevelChanged
ModelChangeEntry = ModelChanged
ActiveToolsChangeEntry = ActiveToolsChanged
CompactionEntry = ContextCompacted
BranchSummaryEntry = BranchSummarized
CustomEntry = CustomEntryAppended
CustomMessageEntry = CustomMessageAppended
LabelEntry = LabelChanged
SessionInfoEntry = SessionRenamed
LeafEntry = LeafMoved


def open_session(path: str | Path, options: SessionContextBuildOptions | None = None, **storage_options: Any) -> Session:
    """The session in the JSONL file at ``path``, ours or pi's (the dialect is detected): ``Session(JsonlSessionStorage.
    open(path, **storage_options), options)`` in one call. An archive a pruning wrote (``<id>.jsonl.gz``) opens
    read-only."""
    from sessiontree.retention.archive import ArchiveSessionStorage, is_archive
    from sessiontree.session import Session
    from sessiontree.storage.jsonl import JsonlSessionStorage

    if is_archive(path):
        return Session(ArchiveSessionStorage.open(path), options)
    return Session(JsonlSessionStorage.open(path, **storage_options), options)


# -- the context functions: pure functions of a branch's entries, root first --------------------------------------------

def derive_session_context_state(path_entries: Sequence[Any]) -> dict[str, Any]:
    """The settings in force at the end of a branch: ``{"thinking_level", "model", "active_tool_names"}`` (the model as
    ``{"provider", "model_id"}``, or None; the tools as a list, or None)."""
    state = fold_settings(path_entries)
    tools = state.active_tool_names
    return {"thinking_level": state.thinking_level, "model": None if state.model is None else dict(state.model),
            "active_tool_names": None if tools is None else list(tools)}


def default_context_entry_transform(path_entries: Sequence[Any]) -> list[Any]:
    """The branch's entries as the latest compaction leaves them (SPEC 3)."""
    return default_compaction_transform(path_entries)


def build_context_entries(path_entries: Sequence[Any], options: SessionContextBuildOptions | None = None) -> list[Any]:
    """The default transform, then the options' ``entry_transforms`` in order."""
    return context_entries(path_entries, options or DEFAULT_OPTIONS)


def session_entry_to_context_messages(
    entry: Any, index: int, entries: list[Any], options: SessionContextBuildOptions | None = None
) -> list[Any]:
    """The messages one context entry contributes. ``index`` is 0-based (the seed's Julia index is 1-based)."""
    return entry_to_messages(entry, index, entries, options or DEFAULT_OPTIONS)


def merge_context_build_options(
    base: Session | SessionContextBuildOptions | None, options: SessionContextBuildOptions | None = None
) -> SessionContextBuildOptions:
    """Session-level options (a session's, or options themselves) followed by call-level ones: transforms appended,
    projectors overridden. This is what ``build_context(options)`` uses."""
    if base is None:
        return DEFAULT_OPTIONS.merged(options)
    if isinstance(base, SessionContextBuildOptions):
        return base.merged(options)
    session_options = getattr(base, "options", None)
    if not isinstance(session_options, SessionContextBuildOptions):
        raise TypeError(f"merge_context_build_options takes a Session or SessionContextBuildOptions, not {base!r}")
    return session_options.merged(options)


def _millis(timestamp: int | str) -> int:
    """The seed passes an entry's ISO timestamp where the messages carry Unix milliseconds."""
    if isinstance(timestamp, str):
        return int(parse_timestamp(timestamp).timestamp() * 1000)
    return timestamp


def create_custom_message(
    custom_type: str, content: Any, display: bool = True, details: Any = None, timestamp: int | str = 0
) -> CustomMessage:
    """The message a ``custom_message`` entry puts in the context (``timestamp``: Unix ms or an ISO string)."""
    return CustomMessage(content, custom_type=custom_type, display=display, details=details, timestamp=_millis(timestamp))


def create_compaction_summary_message(summary: str, tokens_before: int, timestamp: int | str = 0) -> CompactionSummaryMessage:
    """The message a compaction puts before what it kept."""
    return CompactionSummaryMessage(summary=summary, tokens_before=tokens_before, timestamp=_millis(timestamp))


def create_branch_summary_message(summary: str, from_id: str, timestamp: int | str = 0) -> BranchSummaryMessage:
    """The message a branch summary puts in the context."""
    return BranchSummaryMessage(summary=summary, from_id=from_id, timestamp=_millis(timestamp))


def create_timestamp() -> str:
    """Now, as an entry timestamp (ISO 8601, UTC, milliseconds)."""
    return now_iso()


def get_entries_to_fork(session: Session, options: Mapping[str, Any] | None = None) -> list[Entry]:
    """The seed's fork selection: every entry without an ``entryId`` (or ``entry_id``); else the context path
    (:meth:`~Session.get_path_to_root_or_compaction`) ending at the target (``position="at"``) or at its parent
    (``"before"``, the default, which needs a user message). ``repo.fork`` copies the whole root path instead."""
    from sessiontree.forking import fork_leaf

    options = dict(options or {})
    entry_id = options.get("entryId", options.get("entry_id"))
    if entry_id is None:
        return session.get_entries()
    return session.get_path_to_root_or_compaction(fork_leaf(session, entry_id, options.get("position", "before")))


# -- the seed's Session functions: each is the method of the same name ------------------------------------------------

def _session_function(name: str, method: str | None = None) -> Callable[..., Any]:
    method = method or name

    def call(session: Session, *args: Any, **kwargs: Any) -> Any:
        return getattr(session, method)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``{name}(session, ...)`` is ``session.{method}(...)``."
    return call


append_message = _session_function("append_message")
append_thinking_level_change = _session_function("append_thinking_level_change")
append_model_change = _session_function("append_model_change")
append_active_tools_change = _session_function("append_active_tools_change")
append_compaction = _session_function("append_compaction")
append_custom_entry = _session_function("append_custom_entry")
append_custom_message_entry = _session_function("append_custom_message_entry")
append_label_change = _session_function("append_label_change")
append_session_info = _session_function("append_session_info")
move_to = _session_function("move_to")
append_branch_summary = _session_function("append_branch_summary")
build_context = _session_function("build_context")
get_session_stats = _session_function("get_session_stats")
get_entry = _session_function("get_entry")
get_entries = _session_function("get_entries")
find_entries = _session_function("find_entries")
get_children = _session_function("get_children")
get_branch = _session_function("get_branch")
get_label = _session_function("get_label")
get_session_name = _session_function("get_session_name")
get_path_to_root_or_compaction = _session_function("get_path_to_root_or_compaction")


def get_leaf_id(session: Session) -> str | None:
    """``session.leaf_id``: the current leaf (None: before the first entry)."""
    return session.leaf_id


__all__ = [
    "ActiveToolsChangeEntry",
    "BranchSummaryEntry",
    "CompactionEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "LabelEntry",
    "LeafEntry",
    "MessageEntry",
    "ModelChangeEntry",
    "SessionHeader",
    "SessionInfoEntry",
    "SessionTreeEntry",
    "ThinkingLevelChangeEntry",
    "append_active_tools_change",
    "append_branch_summary",
    "append_compaction",
    "append_custom_entry",
    "append_custom_message_entry",
    "append_label_change",
    "append_message",
    "append_model_change",
    "append_session_info",
    "append_thinking_level_change",
    "build_context",
    "build_context_entries",
    "create_branch_summary_message",
    "create_compaction_summary_message",
    "create_custom_message",
    "create_timestamp",
    "default_context_entry_transform",
    "derive_session_context_state",
    "find_entries",
    "get_branch",
    "get_children",
    "get_entries",
    "get_entries_to_fork",
    "get_entry",
    "get_label",
    "get_leaf_id",
    "get_path_to_root_or_compaction",
    "get_session_name",
    "get_session_stats",
    "merge_context_build_options",
    "move_to",
    "open_session",
    "session_entry_to_context_messages",
]
