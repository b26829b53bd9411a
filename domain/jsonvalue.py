"""Free-form values (``data``, ``details``, tool arguments, unknown fields) are JSON values.

A session must answer the same before and after a reopen, so what a command records has
to be exactly what the wire gives back: tuples become lists, mappings become dicts, and
values JSON cannot hold faithfully (NaN, infinities, non-string keys, other objects) are
refused with ``invalid_entry`` instead of being changed or dropped on the way to storage.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from sessiontree.domain.errors import SessionError

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


def check_message_values(where: str, message: Any) -> None:
    """Check every free-form value inside a message (details, tool arguments, unknown fields)."""
    for name, value in _free_values(message):
        json_value(f"{where} {name}", value)


def _free_values(obj: Any) -> Iterator[tuple[str, Any]]:
    if not attrs.has(type(obj)):
        return
    for field in attrs.fields(type(obj)):
        value = getattr(obj, field.name)
        if field.name in ("extra", "details", "arguments", "data"):
            yield field.name, value
        elif field.name in ("content", "usage", "cost"):
            items = value if isinstance(value, tuple) else (value,)
            for item in items:
                yield from _free_values(item)
