"""Free-form values (``data``, ``details``, tool arguments, unknown fields) are JSON values.

A session must answer the same before and after a reopen, so what a command records has
to be exactly what the wire gives back: tuples become lists, mappings become dicts, and
values JSON cannot hold faithfully (NaN, infinities, non-string keys, other objects) are
refused with ``invalid_entry`` instead of being changed or dropped on the way to storage.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

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


def check_value(where: str, value: Any, field: str = "") -> None:
    """Check a free-form value in place (the rules of :func:`json_value`, without a copy);
    an error names ``where`` and the ``field`` that holds the value."""
    if value is not None and type(value) not in _ATOMS:
        _check(f"{where} {field}" if field else where, value, 0)


_ATOMS = (str, int, bool)


def _check(where: str, value: Any, depth: int) -> None:
    """Like :func:`_copy` but only checks (the value is already the one to record)."""
    t = type(value)
    if value is None or t is str or t is bool or t is int:
        return
    if t is float:
        if not math.isfinite(value):
            raise _refuse(where, value, "JSON has no NaN or infinity")
        return
    if depth >= MAX_DEPTH:
        raise _refuse(where, value, f"nested deeper than {MAX_DEPTH} levels")
    if t is dict or (t is not list and t is not tuple and isinstance(value, Mapping)):
        for key, item in value.items():
            if type(key) is not str:
                raise _refuse(where, key, "JSON object keys are strings")
            if item is not None and type(item) not in _ATOMS:
                _check(where, item, depth + 1)
        return
    if t is list or t is tuple:
        for item in value:
            if item is not None and type(item) not in _ATOMS:
                _check(where, item, depth + 1)
        return
    if isinstance(value, (str, int, float)):  # subclasses (an IntEnum, a str subclass)
        _copy(where, value, depth)
        return
    raise _refuse(where, value, "not a JSON value")
