"""The session aggregate: the state commands need, and the commands that append entries.

State is only what the invariants of SPEC 2.3 need: the header, the entry log (ids,
parents, types) and the leaf. Everything a reader wants (labels, names, context, stats)
is a projection (``sessiontree.projections``).

Commands validate against current state and then trigger an event; ids and timestamps
are parameters, so the caller (the Session service) injects the id generator and clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from eventsourcing.domain import BaseAggregate

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import (
    FORMAT_VERSION,
    THINKING_LEVELS,
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
from sessiontree.domain.jsonvalue import check_value, json_value
from sessiontree.domain.log import EntryLog, LazyBlock
from sessiontree.domain.messages import (
    CONTENT_TYPES,
    MESSAGE_TYPES,
    CustomMessage,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UnknownMessage,
    Usage,
)

_KNOWN_ROLES = frozenset(c.role for c in MESSAGE_TYPES if c is not UnknownMessage)  # type: ignore[attr-defined]
_KNOWN_BLOCKS = frozenset(c.type for c in CONTENT_TYPES if c is not UnknownContent)  # type: ignore[attr-defined]


def leaf_after(entry: Any) -> str | None:
    """The leaf once ``entry`` is appended (SPEC 2.4): a leaf entry's target, else its id."""
    if entry.type == "leaf":
        if isinstance(entry, Entry):
            return entry.target_id  # type: ignore[attr-defined,no-any-return]
        return entry.load().target_id  # type: ignore[no-any-return]
    return entry.id  # type: ignore[no-any-return]


def _check_str(name: str, value: Any, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str{' or None' if optional else ''}, not {value!r}")


def _check_usage(usage: Any) -> None:
    if usage is not None and not isinstance(usage, Usage):
        raise TypeError(f"usage must be a Usage or None, not {usage!r}")


def _check_content(name: str, content: Any) -> tuple[Any, ...] | str:
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)) and all(isinstance(b, CONTENT_TYPES) for b in content):
        return tuple(content)
    raise TypeError(f"{name} must be a str or a list of content blocks, not {content!r}")


class _FreeFields(dict):  # type: ignore[type-arg]
    """The fields of the message and block classes that hold free-form JSON values (the
    rest are typed, and their classes validate them); a subclass has its base's."""

    def __missing__(self, cls: type) -> tuple[str, ...]:
        found = next((names for base, names in list(self.items()) if issubclass(cls, base)), ())
        self[cls] = found
        return found


_FREE_FIELDS = _FreeFields(
    {
        **{cls: () for cls in (*MESSAGE_TYPES, *CONTENT_TYPES)},
        ToolCall: ("arguments",),
        ToolResultMessage: ("details",),
        CustomMessage: ("details",),
        UnknownMessage: ("data",),
        UnknownContent: ("data",),
    }
)


def _check_message(where: str, message: Any) -> None:
    """What a message must hold to be written and read back the same, checked in one walk
    (it runs on every append):

    - every free-form value (details, tool arguments, unknown fields) is JSON
      (:func:`~sessiontree.domain.jsonvalue.check_value`);
    - an Unknown* stand-in does not use a known role or block type: it would be written
      without the fields that role or type needs, and could not be read back;
    - no unknown field (``extra``) is named ``role`` (of a message) or ``type`` (of a
      block): written over the tag, it would make the line unreadable too.
    """
    cls = message.__class__
    if isinstance(message, UnknownMessage) and message.role in _KNOWN_ROLES:
        raise SessionError(
            "invalid_entry", f"{where}: role {message.role!r} is known; build its message class instead"
        )
    extra = getattr(message, "extra", None)
    if extra:
        if "role" in extra:
            raise SessionError("invalid_entry", f"{where}: an unknown field may not be named 'role' (it is the tag)")
        check_value(where, extra, "extra")
    for name in _FREE_FIELDS[cls]:
        check_value(where, getattr(message, name), name)
    content = getattr(message, "content", None)
    if isinstance(content, tuple):  # a str, or the blocks (a tuple subclass too)
        for block in content:
            bcls = block.__class__
            if isinstance(block, UnknownContent) and block.type in _KNOWN_BLOCKS:
                raise SessionError(
                    "invalid_entry", f"{where}: block type {block.type!r} is known; build its block class instead"
                )
            extra = getattr(block, "extra", None)
            if extra:
                if "type" in extra:
                    raise SessionError(
                        "invalid_entry", f"{where}: an unknown field of a block may not be named 'type' (it is the tag)"
                    )
                check_value(where, extra, "extra")
            for name in _FREE_FIELDS[bcls]:
                check_value(where, getattr(block, name), name)
    usage = getattr(message, "usage", None)
    if usage is not None:
        if usage.extra:
            check_value(where, usage.extra, "extra")
        if usage.cost.extra:
            check_value(where, usage.cost.extra, "extra")


class SessionAggregate(BaseAggregate[str]):
    """One session: a header and an append-only tree of entries."""

    INITIAL_VERSION = 1

    # -- construction ---------------------------------------------------------------

    @classmethod
    def create(
        cls,
        *,
        session_id: str,
        timestamp: str,
        cwd: str = "",
        parent_session: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> SessionAggregate:
        """Start a new session (the header event is pending until saved)."""
        _check_str("session_id", session_id)
        _check_str("cwd", cwd)
        _check_str("parent_session", parent_session, optional=True)
        _check_str("timestamp", timestamp)
        if not session_id:
            raise SessionError("invalid_entry", "session id must not be empty")
        try:
            parse_timestamp(timestamp)
        except ValueError:
            raise SessionError("invalid_entry", f"session timestamp {timestamp!r} is not ISO 8601") from None
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TypeError(f"metadata must be a mapping or None, not {metadata!r}")
        header = SessionStarted(
            originator_id=session_id,
            originator_version=cls.INITIAL_VERSION,
            timestamp=timestamp,
            cwd=cwd,
            version=FORMAT_VERSION,
            parent_session=parent_session,
            metadata=dict(metadata or {}),
        )
        agg = cls.started(header)
        agg._pending_events.append(header)
        return agg

    @classmethod
    def started(cls, header: SessionStarted) -> SessionAggregate:
        """The aggregate right after its header (used on create and on replay)."""
        agg = cls.__new__(cls)
        agg.__base_init__(header.originator_id, header.originator_version, header.timestamp)
        agg.header = header
        agg.log = EntryLog()
        agg.leaf_id = None
        return agg

    @classmethod
    def replay(cls, header: SessionStarted, entries: Iterable[Any]) -> SessionAggregate:
        """Rebuild from stored events: the header, then entries or lazy entries in order.

        Equivalent to folding each event's ``mutate`` (eventsourcing's projector) but it
        accepts lazy entries, so a storage can index a log without decoding it.
        """
        agg = cls.started(header)
        log = agg.log
        if isinstance(entries, LazyBlock):
            log.extend_block(entries, f" in session {header.originator_id}")
            agg.leaf_id = leaf_after(log.head(len(log) - 1)) if len(log) else None
            agg._version = header.originator_version + len(log)
            return agg
        leaf = None
        for entry in entries:
            if entry.id in log._index:
                raise SessionError(
                    "corrupt", f"duplicate entry id {entry.id!r} in session {header.originator_id}"
                )
            log.add(entry)
            leaf = leaf_after(entry)
        agg.leaf_id = leaf
        agg._version = header.originator_version + len(log)
        return agg

    header: SessionStarted
    log: EntryLog
    leaf_id: str | None

    # -- event handling -------------------------------------------------------------

    def collect_events(self) -> list[Any]:  # type: ignore[override]
        """The pending events, oldest first; the pending list starts empty again."""
        events = self._pending_events
        self._pending_events = []
        return events

    def rollback(self, version: int) -> None:
        """Forget events after ``version`` (an append whose save failed is undone)."""
        length = version - self.INITIAL_VERSION
        self.log.truncate(length)
        self._version = version
        self._pending_events.clear()
        self.leaf_id = leaf_after(self.log.head(length - 1)) if length > 0 else None

    # -- queries the commands need --------------------------------------------------

    def has_entry(self, entry_id: str) -> bool:
        return entry_id in self.log._index

    def on_branch(self, entry_id: str, leaf_id: str | None) -> bool:
        """Is ``entry_id`` on the root-to-leaf path ending at ``leaf_id``?"""
        log = self.log
        target = log.position(entry_id)
        if target is None:
            return False
        pos = log.position(leaf_id) if leaf_id is not None else None
        if pos is None:
            return False
        _, ppos = log.links()
        while pos > target:
            pos = ppos[pos]
        return pos == target

    def new_entry_id(self, generate: Callable[[], str]) -> str:
        """A fresh id from ``generate``, regenerated on collision (SPEC 2.2)."""
        index = self.log._index
        candidate = generate()
        if candidate.__class__ is str and candidate and candidate not in index:
            return candidate  # the usual case, without the loop below (it runs on every append)
        for attempt in range(100):
            if attempt:
                candidate = generate()
            if not isinstance(candidate, str) or not candidate:
                raise TypeError(f"the id generator must return non-empty str ids, not {candidate!r}")
            if candidate not in index:
                return candidate
        raise SessionError("invalid_entry", "the id generator kept returning ids already in use")

    # -- commands -------------------------------------------------------------------

    def _append(self, event_class: type[Entry], *, id: str, timestamp: str, **fields: Any) -> str:
        if id in self.log._index:
            raise SessionError("already_exists", f"entry {id!r} already exists in session {self.id}")
        # eventsourcing's trigger_event, lean (it runs on every append): the event is made as
        # the next in this aggregate's sequence, applied, and waits in the pending list.
        # (trigger_event also checks explicit topics, which this aggregate has none of, and
        # passes its arguments on through two more copies: ~0.7 µs of an append. The checks
        # of Entry.mutate, the event's id and version, hold here by construction.)
        return self._record(
            event_class(
                originator_id=self._id,
                originator_version=self._version + 1,
                id=id,
                parent_id=self.leaf_id,
                timestamp=timestamp,
                **fields,
            )
        )

    def _record(self, event: Entry) -> str:
        """Apply ``event``, made as this aggregate's next (see :meth:`_append`), and queue it."""
        event.apply(self)
        self._version = event.originator_version
        self._modified_on = event.timestamp
        self._pending_events.append(event)
        return event.id

    def append_message(self, message: Any, *, id: str, timestamp: str) -> str:
        if not isinstance(message, MESSAGE_TYPES):
            raise TypeError(f"message must be a message object (UserMessage, ...), not {message!r}")
        _check_message("message", message)
        if id in self.log._index:  # what _append checks; the event is made here without its **fields (every append)
            raise SessionError("already_exists", f"entry {id!r} already exists in session {self.id}")
        return self._record(
            MessageAppended(
                originator_id=self._id,
                originator_version=self._version + 1,
                id=id,
                parent_id=self.leaf_id,
                timestamp=timestamp,
                message=message,
            )
        )

    def append_thinking_level_change(self, level: str, *, id: str, timestamp: str) -> str:
        _check_str("thinking_level", level)
        if level not in THINKING_LEVELS:
            raise SessionError(
                "invalid_entry",
                f"thinking level {level!r} is not one of {', '.join(THINKING_LEVELS)}",
            )
        return self._append(ThinkingLevelChanged, id=id, timestamp=timestamp, thinking_level=level)

    def append_model_change(self, provider: str, model_id: str, *, id: str, timestamp: str) -> str:
        _check_str("provider", provider)
        _check_str("model_id", model_id)
        if not provider or not model_id:
            raise SessionError(
                "invalid_entry", f"provider and model_id must not be empty ({provider!r}, {model_id!r})"
            )
        return self._append(ModelChanged, id=id, timestamp=timestamp, provider=provider, model_id=model_id)

    def append_active_tools_change(self, names: Sequence[str], *, id: str, timestamp: str) -> str:
        if isinstance(names, str) or not isinstance(names, (list, tuple)):
            raise TypeError(f"active tool names must be a list of str, not {names!r}")
        for name in names:
            _check_str("active tool name", name)
        return self._append(
            ActiveToolsChanged, id=id, timestamp=timestamp, active_tool_names=tuple(names)
        )

    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        *,
        id: str,
        timestamp: str,
        details: Any = None,
        from_hook: bool = False,
        usage: Usage | None = None,
        retained_tail: Sequence[Any] | None = None,
    ) -> str:
        _check_str("summary", summary)
        _check_str("first_kept_entry_id", first_kept_entry_id, optional=True)
        if isinstance(tokens_before, bool) or not isinstance(tokens_before, int):
            raise TypeError(f"tokens_before must be an int, not {tokens_before!r}")
        if tokens_before < 0:
            raise SessionError("invalid_entry", f"tokens_before must be >= 0, not {tokens_before}")
        if not isinstance(from_hook, bool):
            raise TypeError(f"from_hook must be a bool, not {from_hook!r}")
        _check_usage(usage)
        if first_kept_entry_id is not None and not self.has_entry(first_kept_entry_id):
            raise SessionError(
                "not_found",
                f"first_kept_entry_id {first_kept_entry_id!r} not found in session {self.id}",
            )
        if first_kept_entry_id is not None and not self.on_branch(first_kept_entry_id, self.leaf_id):
            raise SessionError(
                "invalid_entry",
                f"first_kept_entry_id {first_kept_entry_id!r} is not on the current branch "
                f"of session {self.id}",
            )
        tail = None
        if retained_tail is not None:
            if not isinstance(retained_tail, (list, tuple)) or not all(
                isinstance(m, MESSAGE_TYPES) for m in retained_tail
            ):
                raise TypeError(f"retained_tail must be a list of messages or None, not {retained_tail!r}")
            tail = tuple(retained_tail)
            for message in tail:
                _check_message("retained_tail", message)
        return self._append(
            ContextCompacted,
            id=id,
            timestamp=timestamp,
            summary=summary,
            first_kept_entry_id=first_kept_entry_id,
            tokens_before=tokens_before,
            retained_tail=tail,
            details=json_value("details", details),
            usage=usage,
            from_hook=from_hook,
        )

    def append_custom_entry(self, custom_type: str, data: Any, *, id: str, timestamp: str) -> str:
        _check_str("custom_type", custom_type)
        if not custom_type:
            raise SessionError("invalid_entry", "custom_type must not be empty")
        data = json_value("custom data", data)
        return self._append(CustomEntryAppended, id=id, timestamp=timestamp, custom_type=custom_type, data=data)

    def append_custom_message_entry(
        self,
        custom_type: str,
        content: Any,
        *,
        id: str,
        timestamp: str,
        details: Any = None,
        display: bool = True,
    ) -> str:
        _check_str("custom_type", custom_type)
        if not custom_type:
            raise SessionError("invalid_entry", "custom_type must not be empty")
        if not isinstance(display, bool):
            raise TypeError(f"display must be a bool, not {display!r}")
        checked = _check_content("content", content)
        as_message = CustomMessage(custom_type=custom_type, content=checked)
        _check_message("custom message", as_message)
        return self._append(
            CustomMessageAppended,
            id=id,
            timestamp=timestamp,
            custom_type=custom_type,
            content=checked,
            details=json_value("details", details),
            display=display,
        )

    def append_label_change(self, target_id: str, label: str | None, *, id: str, timestamp: str) -> str:
        _check_str("target_id", target_id)
        _check_str("label", label, optional=True)
        if not self.has_entry(target_id):
            raise SessionError("not_found", f"label target {target_id!r} not found in session {self.id}")
        return self._append(LabelChanged, id=id, timestamp=timestamp, target_id=target_id, label=label)

    def append_session_info(self, name: str | None, *, id: str, timestamp: str) -> str:
        _check_str("name", name, optional=True)
        return self._append(SessionRenamed, id=id, timestamp=timestamp, name=name)

    def move_to(self, target_id: str | None, *, id: str, timestamp: str) -> str:
        """Record that the leaf moved to ``target_id`` (a ``leaf`` entry)."""
        _check_str("entry_id", target_id, optional=True)
        if target_id is not None and not self.has_entry(target_id):
            raise SessionError("not_found", f"entry {target_id!r} not found in session {self.id}")
        if target_id is not None and self.log.type_of(self.log._index[target_id]) == "leaf":
            raise SessionError(
                "invalid_entry",
                f"entry {target_id!r} is a leaf record, not a place in the tree (session {self.id})",
            )
        return self._append(LeafMoved, id=id, timestamp=timestamp, target_id=target_id)

    def append_branch_summary(
        self,
        from_id: str,
        summary: str,
        *,
        id: str,
        timestamp: str,
        details: Any = None,
        usage: Usage | None = None,
        from_hook: bool = False,
    ) -> str:
        _check_str("from_id", from_id)
        _check_str("summary", summary)
        _check_usage(usage)
        if not isinstance(from_hook, bool):
            raise TypeError(f"from_hook must be a bool, not {from_hook!r}")
        if from_id != "root" and not self.has_entry(from_id):
            raise SessionError("not_found", f"entry {from_id!r} not found in session {self.id}")
        return self._append(
            BranchSummarized,
            id=id,
            timestamp=timestamp,
            from_id=from_id,
            summary=summary,
            details=json_value("details", details),
            usage=usage,
            from_hook=from_hook,
        )
