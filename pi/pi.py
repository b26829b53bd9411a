"""The pi dialect: pi's session files, line by line (SPEC 4, docs/pi.md).

:class:`PiDialect` is pi's naming of the one schema (camelCase keys, its role and block names, its key order,
optional fields left out, JavaScript's number layout); :class:`PiCodec` adds what has no native counterpart: the
leaf marker (a ``leaf`` entry written as a ``custom`` entry pi resumes on) and the headers of pi's versions 1 to 3.

Number layout: pi writes each line with ``JSON.stringify``. Readers do not care how a number is laid out; matching it
is what makes a line pi wrote come back byte for byte. msgspec and JavaScript agree on every float except those
msgspec writes with an exponent (:func:`js_number`).

Migration: pi migrates files of versions 1 and 2 on open and rewrites them; we never rewrite on open, but follow pi's
steps on the parsed lines, in memory and deterministically (:func:`migrate`): v1 entries get ids derived from the
session id and the line number (:func:`derived_id`, so the same file always gives the same ids) and the previous
entry as parent; v2's ``hookMessage`` role becomes ``custom``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import msgspec

from sessiontree.domain import messages as m
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry, LeafMoved, SessionStarted, UnknownEntryAppended
from sessiontree.wire.codec import Codec, corrupt
from sessiontree.wire.encoders import Writers, refuse_clash
from sessiontree.wire.pi_names import (
    BLOCKS,
    CUSTOM_TYPE_KEY,
    FIRST_KEPT_ENTRY_ID_KEY,
    FIRST_KEPT_ENTRY_INDEX_KEY,
    FROM_ID_KEY,
    HOOK_MESSAGE_ROLE,
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
CURRENT = 3  # the version :func:`migrate` brings older files to
_CAMEL = re.compile(r"_([a-z0-9])")
# Optional entry fields pi leaves out when they have no value (JSON.stringify drops
# ``undefined``), and the fields the domain requires that pi leaves out to mean null.
_ENTRY_OMIT_NONE = {
    "compaction": {"details", "usage", "retained_tail"}, "branch_summary": {"details", "usage"}, "custom": {"data"},
    "custom_message": {"details"}, "label": {"label"}, "session_info": {"name"},
}
_MAY_BE_ABSENT = {"label": {"label"}, "session_info": {"name"}}


def js_number(value: float) -> str:
    """A float as JavaScript's ``JSON.stringify`` writes it (pi's writer).

    Both use the shortest digits that read back exactly; they differ in layout: JavaScript
    writes plain decimals from 1e-7 up to 1e21 and drops a ``.0`` (``0.00000375``,
    ``123456789012345680000``, ``1``), where msgspec switches to exponents sooner.
    """
    if value == 0 or value != value or value in (float("inf"), float("-inf")):
        return "0" if value == 0 else "null"
    text = repr(value)
    if "e" not in text:  # Python writes plain decimals for 1e-4 <= |x| < 1e16: JavaScript's digits too
        return text[:-2] if text.endswith(".0") else text
    sign = "-" if text.startswith("-") else ""
    mantissa, _, exponent = text.lstrip("-").partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).rstrip("0")
    stripped = len(digits) - len(digits.lstrip("0"))
    digits = digits.lstrip("0")
    n = len(whole) + (int(exponent) if exponent else 0) - stripped  # value = 0.digits * 10**n
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        out = "0." + "0" * -n + digits
    else:
        e = n - 1
        out = (digits if k == 1 else f"{digits[0]}.{digits[1:]}") + ("e+" if e >= 0 else "e-") + str(abs(e))
    return sign + out


def _js_float(value: float) -> Any:
    text = js_number(value)
    # An integral float JavaScript writes as bare digits would read back as an int:
    # leave it to msgspec ("1.0"), which both languages read as the same number.
    return msgspec.Raw(text.encode("ascii")) if "." in text or "e" in text else value


# Floats msgspec writes as JavaScript does: 0 and those with lo <= |f| < hi (it writes the
# others with an exponent, as Python's ``repr`` does below 1e-4 and from 1e16).
PLAIN_FLOATS = (1e-4, 1e16)
_LO, _HI = PLAIN_FLOATS


def js_float_value(value: float) -> Any:
    """A float field's value for msgspec to write as JavaScript would: itself, unless msgspec
    would write it with an exponent (see ``PLAIN_FLOATS``)."""
    if value.__class__ is float and value and not _LO <= abs(value) < _HI:
        return _js_float(value)
    return value


def _needs_layout(value: Any) -> bool:
    """Does ``value`` hold a float that msgspec would write with an exponent?"""
    kind = value.__class__
    if kind is float:
        return not _LO <= abs(value) < _HI and value != 0  # NaN too: JavaScript writes null
    if kind is dict:
        value = value.values()
    elif kind is not list and kind is not tuple:
        return False
    for item in value:
        kind = item.__class__
        if (kind is float or kind is dict or kind is list or kind is tuple) and _needs_layout(item):
            return True
    return False


def js_values(value: Any) -> Any:
    """A free-form value for msgspec to write as JavaScript would: itself, or a copy whose
    floats are laid out when msgspec would write one of them with an exponent."""
    return _js_numbers(value) if _needs_layout(value) else value


def js_items(fields: Any) -> Any:
    """Unknown fields (a mapping) with their values as :func:`js_values` gives them."""
    for item in fields.values():
        if _needs_layout(item):
            return {key: _js_numbers(value) for key, value in fields.items()}
    return fields


def _js_numbers(value: Any) -> Any:
    kind = type(value)
    if kind is float:
        return _js_float(value)
    if kind is dict:
        return {key: _js_numbers(item) for key, item in value.items()}
    if kind is list or kind is tuple:  # a tuple is written as an array, as the reference's list
        return [_js_numbers(item) for item in value]
    return value


def camel(name: str) -> str:
    """``first_kept_entry_id`` -> ``firstKeptEntryId``."""
    return _CAMEL.sub(lambda match: match.group(1).upper(), name)


class PiDialect(Dialect):
    """pi's names: camelCase fields, ``toolResult``/``toolCall`` tags, ``parentId``."""

    name = "pi"
    parent_key = PARENT_KEY

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
            return js_values(rename_parent_key(event.data, NATIVE.parent_key, PARENT_KEY))  # type: ignore[no-any-return]
        if isinstance(event, LeafMoved):
            out: dict[str, Any] = {"type": "custom", CUSTOM_TYPE_KEY: LEAF_MARKER_TYPE, "data": {FROM_ID_KEY: event.parent_id},
                                   "id": event.id, PARENT_KEY: event.target_id, "timestamp": event.timestamp}
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
        target, entry_id, timestamp = data.get(PARENT_KEY), data.get("id"), data.get("timestamp")
        if not isinstance(entry_id, str) or not entry_id or not isinstance(timestamp, str):
            raise corrupt("leaf marker has no string 'id' / 'timestamp'")
        if target is not None and not isinstance(target, str):
            raise corrupt(f"leaf marker {entry_id!r} has a non-string 'parentId'")
        known = {"type", CUSTOM_TYPE_KEY, "data", "id", PARENT_KEY, "timestamp"}
        return LeafMoved(
            originator_id=session_id, originator_version=version, timestamp=timestamp, id=entry_id,
            parent_id=data["data"][FROM_ID_KEY], target_id=target, extra={k: v for k, v in data.items() if k not in known},
        )


@cache
def pi_codec() -> PiCodec:
    """The shared codec of the pi dialect."""
    return PiCodec()


def derived_id(session_id: str, lineno: int, taken: set[str]) -> str:
    """8 hex characters from (session id, line number), unique among ``taken``."""
    attempt = 0
    while True:
        seed = f"{session_id}:{lineno}" if attempt == 0 else f"{session_id}:{lineno}:{attempt}"
        candidate = hashlib.sha256(seed.encode("utf-8")).hexdigest()[:8]
        if candidate not in taken:
            return candidate
        attempt += 1


def _v1_to_v2(session_id: str, entries: Sequence[tuple[int, Any]], path: str) -> list[tuple[int, dict[str, Any]]]:
    taken: set[str] = set()
    previous: str | None = None
    out: list[tuple[int, dict[str, Any]]] = []
    for lineno, obj in entries:
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str) or obj["type"] == "session":
            raise SessionError("corrupt", "a version 1 entry must be an object with a 'type'", path=path, line=lineno)
        entry_id = derived_id(session_id, lineno, taken)
        taken.add(entry_id)
        body = {k: v for k, v in obj.items() if k not in ("type", "id", PARENT_KEY)}
        new = {"type": obj["type"], "id": entry_id, PARENT_KEY: previous, **body}
        previous = entry_id
        if new["type"] == "compaction" and (FIRST_KEPT_ENTRY_INDEX_KEY in new or FIRST_KEPT_ENTRY_ID_KEY not in new):
            # The index counts the header as 0; pi only resolves entries already given ids.
            index = new.pop(FIRST_KEPT_ENTRY_INDEX_KEY, None)
            new[FIRST_KEPT_ENTRY_ID_KEY] = out[index - 1][1]["id"] if type(index) is int and 1 <= index <= len(out) else None
        out.append((lineno, new))
    return out


def _v2_to_v3(entries: Sequence[tuple[int, Any]]) -> list[tuple[int, Any]]:
    out = []
    for lineno, obj in entries:
        message = obj.get("message") if isinstance(obj, dict) and obj.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == HOOK_MESSAGE_ROLE:
            obj = {**obj, "message": {**message, "role": "custom"}}
        out.append((lineno, obj))
    return out


def migrate(
    version: int, session_id: str, entries: Sequence[tuple[int, Any]], path: str
) -> list[tuple[int, Any]]:
    """The entries of a version ``version`` file as version 3 entries, each with its line."""
    migrated = list(entries)
    if version < 2:
        migrated = _v1_to_v2(session_id, migrated, path)
    if version < 3:
        migrated = _v2_to_v3(migrated)
    return migrated
