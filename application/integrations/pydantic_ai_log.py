"""What a conversation's session says, folded from its entries: the messages it carries, the record, head and revision.

The store keeps the fold of each conversation it read last and, on the next read, folds only the entries appended
since (``iter_heads`` lists the log without decoding it), so a save on a long conversation decodes a few entries rather
than all of them. A fold never changes: extending one makes a new one, so worker threads can share them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from pydantic_ai.conversation_store import ConversationRecord

from sessiontree.domain.events import parse_timestamp
from sessiontree.domain.log import Head
from sessiontree.integrations import pydantic_ai_messages as mapping
from sessiontree.session import Session

Carrier = tuple[Mapping[str, Any], str | None]  # a serialised message and its entry's parent, as pydantic-ai sees it


@attrs.frozen
class ConversationLog:
    """The fold of a session's first ``count`` entries (``marker`` None: the session is not a conversation)."""

    session_id: str
    started: str  # the header's timestamp: a session deleted and made again under the same id is another log
    marker: Mapping[str, Any] | None  # the header metadata's "pydantic_ai": {"scope": ...}
    metadata: Mapping[str, Any]
    count: int = 0
    last_id: str | None = None
    carriers: Mapping[str, Carrier] = attrs.field(factory=dict)
    nearest: Mapping[str, str | None] = attrs.field(factory=dict)  # entry (leaf moves aside) -> the carrier at or above it
    record: Mapping[str, Any] | None = None  # the latest record entry's data
    record_is_last: bool = False

    @property
    def scope(self) -> str | None:
        scope = self.marker.get("scope") if self.marker is not None else None
        return scope if isinstance(scope, str) else None

    def head(self, leaf: str | None) -> str | None:
        """The message entry pydantic-ai's head is, for a leaf: the carrier at or above it."""
        return self.nearest.get(leaf) if leaf is not None else None


def read_log(session: Session, known: ConversationLog | None = None) -> ConversationLog:
    """The session's fold: ``known`` extended by the entries appended since, or folded from the start when ``known`` is
    of another log (none, or cut back, or replaced)."""
    started = session.header.timestamp
    marker = session.header.metadata.get(mapping.PAYLOAD_KEY)
    if not isinstance(marker, Mapping):
        return ConversationLog(session.id, started, None, session.header.metadata)
    heads = list(session.iter_heads())
    if known is None or not _continues(known, started, heads):
        known = ConversationLog(session.id, started, marker, session.header.metadata)
    if known.count == len(heads):
        return known
    return _extended(known, session, heads)


def _continues(known: ConversationLog, started: str, heads: Sequence[Head]) -> bool:
    count = known.count
    return known.started == started and count <= len(heads) and (count == 0 or heads[count - 1].id == known.last_id)


def _extended(known: ConversationLog, session: Session, heads: Sequence[Head]) -> ConversationLog:
    carriers, nearest = dict(known.carriers), dict(known.nearest)
    record, record_is_last = known.record, known.record_is_last
    for head in heads[known.count:]:
        record_is_last = False
        if head.type == "leaf":
            continue  # a side record: never a parent, never the leaf
        above = nearest.get(head.parent_id) if head.parent_id is not None else None
        entry = session.entry(head.id) if head.type in ("message", "custom") else None
        payload = mapping.payload_of(entry) if entry is not None else None
        if payload is not None:
            carriers[head.id] = (payload, above)
        nearest[head.id] = head.id if payload is not None else above
        data = mapping.record_entry_data(entry) if entry is not None else None
        if data is not None:
            record, record_is_last = data, True
    return attrs.evolve(known, count=len(heads), last_id=heads[-1].id, carriers=carriers, nearest=nearest, record=record,
                        record_is_last=record_is_last)


def record_of(log: ConversationLog, session: Session) -> ConversationRecord:
    """The conversation's record: the latest record entry, the head from the leaf, the scope from the header.

    The revision is the token the latest save wrote while that save's record entry is the last event; anything appended
    since (a leaf moved with the command line, a save cut short) makes it ``<token>@<version>``, so a writer that read
    before is refused."""
    token = str(log.record.get("revision", "")) if log.record is not None else ""
    revision = token if log.record_is_last else f"{token}@{session.version}"
    head = log.head(session.leaf_id)
    if log.record is None:  # no save completed: the first one was cut short
        moment = session.entry(log.last_id).timestamp if log.last_id is not None else session.header.timestamp
        return ConversationRecord(conversation_id=session.id, head_id=head, scope=log.scope, revision=revision,
                                  updated_at=parse_timestamp(moment))
    return mapping.record_from(log.record, conversation_id=session.id, head_id=head, scope=log.scope, revision=revision)
