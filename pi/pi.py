"""The pi dialect: pi's session files, line by line (SPEC 4, docs/pi.md).

:class:`PiDialect` is pi's naming of the one schema (camelCase keys, its role and block names, its key order,
optional fields left out, JavaScript's number layout); :class:`PiCodec` adds what has no native counterpart: the
leaf marker (a ``leaf`` entry written as a ``custom`` entry pi resumes on) and the headers of pi's versions 1 to 3.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from sessiontree.domain import messages as m
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry, LeafMoved, SessionStarted, UnknownEntryAppended
from sessiontree.pi.pi_layout import js_float_value, js_items, js_values
from sessiontree.wire.codec import Codec, corrupt
from sessiontree.wire.encoders import Writers, refuse_clash
from sessiontree.wire.pi_names import (
    BLOCKS,
    CUSTOM_TYPE_KEY,
    FROM_ID_KEY,
    KEY_ORDER,
    PARENT_KEY,
    PARENT_SESSION_KEY,
    ROLES,
    THINKING_SIGNATURE_KEY,
)
from sessiontree.wire.pi_names import LEAF_MARKER_TYPE as LEAF_MARKER_TYPE  # its public name here too
from sessiontree.wire.schema import NATIVE, Dialect
from sessiontree.wire.schema import is_pi_header as is_pi_header  # its public name here too

PI_VERSIONS = (1, 2, 3)
PI_PARENT_KEY = PARENT_KEY
NATIVE_PARENT_KEY = NATIVE.parent_key
_CAMEL = re.compile(r"_([a-z0-9])")
# Optional entry fields pi leaves out when they have no value (JSON.stringify drops
# ``undefined``), and the fields the domain requires that pi leaves out to mean null.
_ENTRY_OMIT_NONE = {
    "compaction": {"details", "usage", "retained_tail"}, "branch_summary": {"details", "usage"}, "custom": {"data"},
    "custom_message": {"details"}, "label": {"label"}, "session_info": {"name"},
}
_MAY_BE_ABSENT = {"label": {"label"}, "session_info": {"name"}}


def camel(name: str) -> str:
    """``first_kept_entry_id`` -> ``firstKeptEntryId``."""
    return _CAMEL.sub(lambda match: match.group(1).upper(), name)


class PiDialect(Dialect):
    """pi's names: camelCase fields, ``toolResult``/``toolCall`` tags, ``parentId``."""

    name = "pi"
    parent_key = PI_PARENT_KEY

    def field_name(self, cls: type, name: str) -> str:
        return THINKING_SIGNATURE_KEY if (cls, name) == (m.ThinkingContent, "signature") else camel(name)

    def role(self, role: str) -> str:
        return ROLES.get(role, role)

    def block_type(self, kind: str) -> str:
        return BLOCKS.get(kind, kind)

    def omit_none(self, cls: type) -> frozenset[str]:
        kind = getattr(cls, "type", None) if issubclass(cls, Entry) else None
        return super().omit_none(cls) | _ENTRY_OMIT_NONE.get(kind or "", set())

    def optional(self, cls: type) -> frozenset[str]:
        return frozenset(_MAY_BE_ABSENT.get(getattr(cls, "type", "") if issubclass(cls, Entry) else "", ()))

    def key_order(self, cls: type) -> tuple[str, ...] | None:
        if issubclass(cls, Entry):
            return KEY_ORDER.get(cls.type)
        if cls is m.CustomMessage:
            return KEY_ORDER["custom_role"]
        return KEY_ORDER.get(self.tag(cls) if hasattr(cls, "role") or hasattr(cls, "type") else cls.__name__)


class _PiWriters(Writers):
    number = staticmethod(js_float_value)
    free = staticmethod(js_values)
    items = staticmethod(js_items)


PI = PiDialect()


def rename_parent_key(data: Mapping[str, Any], old: str, new: str) -> dict[str, Any]:
    """A raw entry with its parent key renamed in place (key order kept)."""
    if old not in data or new in data:
        return dict(data)
    return {(new if key == old else key): value for key, value in data.items()}


class PiCodec(Codec):
    """The codec of pi's dialect: pi's names, key order, omitted fields and leaf markers."""

    def __init__(self) -> None:
        super().__init__(PI, _PiWriters())
        self.written_as_dicts = frozenset({LeafMoved})  # written as a leaf marker (event_dict)
        self.stand_ins = frozenset({LeafMoved})

    def header_dict(self, header: SessionStarted) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "session", "version": header.version, "id": header.originator_id,
                               "timestamp": header.timestamp, "cwd": header.cwd}
        if header.parent_session is not None:
            out[PARENT_SESSION_KEY] = header.parent_session
        read = isinstance(header.extra, m.Extra)  # from a pi line, which keeps what it had
        # the ignore below: ``read`` says extra is an Extra, which mypy cannot carry through the bool
        if header.metadata or (read and "metadata" not in header.extra.absent):  # type: ignore[attr-defined]
            out["metadata"] = js_values(dict(header.metadata))
        if header.extra:
            refuse_clash({*out, "type", "version", "id", "timestamp", "cwd", PARENT_SESSION_KEY, "metadata"}, header.extra,
                         "session header")
            out.update(js_items(header.extra))
        return out

    def decode_header(self, data: Any) -> SessionStarted:
        """A header from a pi header line, any version pi has written (1, 2 or 3): ``version``
        keeps the file's own (a missing one is 1)."""
        if not isinstance(data, dict) or data.get("type") != "session":
            raise corrupt("the first line is not a session header")
        version = data.get("version", 1)
        if type(version) is not int or version not in PI_VERSIONS:
            raise SessionError("unsupported_version", f"pi session format version {version!r} is not supported (known: 1, 2, 3)")
        absent = frozenset() if "metadata" in data else frozenset({"metadata"})
        return self.header_from(data, version, PARENT_SESSION_KEY, lambda extra: m.Extra(extra, absent))

    def event_dict(self, event: Any) -> dict[str, Any]:
        if isinstance(event, UnknownEntryAppended):
            # the ignore below: js_values keeps the type of what it is given: a dict here
            return js_values(rename_parent_key(event.data, NATIVE_PARENT_KEY, PI_PARENT_KEY))  # type: ignore[no-any-return]
        if isinstance(event, LeafMoved):
            out: dict[str, Any] = {"type": "custom", CUSTOM_TYPE_KEY: LEAF_MARKER_TYPE, "data": {FROM_ID_KEY: event.parent_id},
                                   "id": event.id, PI_PARENT_KEY: event.target_id, "timestamp": event.timestamp}
            if event.extra:
                refuse_clash(out, event.extra, f"leaf marker {event.id!r}")
            return {**out, **js_items(event.extra)} if event.extra else out
        return super().event_dict(event)

    @staticmethod
    def is_leaf_marker(data: Mapping[str, Any]) -> bool:
        """Is this raw pi line the ``custom`` entry that records a leaf move?"""
        payload = data.get("data")
        return (data.get("type") == "custom" and data.get(CUSTOM_TYPE_KEY) == LEAF_MARKER_TYPE and isinstance(payload, dict)
                and payload.keys() == {FROM_ID_KEY} and (payload[FROM_ID_KEY] is None or isinstance(payload[FROM_ID_KEY], str)))

    def decode_leaf_marker(self, data: dict[str, Any], session_id: str, version: int) -> LeafMoved:
        """The ``leaf`` entry a marker line stands for: ``parentId`` is the new leaf (so pi
        resumes there), ``data.fromId`` the leaf before the move (our ``parent_id``)."""
        target, entry_id, timestamp = data.get(PI_PARENT_KEY), data.get("id"), data.get("timestamp")
        if not isinstance(entry_id, str) or not entry_id or not isinstance(timestamp, str):
            raise corrupt("leaf marker has no string 'id' / 'timestamp'")
        if target is not None and not isinstance(target, str):
            raise corrupt(f"leaf marker {entry_id!r} has a non-string 'parentId'")
        known = {"type", CUSTOM_TYPE_KEY, "data", "id", PI_PARENT_KEY, "timestamp"}
        return LeafMoved(
            originator_id=session_id, originator_version=version, timestamp=timestamp, id=entry_id,
            parent_id=data["data"][FROM_ID_KEY], target_id=target, extra={k: v for k, v in data.items() if k not in known},
        )


@cache
def pi_codec() -> PiCodec:
    """The shared codec of the pi dialect."""
    return PiCodec()
