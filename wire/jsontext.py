"""JSON text: parsing with exact integers, writing, and the checks a line passes before anyone builds objects from
it (size, the number of values, a key repeated in one object)."""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

MAX_LINE_BYTES = 64 * 1024 * 1024
# Keys and array items a line may hold: parsed, each costs ~150 bytes of Python objects, so a
# 54 MB line of 5M keys would take ~750 MB. Only lines longer than this can reach it.
MAX_VALUES = 1_000_000
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def parse(line: bytes | str) -> Any:
    """One JSON value, integers of any size kept exact; ``ValueError`` (``msgspec.DecodeError``) or ``RecursionError``
    if it is not JSON, or if it holds more than ``MAX_VALUES`` keys and items (never parsed then)."""
    if len(line) > MAX_VALUES and (problem := too_many_values(line)) is not None:
        raise msgspec.DecodeError(problem)
    return _parse(line)


_parse = msgspec.json.Decoder().decode


def loads(line: bytes | str) -> Any:
    """:func:`parse` by its other name: every line read from a log, an archive or a row is parsed within the bound."""
    return parse(line)


def too_many_values(line: bytes | str) -> str | None:
    """The problem of a line holding more than ``MAX_VALUES`` keys and items, or None."""
    data = line.encode() if isinstance(line, str) else bytes(line)
    if len(data) > MAX_VALUES and _values(data) > MAX_VALUES:
        return f"line holds more than {MAX_VALUES:,} keys and items (the limit that bounds a parse)"
    return None


def unwritable(line: bytes) -> str | None:
    """Why no reader would parse ``line`` (over the size limit, or more values than bound a parse), or None: what a
    writer refuses to store. Costs one length test on a line under 1 MB."""
    if len(line) <= MAX_VALUES:
        return None
    if len(line) > MAX_LINE_BYTES:
        return f"line of {len(line)} bytes is over the {MAX_LINE_BYTES}-byte line limit"
    return too_many_values(line)


def line_problem(line: bytes, *, duplicates: bool = True) -> str | None:
    """What makes a line unsafe or ambiguous to parse, or None: over the size limit, more than ``MAX_VALUES`` keys and
    items, or (``duplicates``) a key twice in one object (parsers disagree on which value counts)."""
    if len(line) > MAX_LINE_BYTES:
        return f"line of {len(line)} bytes is over the {MAX_LINE_BYTES}-byte line limit"
    if (problem := too_many_values(line)) is not None:
        return problem
    if duplicates:
        key = duplicate_key(line)
        if key is not None:
            return f"key {key!r} appears twice in one object (which value counts is ambiguous)"
    return None


def _values(line: bytes) -> int:
    """An upper bound on the values a parse of ``line`` makes: its commas and opening
    brackets, less those inside strings (counted in place: nothing is copied)."""
    count = line.count(b",") + line.count(b"{") + line.count(b"[")
    if count <= MAX_VALUES:
        return count
    for match in _STRING.finditer(line):
        start, end = match.span()
        count -= line.count(b",", start, end) + line.count(b"{", start, end) + line.count(b"[", start, end)
    return count


def duplicate_key(line: bytes) -> str | None:
    """A key that appears twice in one object of the JSON line, or None (also for lines that are not JSON, or
    that hold too many values to be parsed)."""
    if too_many_values(line) is not None:
        return None
    try:  # the common case in C: a line that re-encodes as itself has no repeats
        if msgspec.json.encode(_parse(line)) == line:
            return None
    except (ValueError, TypeError, RecursionError):
        pass
    return repeated_key(line)


def repeated_key(line: bytes) -> str | None:
    """:func:`duplicate_key` without its shortcut, for a caller that knows the line does not
    re-encode as itself (the standard library's parser, which shows every key)."""
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)
        if len(out) != len(items) and not found:
            seen: set[str] = set()
            # the ignore below: set.add returns None on purpose: the test adds as it looks
            found.append(next(k for k, _ in items if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
        return out

    try:
        json.loads(line, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None
    return found[0] if found else None
