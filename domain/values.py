"""What a command checks about the values it records, beyond their classes' own validators.

A session must answer the same before and after a reopen, so what a command records has to be exactly what the wire
gives back: free-form values (``data``, ``details``, tool arguments, unknown fields) are JSON values (tuples become
lists, mappings dicts; NaN, infinities, non-string keys and other objects are refused with ``invalid_entry`` instead of
being changed or dropped on the way to storage), and an ``Unknown*`` stand-in or an unknown field may not take the
place of a known tag.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sessiontree.domain import messages as msg
from sessiontree.domain.errors import SessionError
from sessiontree.domain.messages import MESSAGE_TYPES, UnknownContent, UnknownMessage

MAX_DEPTH = 200


def json_value(where: str, value: Any) -> Any:
    """A canonical JSON copy of ``value`` (lists and dicts), or ``SessionError('invalid_entry')``."""
    return _copy(where, value, 0)


def _copy(where: str, value: Any, depth: int) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise _refuse(where, value, "JSON has no NaN or infinity")
    if depth >= MAX_DEPTH:
        raise _refuse(where, value, f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, (list, tuple)):
        return [_copy(where, item, depth + 1) for item in value]
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _refuse(where, key, "JSON object keys are strings")
            out[key] = _copy(where, item, depth + 1)
        return out
    raise _refuse(where, value, "not a JSON value")


def _refuse(where: str, value: Any, why: str) -> SessionError:
    return SessionError("invalid_entry", f"{where}: {value!r:.80} is not JSON ({why})")


def check_value(where: str, value: Any, field: str = "") -> None:
    """Check a free-form value in place (the rules of :func:`json_value`, without a copy);
    an error names ``where`` and the ``field`` that holds the value."""
    if value is None or type(value) in _ATOMS:
        return
    try:
        _check(value, 0)
    except _NotJson as exc:
        raise _refuse(f"{where} {field}" if field else where, exc.value, exc.why) from None


_ATOMS = (str, int, bool)


class _NotJson(Exception):
    def __init__(self, value: Any, why: str) -> None:
        self.value, self.why = value, why


def _check(value: Any, depth: int) -> None:
    """Like :func:`_copy` but only checks (the value is already the one to record)."""
    t = type(value)
    if value is None or t is str or t is bool or t is int:
        return
    if t is float:
        if not math.isfinite(value):
            raise _NotJson(value, "JSON has no NaN or infinity")
        return
    if depth >= MAX_DEPTH:
        raise _NotJson(value, f"nested deeper than {MAX_DEPTH} levels")
    if t is dict or (t is not list and t is not tuple and isinstance(value, Mapping)):
        for key, item in value.items():
            if type(key) is not str:
                raise _NotJson(key, "JSON object keys are strings")
            if item is not None and type(item) not in _ATOMS:
                _check(item, depth + 1)
        return
    if t is list or t is tuple:
        for item in value:
            if item is not None and type(item) not in _ATOMS:
                _check(item, depth + 1)
        return
    if isinstance(value, (str, int, float)):  # subclasses (an IntEnum, a str subclass)
        try:
            _copy("", value, depth)
        except SessionError:
            raise _NotJson(value, "not a JSON value") from None
        return
    raise _NotJson(value, "not a JSON value")


# every known class holds its tag as a ClassVar (which the tuples' element type cannot say)
_KNOWN_ROLES = frozenset(c.role for c in MESSAGE_TYPES if c is not UnknownMessage)  # type: ignore[attr-defined]
_KNOWN_BLOCKS = frozenset(c.type for c in msg.CONTENT_TYPES if c is not UnknownContent)  # type: ignore[attr-defined]
# The fields of messages and blocks that hold free-form JSON (the others are typed: ``check_fields``).
_FREE = {msg.ToolCall: ("arguments",), msg.ToolResultMessage: ("details",), msg.CustomMessage: ("details",),
         UnknownMessage: ("data",), UnknownContent: ("data",)}


def check_str(name: str, value: Any, *, optional: bool = False) -> Any:
    """``value``, once checked to be a str (or None, if ``optional``)."""
    if not (isinstance(value, str) or (value is None and optional)):
        raise TypeError(f"{name} must be a str{' or None' if optional else ''}, not {value!r}")
    return value


def check_usage(usage: Any) -> None:
    if usage is not None and not isinstance(usage, msg.Usage):
        raise TypeError(f"usage must be a Usage or None, not {usage!r}")
    if usage is not None:
        msg.check_fields(usage)


def check_content(name: str, content: Any) -> tuple[Any, ...] | str:
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)) and all(isinstance(b, msg.CONTENT_TYPES) for b in content):
        return tuple(content)
    raise TypeError(f"{name} must be a str or a list of content blocks, not {content!r}")


_FREE_OF = {cls: _FREE.get(cls, ()) for cls in (*MESSAGE_TYPES, *msg.CONTENT_TYPES, msg.Usage, msg.Cost)}


def _free_fields(cls: type) -> tuple[str, ...]:
    found = _FREE_OF.get(cls)
    if found is None:  # an app's subclass: its base's fields
        found = next((names for base, names in _FREE.items() if issubclass(cls, base)), ())
    return found


def check_message(where: str, message: Any) -> None:
    """Check, in one walk, that a message is written and read back the same: every free-form value (details, tool
    arguments, unknown fields) is JSON; an Unknown* stand-in uses no known role or block type (it would lack the fields
    that role or type needs), and no unknown field (``extra``) is named ``role`` (of a message) or ``type`` (of a
    block): either would make the line unreadable."""
    if message.__class__ not in _FREE_OF and not isinstance(message, MESSAGE_TYPES):
        raise TypeError(f"{where} must be a message object (UserMessage, ...), not {message!r}")
    msg.check_fields(message)
    if isinstance(message, UnknownMessage) and message.role in _KNOWN_ROLES:
        raise SessionError("invalid_entry", f"{where}: role {message.role!r} is known; build its message class instead")
    if _FREE_OF.get(message.__class__) != () or getattr(message, "extra", None):  # else check_fields checked everything
        _check_object(where, message, "role")
    content = getattr(message, "content", None)
    if content.__class__ is not str and isinstance(content, tuple):  # the blocks (a tuple subclass too)
        for block in content:
            free = _FREE_OF.get(block.__class__)
            if free == () and not block.extra:
                continue  # a text, image or thinking block with nothing unknown: check_fields checked it
            if isinstance(block, UnknownContent) and block.type in _KNOWN_BLOCKS:
                raise SessionError(
                    "invalid_entry", f"{where}: block type {block.type!r} is known; build its block class instead"
                )
            _check_object(where, block, "type")
    usage = getattr(message, "usage", None)
    if usage is not None and (usage.extra or usage.cost.extra):
        _check_object(where, usage, "")
        _check_object(where, usage.cost, "")


def _check_object(where: str, value: Any, tag: str) -> None:
    extra = getattr(value, "extra", None)
    if extra:
        if tag and tag in extra:
            raise SessionError("invalid_entry", f"{where}: an unknown field may not be named {tag!r} (it is the tag)")
        check_value(where, extra, "extra")
    free = _FREE_OF.get(value.__class__)
    for name in _free_fields(value.__class__) if free is None else free:
        check_value(where, getattr(value, name), name)
