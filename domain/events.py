"""The session header and the entry types: immutable events on the session aggregate.

Each class is named for what happened; its ``type`` is the entry type (``session.find_entries("message")``). Fields have
the wire names of SPEC 2.2; ``extra`` holds unknown wire fields so nothing a producer wrote is lost. The events carry
eventsourcing's ``originator_id``, ``originator_version`` and ``timestamp``, but the timestamp is the entry's ISO 8601
text, kept verbatim: parsing and formatting it back would change other producers' lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

from attrs import field, frozen

from sessiontree.domain.messages import NO_EXTRA, Content, Message, Usage

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
FORMAT_VERSION = 3


def parse_timestamp(value: str) -> datetime:
    """Parse an entry timestamp (ISO 8601, ``Z`` or an offset) into an aware datetime."""
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def format_timestamp(moment: datetime) -> str:
    """Format an aware datetime the way JavaScript's ``toISOString`` does (ms and ``Z``)."""
    utc = moment if moment.tzinfo is UTC else moment.astimezone(UTC)
    # Not strftime: its %Y does not zero-pad years before 1000 on every platform.
    day = f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}"
    return f"{day}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}.{utc.microsecond // 1000:03d}Z"


@frozen(kw_only=True)
class SessionStarted:
    """The header: the session was created (always the first event, version 1)."""

    type: ClassVar[str] = "session"
    originator_id: str
    originator_version: int = 1
    timestamp: str
    cwd: str = ""
    version: int = FORMAT_VERSION
    parent_session: str | None = None
    metadata: Mapping[str, Any] = field(factory=dict)
    extra: Mapping[str, Any] = field(factory=dict)

    @property
    def id(self) -> str:
        return self.originator_id


@frozen(kw_only=True)
class Entry:
    """Base of every entry: its id, its parent and when it was appended."""

    type: ClassVar[str] = ""
    originator_id: str
    originator_version: int
    timestamp: str
    id: str
    parent_id: str | None
    extra: Mapping[str, Any] = NO_EXTRA  # fields a producer wrote that this library does not know

    @property
    def version(self) -> int:
        """Position of this entry's event in the session log (the header is 1)."""
        return self.originator_version

    @property
    def time(self) -> datetime:
        """The entry timestamp as an aware datetime."""
        return parse_timestamp(self.timestamp)


@frozen(kw_only=True)
class MessageAppended(Entry):
    """A user, assistant, tool-result or other message was appended."""

    type: ClassVar[str] = "message"
    message: Message


@frozen(kw_only=True)
class ThinkingLevelChanged(Entry):
    """The thinking level changed."""

    type: ClassVar[str] = "thinking_level_change"
    thinking_level: str


@frozen(kw_only=True)
class ModelChanged(Entry):
    """The model changed."""

    type: ClassVar[str] = "model_change"
    provider: str
    model_id: str


@frozen(kw_only=True)
class ActiveToolsChanged(Entry):
    """The set of active tools changed."""

    type: ClassVar[str] = "active_tools_change"
    active_tool_names: tuple[str, ...]


@frozen(kw_only=True)
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


@frozen(kw_only=True)
class BranchSummarized(Entry):
    """A branch that was left was summarised."""

    type: ClassVar[str] = "branch_summary"
    from_id: str
    summary: str
    details: Any = None
    usage: Usage | None = None
    from_hook: bool = False


@frozen(kw_only=True)
class CustomEntryAppended(Entry):
    """App-defined data was recorded (never sent to the model unless a projector says so)."""

    type: ClassVar[str] = "custom"
    custom_type: str
    data: Any = None


@frozen(kw_only=True)
class CustomMessageAppended(Entry):
    """An app-defined message for the model was appended."""

    type: ClassVar[str] = "custom_message"
    custom_type: str
    content: str | tuple[Content, ...]
    details: Any = None
    display: bool = True


@frozen(kw_only=True)
class LabelChanged(Entry):
    """An entry's label was set (or cleared, with ``None`` or ``""``)."""

    type: ClassVar[str] = "label"
    target_id: str
    label: str | None


@frozen(kw_only=True)
class SessionRenamed(Entry):
    """The session's name was set (or cleared, with ``None`` or ``""``)."""

    type: ClassVar[str] = "session_info"
    name: str | None


@frozen(kw_only=True)
class LeafMoved(Entry):
    """The leaf moved to ``target_id`` (``None``: before the first entry)."""

    type: ClassVar[str] = "leaf"
    target_id: str | None


@frozen(kw_only=True)
class UnknownEntryAppended(Entry):
    """An entry of a type this library does not know; ``data`` keeps all its wire fields."""

    type: str  # type: ignore[misc]  # a field here, where the known entry classes fix it per class
    data: Mapping[str, Any] = field(factory=dict)


ENTRY_CLASSES: tuple[type[Entry], ...] = (
    MessageAppended, ThinkingLevelChanged, ModelChanged, ActiveToolsChanged, ContextCompacted, BranchSummarized,
    CustomEntryAppended, CustomMessageAppended, LabelChanged, SessionRenamed, LeafMoved,
)
ENTRY_CLASS_BY_TYPE: dict[str, type[Entry]] = {cls.type: cls for cls in ENTRY_CLASSES}
ENTRY_TYPES: tuple[str, ...] = tuple(ENTRY_CLASS_BY_TYPE)


def leaf_after(entry: Any) -> str | None:
    """The leaf once ``entry`` is appended (SPEC 2.4): a leaf entry's target, else its id."""
    return entry.target_id if isinstance(entry, LeafMoved) else entry.id
