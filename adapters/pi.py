"""The pi dialect: pi's session files, line by line (SPEC 4, docs/pi.md).

pi (the coding agent this design comes from) writes the same tree of entries as we do,
with camelCase keys (``parentId``, ``modelId``, ``toolCallId``), its own role and block
names (``toolResult``, ``toolCall``, ``mimeType``, ``thinkingSignature``), absent optional
fields left out rather than written as ``null``, and its own key order. :class:`PiDialect`
names things; :class:`PiCodec` is the shared :class:`~sessiontree.adapters.codec.Codec`
with pi's rules for writing (which fields are left out; key order and number layout are
``pi_wire.py``) and two pi-specific representations:

* a ``leaf`` entry, which pi does not know, is written as a ``custom`` entry of type
  ``sessiontree/leaf`` whose ``parentId`` is the new leaf, so pi (which resumes at the
  last line) resumes on that branch (:meth:`PiCodec.decode_leaf_marker`);
* entry types pi added later (``usage``, ``context_edit``) and any other unknown type are
  kept verbatim; only the parent key is renamed when a line changes dialect.

Reading files (migration of versions 1 and 2, validation) is ``pi_storage.py``;
conversion is ``pi_convert.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from sessiontree.adapters.codec import Codec, Dialect, ordered_keys
from sessiontree.adapters.pi_wire import (
    BLOCK_KEY_ORDER,
    COST_KEY_ORDER,
    ENTRY_KEY_ORDER,
    MESSAGE_KEY_ORDER,
    PI_PARENT_KEY,
    PLAIN_FLOATS,
    USAGE_KEY_ORDER,
    dumps as pi_dumps,
    js_float_value,
    js_items,
    js_values,
    laid_out,
    order_blocks,
    order_message,
    order_usage,
    ordered_entry,
)
from sessiontree.domain import messages as m
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import (
    Entry,
    LeafMoved,
    SessionStarted,
    UnknownEntryAppended,
)

PI_VERSIONS = (1, 2, 3)
LEAF_MARKER_TYPE = "sessiontree/leaf"
NATIVE_PARENT_KEY = "parent_id"

_SPECIAL_NAMES = {
    (m.ThinkingContent, "signature"): "thinkingSignature",
}
_ROLES = {"tool_result": "toolResult", "compaction_summary": "compactionSummary", "branch_summary": "branchSummary"}
_BLOCKS = {"tool_call": "toolCall"}
_CAMEL = re.compile(r"_([a-z0-9])")


def camel(name: str) -> str:
    """``first_kept_entry_id`` -> ``firstKeptEntryId``."""
    return _CAMEL.sub(lambda match: match.group(1).upper(), name)


class PiDialect(Dialect):
    """pi's names: camelCase fields, ``toolResult``/``toolCall`` tags, ``parentId``."""

    name = "pi"
    parent_key = PI_PARENT_KEY

    def field_name(self, cls: type, name: str) -> str:
        return _SPECIAL_NAMES.get((cls, name)) or camel(name)

    def block_type(self, tag: str) -> str:
        return _BLOCKS.get(tag, tag)

    def role(self, tag: str) -> str:
        return _ROLES.get(tag, tag)

    def key_order(self, cls: type) -> tuple[str, ...] | None:
        """pi's writer's key order (``pi_wire``) for entries, messages, blocks and usage."""
        if cls is m.Usage:
            return USAGE_KEY_ORDER
        if cls is m.Cost:
            return COST_KEY_ORDER
        if issubclass(cls, Entry):
            return ENTRY_KEY_ORDER.get(self.entry_type(cls.type))
        role = getattr(cls, "role", None)
        if isinstance(role, str):
            return MESSAGE_KEY_ORDER.get(self.role(role))
        kind = getattr(cls, "type", None)
        return BLOCK_KEY_ORDER.get(self.block_type(kind)) if isinstance(kind, str) else None

    def order_value(self, value: Any, data: Any) -> Any:
        if isinstance(value, m.Usage):
            data = order_usage(data)
        elif isinstance(value, m.Cost):
            data = ordered_keys(data, COST_KEY_ORDER) if isinstance(data, dict) else data
        elif isinstance(getattr(value, "role", None), str):
            data = order_message(data)
        else:
            data = order_blocks([data])[0]
        return laid_out(data)

    def order_entry(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        return ordered_entry(kind, data)

    orders_keys = True

    # JavaScript's number layout (pi_wire): an entry the generated encoders write needs no
    # look at its line afterwards.
    float_writer = staticmethod(js_float_value)
    value_writer = staticmethod(js_values)
    items_writer = staticmethod(js_items)
    plain_floats = PLAIN_FLOATS


PI = PiDialect()

# Optional entry fields pi leaves out when they have no value (JSON.stringify drops
# ``undefined``). A line read from a pi file that had an explicit ``null`` keeps it.
ENTRY_OMIT_NONE: dict[str, frozenset[str]] = {
    "compaction": frozenset({"details", "usage", "retainedTail"}),
    "branch_summary": frozenset({"details", "usage"}),
    "custom": frozenset({"data"}),
    "custom_message": frozenset({"details"}),
    "label": frozenset({"label"}),
    "session_info": frozenset({"name"}),
}

# Fields without a default in the domain that pi leaves out to mean "none".
_MAY_BE_ABSENT = {"label": "label", "session_info": "name"}


class PiExtra(m.Extra):
    """The ``extra`` of an entry read from a pi line that wrote ``null`` for a field pi
    usually leaves out; ``nulls`` names those fields so they are written back."""

    __slots__ = ("nulls",)

    def __init__(self, fields: Any = (), absent: frozenset[str] = frozenset(), nulls: frozenset[str] = frozenset()):
        super().__init__(fields, absent)
        self.nulls = nulls

    def __reduce__(self) -> Any:
        return (PiExtra, (dict(self), self.absent, self.nulls))

    def __copy__(self) -> PiExtra:
        return PiExtra(self, self.absent, self.nulls)

    def __deepcopy__(self, memo: Any) -> PiExtra:
        import copy

        return PiExtra(copy.deepcopy(dict(self), memo), self.absent, self.nulls)


def rename_parent_key(data: Mapping[str, Any], old: str, new: str) -> dict[str, Any]:
    """A raw entry with its parent key renamed in place (key order kept)."""
    if old not in data or new in data:
        return dict(data)
    return {(new if key == old else key): value for key, value in data.items()}


# The events pi writes otherwise than as their entry type (PiCodec._special_dict).
_SPECIAL = frozenset({SessionStarted, UnknownEntryAppended, LeafMoved})


class PiCodec(Codec):
    """The codec of pi's dialect: pi's names, key order and omitted fields."""

    # Entry types read with pi's extra rules below (fields pi leaves out or writes as null,
    # leaf markers): the typed wire decoder leaves them to the dict path.
    wire_skip_entry_types = frozenset({*ENTRY_OMIT_NONE, *_MAY_BE_ABSENT, "leaf", "custom"})

    def __init__(self) -> None:
        super().__init__(PI)

    # -- header -------------------------------------------------------------------------

    def unstructure_header(self, header: SessionStarted) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "session", "version": header.version, "id": header.originator_id}
        out["timestamp"] = header.timestamp
        out["cwd"] = header.cwd
        absent = m.absent_fields(header.extra)
        if header.parent_session is not None:
            out["parentSession"] = header.parent_session
        if header.metadata or ("metadata" not in absent and isinstance(header.extra, PiExtra)):
            out["metadata"] = dict(header.metadata)
        if header.extra:
            out.update(header.extra)
        return out

    def decode_header(self, data: Any) -> SessionStarted:
        """A header from a pi header line, any version pi has written (1, 2 or 3).

        ``version`` keeps the file's own version (a missing one is 1); the entries of an
        older file are migrated in memory by the storage (``pi_migrate.py``).
        """
        if not isinstance(data, dict) or data.get("type") != "session":
            raise SessionError("corrupt", "the first line is not a session header")
        version = data.get("version", 1)
        if type(version) is not int or version not in PI_VERSIONS:
            raise SessionError(
                "unsupported_version",
                f"pi session format version {version!r} is not supported (known: 1, 2, 3)",
            )
        known = {"type", "version", "id", "timestamp", "cwd", "parentSession", "metadata"}
        absent = frozenset(known - data.keys())
        return self.header_from(data, version, lambda extra: PiExtra(extra, absent))

    # -- entries ------------------------------------------------------------------------

    def unstructure_event(self, event: Any) -> dict[str, Any]:
        """The reference wire dict of an event (cattrs underneath)."""
        special = self._special_dict(event)
        return special if special is not None else self._entry_dict(event, super().unstructure_event)

    def _fast_dict(self, event: Any) -> dict[str, Any]:
        """The wire dict from the generated encoders, which give pi's key order and number
        layout themselves (the reference encoder's dict is put in order and laid out)."""
        fast = self.__dict__.get("_fast") or self.fast
        encoder = fast._encoders.get(type(event)) or fast._new_encoder(type(event))
        if encoder is None:
            return laid_out(ordered_entry(event.type, super().unstructure_event(event)))  # type: ignore[no-any-return]
        return encoder(event)  # type: ignore[no-any-return]

    def _special_dict(self, event: Any) -> dict[str, Any] | None:
        """The wire dict of an event that is not a plain entry (a header, an unknown entry,
        a leaf move, which pi records as a custom entry); None for the others."""
        if isinstance(event, SessionStarted):
            return self.unstructure_header(event)
        if isinstance(event, UnknownEntryAppended):
            return rename_parent_key(event.data, NATIVE_PARENT_KEY, PI_PARENT_KEY)
        if isinstance(event, LeafMoved):
            return self._leaf_marker(event)
        return None

    def _entry_dict(self, event: Any, base: Any, *, ordered: bool = False) -> dict[str, Any]:
        """An entry's pi wire dict from ``base``, in pi's key order (``ordered``: ``base``
        gives that order already) with the fields pi leaves out when None left out."""
        out = self._omit_none(event, base(event))
        return out if ordered else ordered_entry(event.type, out)

    @staticmethod
    def _omit_none(event: Any, out: dict[str, Any]) -> dict[str, Any]:
        """``out`` without the fields pi leaves out when they are None (unless the line
        read had them as null)."""
        omit = ENTRY_OMIT_NONE.get(event.type)
        if omit:
            nulls = getattr(event.extra, "nulls", frozenset())
            for wire in omit:
                if wire in out and out[wire] is None and wire not in nulls:
                    del out[wire]  # deleting a key keeps the order of the others
        return out

    def _leaf_marker(self, event: LeafMoved) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "custom",
            "customType": LEAF_MARKER_TYPE,
            "data": {"fromId": event.parent_id},
            "id": event.id,
            PI_PARENT_KEY: event.target_id,
            "timestamp": event.timestamp,
        }
        if event.extra:
            out.update(event.extra)
        return out

    def decode_entry(self, data: Any, session_id: str, version: int) -> Entry:
        """The reference decoder, with pi's omissions (see :meth:`_pi_entry`)."""
        return self._pi_entry(data, session_id, version, super().decode_entry)

    def decode(self, data: Any, session_id: str, version: int) -> Any:
        """The fast decoder (same results as :meth:`decode_entry`), with pi's omissions."""
        if version == 1:
            return self.decode_header(data)
        return self._pi_entry(data, session_id, version, self.fast.decode_entry)

    def _pi_entry(self, data: Any, session_id: str, version: int, decode: Any) -> Entry:
        fill = _MAY_BE_ABSENT.get(data.get("type")) if isinstance(data, dict) else None
        if fill is not None and fill not in data:
            # pi clears a label or a name by leaving the field out: read that as null.
            entry = decode({**data, fill: None}, session_id, version)
            extra = entry.extra
            object.__setattr__(entry, "extra", m.Extra(extra, m.absent_fields(extra) | {fill}))
            return entry  # type: ignore[no-any-return]
        entry = decode(data, session_id, version)
        omit = ENTRY_OMIT_NONE.get(entry.type)
        if omit and isinstance(data, dict):
            nulls = frozenset(wire for wire in omit if wire in data and data[wire] is None)
            if nulls:
                extra = entry.extra
                object.__setattr__(entry, "extra", PiExtra(extra, m.absent_fields(extra), nulls))
        return entry  # type: ignore[no-any-return]

    def encode_event(self, event: Any) -> bytes:
        """One pi line (no newline), in pi's key order with numbers laid out as pi's
        JavaScript writer lays them out: the generated encoders, else the reference."""
        try:
            cls = event.__class__
            # A plain entry whose encoder is made (every append after the first of its type):
            # straight to it. The special ones (a header, an unknown entry, a leaf move) and
            # subclasses never have one here: _fast_dict generates only for entry classes.
            encoder = None if cls in _SPECIAL else (self.__dict__.get("_fast") or self.fast)._encoders.get(cls)
            if encoder is None:
                special = self._special_dict(event)
                if special is not None:
                    return pi_dumps(special)  # lays out numbers after a look at the line
            try:
                if encoder is not None:
                    out = encoder(event)
                    if event.type in ENTRY_OMIT_NONE:
                        out = self._omit_none(event, out)
                else:
                    out = self._entry_dict(event, self._fast_dict, ordered=True)
                return orjson.dumps(out)
            except TypeError:  # a value orjson cannot write as it is (a mapping that is no dict)
                return pi_dumps(self.unstructure_event(event))  # the reference, or its error
        except TypeError as exc:
            raise SessionError(
                "invalid_entry", f"entry {getattr(event, 'id', '?')!r} is not JSON-serialisable: {exc}"
            ) from None

    @staticmethod
    def is_leaf_marker(data: Mapping[str, Any]) -> bool:
        """Is this raw pi line the ``custom`` entry that records a leaf move?"""
        payload = data.get("data")
        return (
            data.get("type") == "custom"
            and data.get("customType") == LEAF_MARKER_TYPE
            and isinstance(payload, dict)
            and payload.keys() == {"fromId"}
            and (payload["fromId"] is None or isinstance(payload["fromId"], str))
        )

    def decode_leaf_marker(self, data: dict[str, Any], session_id: str, version: int) -> LeafMoved:
        """The ``leaf`` entry a marker line stands for: ``parentId`` is the new leaf (so pi
        resumes there), ``data.fromId`` the leaf before the move (our ``parent_id``)."""
        target = data.get(PI_PARENT_KEY)
        entry_id, timestamp = data.get("id"), data.get("timestamp")
        if not isinstance(entry_id, str) or not entry_id or not isinstance(timestamp, str):
            raise SessionError("corrupt", "leaf marker has no string 'id' / 'timestamp'")
        if target is not None and not isinstance(target, str):
            raise SessionError("corrupt", f"leaf marker {entry_id!r} has a non-string 'parentId'")
        known = {"type", "customType", "data", "id", PI_PARENT_KEY, "timestamp"}
        return LeafMoved(
            originator_id=session_id,
            originator_version=version,
            timestamp=timestamp,
            id=entry_id,
            parent_id=data["data"]["fromId"],
            target_id=target,
            extra={k: v for k, v in data.items() if k not in known},
        )

    def message_to_dict(self, message: Any) -> dict[str, Any]:
        """A message as pi writes it (pi's names and key order)."""
        return order_message(self.unstructure_value(message))  # type: ignore[no-any-return]


def is_pi_header(header: Mapping[str, Any]) -> bool:
    """Is this parsed first line a pi header rather than a native one?

    The native writer always writes ``parent_session``; pi never does (its key is
    ``parentSession``, in older files ``branchedFrom``). ``metadata`` tells nothing: pi
    headers may carry one (an export of a native session with metadata does).
    """
    return header.get("type") == "session" and "parent_session" not in header


_PI_CODEC: PiCodec | None = None


def pi_codec() -> PiCodec:
    """The shared codec of the pi dialect."""
    global _PI_CODEC
    if _PI_CODEC is None:
        _PI_CODEC = PiCodec()
    return _PI_CODEC


__all__ = [
    "LEAF_MARKER_TYPE",
    "PI",
    "PiCodec",
    "PiDialect",
    "camel",
    "is_pi_header",
    "order_message",
    "pi_codec",
]
