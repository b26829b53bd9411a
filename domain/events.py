"""The session header and the entry types: immutable events on the session aggregate.

Each class is named for what happened; its ``type`` is the entry type a user asks for
(``session.find_entries("message")``). Field names are the wire names of SPEC 2.2. The
event's ``timestamp`` is the entry's ISO 8601 string, kept verbatim, and ``extra``
holds unknown wire fields so nothing a producer wrote is lost.

Events are attrs classes built on eventsourcing's ``CanMutateAggregate`` protocol
(``slots=False``: eventsourcing uses ``vars(event)``). ``apply`` only records the event on
the aggregate; invariants are checked by the aggregate's commands before an event exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, ClassVar

from attrs import field, frozen
from eventsourcing.domain import (
    CanInitAggregate,
    CanMutateAggregate,
    OriginatorIDError,
    OriginatorVersionError,
)

from sessiontree.domain.messages import Content, Message, Usage

if TYPE_CHECKING:
    from sessiontree.domain.aggregate import SessionAggregate

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
FORMAT_VERSION = 3


def parse_timestamp(value: str) -> datetime:
    """Parse an entry timestamp (ISO 8601, ``Z`` or an offset) into an aware datetime."""
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed


def format_timestamp(moment: datetime) -> str:
    """Format an aware datetime the way JavaScript's ``toISOString`` does (ms and ``Z``)."""
    utc = moment if moment.tzinfo is timezone.utc else moment.astimezone(timezone.utc)
    # Not strftime: its %Y does not zero-pad years before 1000 on every platform.
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:"
        f"{utc.second:02d}.{utc.microsecond // 1000:03d}Z"
    )


@frozen(slots=False, kw_only=True)
class SessionStarted(CanInitAggregate[str]):
    """The header: the session was created (always the first event, version 1)."""

    type: ClassVar[str] = "session"
    originator_id: str
    originator_version: int
    timestamp: str
    cwd: str = ""
    version: int = FORMAT_VERSION
    parent_session: str | None = None
    metadata: Mapping[str, Any] = field(factory=dict)
    extra: Mapping[str, Any] = field(factory=dict)

    @property
    def id(self) -> str:
        return self.originator_id

    def mutate(self, aggregate: Any) -> Any:
        """Create the aggregate (no topic is resolved: the class is fixed)."""
        from sessiontree.domain.aggregate import SessionAggregate

        assert aggregate is None
        return SessionAggregate.started(self)


@frozen(slots=False, kw_only=True)
class Entry(CanMutateAggregate[str]):
    """Base of every entry: its id, its parent and when it was appended."""

    type: ClassVar[str] = ""
    originator_id: str
    originator_version: int
    timestamp: str
    id: str
    parent_id: str | None
    extra: Mapping[str, Any] = field(factory=dict)

    def mutate(self, aggregate: Any) -> Any:
        """eventsourcing's ``CanMutateAggregate.mutate`` in one call, for eventsourcing's own
        callers (a projector folding events): the event must be the aggregate's next one;
        it is applied, then the aggregate's version and modification time are the event's.
        The commands make events that are the next by construction and record them without
        these checks (``SessionAggregate._record``)."""
        expected = aggregate._version + 1
        if self.originator_id != aggregate._id:
            raise OriginatorIDError(self.originator_id, aggregate._id)
        if self.originator_version != expected:
            raise OriginatorVersionError(self.originator_version, expected)
        self.apply(aggregate)
        aggregate._version = expected
        aggregate._modified_on = self.timestamp
        return aggregate

    def apply(self, aggregate: SessionAggregate) -> None:
        """The entry joins the log and becomes the leaf (SPEC 2.4)."""
        aggregate.log.add(self)
        aggregate.leaf_id = self.id

    @property
    def version(self) -> int:
        """Position of this entry's event in the session log (the header is 1)."""
        return self.originator_version

    @property
    def time(self) -> datetime:
        """The entry timestamp as an aware datetime."""
        return parse_timestamp(self.timestamp)


@frozen(slots=False, kw_only=True)
class MessageAppended(Entry):
    """A user, assistant, tool-result or other message was appended."""

    type: ClassVar[str] = "message"
    message: Message


@frozen(slots=False, kw_only=True)
class ThinkingLevelChanged(Entry):
    """The thinking level changed."""

    type: ClassVar[str] = "thinking_level_change"
    thinking_level: str


@frozen(slots=False, kw_only=True)
class ModelChanged(Entry):
    """The model changed."""

    type: ClassVar[str] = "model_change"
    provider: str
    model_id: str


@frozen(slots=False, kw_only=True)
class ActiveToolsChanged(Entry):
    """The set of active tools changed."""

    type: ClassVar[str] = "active_tools_change"
    active_tool_names: tuple[str, ...]


@frozen(slots=False, kw_only=True)
class ContextCompacted(Entry):
    """Older turns were replaced by a summary."""

    type: ClassVar[str] = "compaction"
    summary: str
    first_kept_entry_id: str | None
    tokens_before: int
    retained_tail: tuple[Message, ...] | None = None
    details: Any = None
    usage: Usage | None = None
    from_hook: bool = False


@frozen(slots=False, kw_only=True)
class BranchSummarized(Entry):
    """A branch that was left was summarised."""

    type: ClassVar[str] = "branch_summary"
    from_id: str
    summary: str
    details: Any = None
    usage: Usage | None = None
    from_hook: bool = False


@frozen(slots=False, kw_only=True)
class CustomEntryAppended(Entry):
    """App-defined data was recorded (never sent to the model unless a projector says so)."""

    type: ClassVar[str] = "custom"
    custom_type: str
    data: Any = None


@frozen(slots=False, kw_only=True)
class CustomMessageAppended(Entry):
    """An app-defined message for the model was appended."""

    type: ClassVar[str] = "custom_message"
    custom_type: str
    content: str | tuple[Content, ...]
    details: Any = None
    display: bool = True


@frozen(slots=False, kw_only=True)
class LabelChanged(Entry):
    """An entry's label was set (or cleared, with ``None`` or ``""``)."""

    type: ClassVar[str] = "label"
    target_id: str
    label: str | None


@frozen(slots=False, kw_only=True)
class SessionRenamed(Entry):
    """The session's name was set (or cleared, with ``None`` or ``""``)."""

    type: ClassVar[str] = "session_info"
    name: str | None


@frozen(slots=False, kw_only=True)
class LeafMoved(Entry):
    """The leaf moved to ``target_id`` (``None``: before the first entry)."""

    type: ClassVar[str] = "leaf"
    target_id: str | None

    def apply(self, aggregate: SessionAggregate) -> None:
        """The record joins the log; the leaf is its target (SPEC 2.4)."""
        aggregate.log.add(self)
        aggregate.leaf_id = self.target_id


@frozen(slots=False, kw_only=True)
class UnknownEntryAppended(Entry):
    """An entry of a type this library does not know; ``data`` keeps its own fields."""

    type: str  # type: ignore[misc]
    data: Mapping[str, Any] = field(factory=dict)


ENTRY_CLASSES: tuple[type[Entry], ...] = (
    MessageAppended,
    ThinkingLevelChanged,
    ModelChanged,
    ActiveToolsChanged,
    ContextCompacted,
    BranchSummarized,
    CustomEntryAppended,
    CustomMessageAppended,
    LabelChanged,
    SessionRenamed,
    LeafMoved,
)
ENTRY_CLASS_BY_TYPE: dict[str, type[Entry]] = {cls.type: cls for cls in ENTRY_CLASSES}
ENTRY_TYPES: tuple[str, ...] = tuple(ENTRY_CLASS_BY_TYPE)
