"""The session aggregate: the state the invariants need, the commands and the projector.

In eventsourcing's functional style (its ``aggregate6`` example): a command is a function of the current state that
checks the invariants of SPEC 2.3 and returns the event(s) to record, changing nothing; :func:`project` is the one
function that folds an event into the state, just saved or replayed. Ids and timestamps are parameters, so the caller
injects the id generator and the clock. Everything a reader wants is a projection (``sessiontree.projections``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import attrs

from sessiontree.domain import events as ev
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry, LeafMoved, MessageAppended, SessionStarted, leaf_after
from sessiontree.domain.log import EntryLog
from sessiontree.domain.messages import INT_LIMIT, MESSAGE_TYPES, CustomMessage, Usage
from sessiontree.domain.values import check_content, check_message, check_str, check_usage, json_value

E = TypeVar("E", bound=Entry)


@attrs.define(eq=False)
class SessionAggregate:
    """One session: its header, its append-only tree of entries, the leaf and the version (events folded; the header is 1)."""

    header: SessionStarted
    log: EntryLog
    leaf_id: str | None = None
    version: int = 1
    id: str = attrs.field(init=False)  # the session id (the header's originator id)

    def __attrs_post_init__(self) -> None:
        self.id = self.header.originator_id

    def __contains__(self, entry_id: str) -> bool:
        return self.log.has(entry_id)


def start(
    *, session_id: str, timestamp: str, cwd: str = "", parent_session: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> SessionStarted:
    """The header event of a new session."""
    for name, value in (("session_id", session_id), ("cwd", cwd), ("timestamp", timestamp)):
        check_str(name, value)
    check_str("parent_session", parent_session, optional=True)
    if not session_id:
        raise SessionError("invalid_entry", "session id must not be empty")
    try:
        ev.parse_timestamp(timestamp)
    except ValueError:
        raise SessionError("invalid_entry", f"session timestamp {timestamp!r} is not ISO 8601") from None
    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping or None, not {metadata!r}")
    return SessionStarted(
        originator_id=session_id, timestamp=timestamp, cwd=cwd, version=ev.FORMAT_VERSION,
        parent_session=parent_session, metadata=json_value("metadata", dict(metadata or {})),
    )


def replay(header: SessionStarted, log: EntryLog) -> SessionAggregate:
    """The aggregate after its header and every entry of ``log`` (read from a storage)."""
    return SessionAggregate(header, log, leaf_at(log, len(log)), header.originator_version + len(log))


def leaf_at(log: EntryLog, count: int) -> str | None:
    """The leaf after the first ``count`` entries of ``log`` (only a ``leaf`` entry is decoded)."""
    if not count:
        return None
    last = count - 1
    return leaf_after(log.get(last)) if log.type_of(last) == "leaf" else log.id_of(last)


def _refuse(aggregate: SessionAggregate, event: Entry) -> None:
    # eventsourcing's own errors; its domain module is imported only here, since a reader never needs it (~30 ms)
    from eventsourcing.domain import OriginatorIDError, OriginatorVersionError

    if event.originator_version != aggregate.version + 1:
        raise OriginatorVersionError(event.originator_version, aggregate.version + 1)
    raise OriginatorIDError(event.originator_id, aggregate.id)


def project(aggregate: SessionAggregate, event: Entry) -> SessionAggregate:
    """Fold an entry event, which must be the aggregate's next (eventsourcing's rule), into it; it sets the leaf (SPEC 2.4)."""
    if event.originator_version != aggregate.version + 1 or event.originator_id != aggregate.id:
        _refuse(aggregate, event)
    aggregate.log.add(event)
    aggregate.leaf_id = event.target_id if isinstance(event, LeafMoved) else event.id  # SPEC 2.4
    aggregate.version += 1
    return aggregate


def take_in(aggregate: SessionAggregate, event: Entry) -> SessionAggregate:
    """Fold an entry another writer appended: into the log, numbered next, but the leaf stays where this writer's own
    appends put it (each writer keeps its own leaf; the log's is the last append's, :func:`leaf_at`)."""
    if event.originator_version != aggregate.version + 1 or event.originator_id != aggregate.id:
        _refuse(aggregate, event)
    if aggregate.log.has(event.id):
        raise SessionError("corrupt", f"session {aggregate.id}: another writer appended entry {event.id!r}, an id the log "
                           "already holds (run verify)")
    aggregate.log.add(event)
    aggregate.version += 1
    return aggregate


def on_branch(aggregate: SessionAggregate, entry_id: str, leaf_id: str | None) -> bool:
    """Is ``entry_id`` on the root-to-leaf path ending at ``leaf_id``?"""
    log = aggregate.log
    target = log.position(entry_id)
    pos = log.position(leaf_id) if leaf_id is not None else None
    if target is None or pos is None:
        return False
    _, ppos = log.links()
    while pos > target:
        pos = ppos[pos]
    return pos == target


def _next(aggregate: SessionAggregate, event_class: type[E], id: str, timestamp: str, **fields: Any) -> E:
    """The aggregate's next event: numbered after it, hanging under its leaf."""
    if aggregate.log.has(id):
        raise SessionError("already_exists", f"entry {id!r} already exists in session {aggregate.id}")
    return event_class(
        originator_id=aggregate.id, originator_version=aggregate.version + 1, id=id,
        parent_id=aggregate.leaf_id, timestamp=timestamp, **fields,
    )


def _needs(aggregate: SessionAggregate, entry_id: str, what: str) -> None:
    if entry_id not in aggregate:
        raise SessionError("not_found", f"{what} {entry_id!r} not found in session {aggregate.id}")


def append_message(aggregate: SessionAggregate, message: Any, *, id: str, timestamp: str) -> MessageAppended:
    check_message("message", message)
    return _next(aggregate, MessageAppended, id, timestamp, message=message)


def append_thinking_level_change(aggregate: SessionAggregate, level: str, *, id: str, timestamp: str) -> ev.ThinkingLevelChanged:
    check_str("thinking_level", level)
    if level not in ev.THINKING_LEVELS:
        raise SessionError("invalid_entry", f"thinking level {level!r} is not one of {', '.join(ev.THINKING_LEVELS)}")
    return _next(aggregate, ev.ThinkingLevelChanged, id, timestamp, thinking_level=level)


def append_model_change(aggregate: SessionAggregate, provider: str, model_id: str, *, id: str, timestamp: str) -> ev.ModelChanged:
    check_str("provider", provider)
    check_str("model_id", model_id)
    if not provider or not model_id:
        raise SessionError("invalid_entry", f"provider and model_id must not be empty ({provider!r}, {model_id!r})")
    return _next(aggregate, ev.ModelChanged, id, timestamp, provider=provider, model_id=model_id)


def append_active_tools_change(
    aggregate: SessionAggregate, names: Sequence[str], *, id: str, timestamp: str
) -> ev.ActiveToolsChanged:
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise TypeError(f"active tool names must be a list of str, not {names!r}")
    for name in names:
        check_str("active tool name", name)
    return _next(aggregate, ev.ActiveToolsChanged, id, timestamp, active_tool_names=tuple(names))


def append_compaction(
    aggregate: SessionAggregate, summary: str, first_kept_entry_id: str | None, tokens_before: int, *,
    id: str, timestamp: str, details: Any = None, from_hook: bool = False, usage: Usage | None = None,
    retained_tail: Sequence[Any] | None = None,
) -> ev.ContextCompacted:
    check_str("summary", summary)
    check_str("first_kept_entry_id", first_kept_entry_id, optional=True)
    if isinstance(tokens_before, bool) or not isinstance(tokens_before, int):
        raise TypeError(f"tokens_before must be an int, not {tokens_before!r}")
    if tokens_before < 0:
        raise SessionError("invalid_entry", f"tokens_before must be >= 0, not {tokens_before}")
    if tokens_before > INT_LIMIT:  # an erasure keeps it, and verify refuses a stub holding a wider integer
        raise ValueError(f"tokens_before must be within 64 bits, not a {len(str(tokens_before))}-digit integer")
    _check_bool("from_hook", from_hook)
    check_usage(usage)
    if first_kept_entry_id is not None:
        _needs(aggregate, first_kept_entry_id, "first_kept_entry_id")
        if not on_branch(aggregate, first_kept_entry_id, aggregate.leaf_id):
            raise SessionError(
                "invalid_entry",
                f"first_kept_entry_id {first_kept_entry_id!r} is not on the current branch of session {aggregate.id}",
            )
    tail = None
    if retained_tail is not None:
        if not isinstance(retained_tail, (list, tuple)) or not all(isinstance(m, MESSAGE_TYPES) for m in retained_tail):
            raise TypeError(f"retained_tail must be a list of messages or None, not {retained_tail!r}")
        tail = tuple(retained_tail)
        for message in tail:
            check_message("retained_tail", message)
    return _next(
        aggregate, ev.ContextCompacted, id, timestamp, summary=summary, first_kept_entry_id=first_kept_entry_id,
        tokens_before=tokens_before, retained_tail=tail, details=json_value("details", details), usage=usage,
        from_hook=from_hook,
    )


def append_custom_entry(
    aggregate: SessionAggregate, custom_type: str, data: Any, *, id: str, timestamp: str
) -> ev.CustomEntryAppended:
    _check_custom_type(custom_type)
    return _next(aggregate, ev.CustomEntryAppended, id, timestamp, custom_type=custom_type, data=json_value("custom data", data))


def append_custom_message_entry(
    aggregate: SessionAggregate, custom_type: str, content: Any, *, id: str, timestamp: str, details: Any = None,
    display: bool = True,
) -> ev.CustomMessageAppended:
    _check_custom_type(custom_type)
    _check_bool("display", display)
    checked = check_content("content", content)
    check_message("custom message", CustomMessage(custom_type=custom_type, content=checked))
    return _next(
        aggregate, ev.CustomMessageAppended, id, timestamp, custom_type=custom_type, content=checked,
        details=json_value("details", details), display=display,
    )


def append_label_change(
    aggregate: SessionAggregate, target_id: str, label: str | None, *, id: str, timestamp: str
) -> ev.LabelChanged:
    check_str("target_id", target_id)
    check_str("label", label, optional=True)
    _needs(aggregate, target_id, "label target")
    return _next(aggregate, ev.LabelChanged, id, timestamp, target_id=target_id, label=label)


def append_session_info(aggregate: SessionAggregate, name: str | None, *, id: str, timestamp: str) -> ev.SessionRenamed:
    check_str("name", name, optional=True)
    return _next(aggregate, ev.SessionRenamed, id, timestamp, name=name)


def move_to(
    aggregate: SessionAggregate, target_id: str | None, *, id: str, timestamp: str,
    summary: Mapping[str, Any] | None = None, summary_id: str = "", summary_timestamp: str = "",
) -> list[Entry]:
    """Record that the leaf moved to ``target_id`` (a ``leaf`` entry), and with ``summary`` (keys ``summary``, ``details``,
    ``usage``, ``from_hook``) a branch summary under the target, which becomes the leaf: both returned, to be saved together."""
    check_str("entry_id", target_id, optional=True)
    if target_id is not None:
        _needs(aggregate, target_id, "entry")
        if aggregate.log.type_of(aggregate.log.position(target_id) or 0) == "leaf":
            raise SessionError(
                "invalid_entry", f"entry {target_id!r} is a leaf record, not a place in the tree (session {aggregate.id})"
            )
    moved: LeafMoved = _next(aggregate, LeafMoved, id, timestamp, target_id=target_id)
    if summary is None:
        return [moved]
    if summary_id in aggregate or summary_id == id:
        raise SessionError("already_exists", f"entry {summary_id!r} already exists in session {aggregate.id}")
    text, usage, from_hook = check_str("summary", summary.get("summary")), summary.get("usage"), summary.get("from_hook", False)
    check_usage(usage)
    _check_bool("from_hook", from_hook)
    branch = ev.BranchSummarized(
        originator_id=aggregate.id, originator_version=moved.originator_version + 1, id=summary_id,
        parent_id=target_id, timestamp=summary_timestamp or timestamp, from_id=target_id if target_id is not None else "root",
        summary=text, details=json_value("details", summary.get("details")), usage=usage, from_hook=from_hook,
    )
    return [moved, branch]


def _check_custom_type(custom_type: Any) -> None:
    check_str("custom_type", custom_type)
    if not custom_type:
        raise SessionError("invalid_entry", "custom_type must not be empty")


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {value!r}")
