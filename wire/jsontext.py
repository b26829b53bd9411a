"""JSON text, with msgspec, the library's one JSON library: parsing with exact integers, the checks a line passes
before anyone builds objects from it (size, the number of values, a key repeated in one object), and writing in the
layout orjson wrote before it.

Bytes we stored or printed must not change: listing caches, database summaries, checkpoints, CLI ``--json`` output.
msgspec and orjson agree on every value but one: a float of 1e16 or more, which msgspec writes ``1e16`` and orjson
(and JavaScript) ``1e+16``. :func:`dumps` keeps the ``+``: output in which no ``e<digits>`` ends a value is returned as
msgspec wrote it (one C scan), and only output that may hold such a float is written again with those floats laid out.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
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


# a parse without the bound on values, for what the library wrote itself (caches, summaries, checkpoints)
decode = _parse = msgspec.json.Decoder().decode


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

# What a parse of a line may raise, by either parser: a malformed line (msgspec.DecodeError, orjson's
# JSONDecodeError, both ValueError) or one nested too deep for msgspec (RecursionError).
DECODE_ERRORS = (ValueError, RecursionError)

_encode = msgspec.json.Encoder().encode
# a positive exponent ending a number (then comes "," "}" "]" or the end); a string may match too, which only costs
# time. It starts with a literal, so re skips from "e" to "e": 0.4 ms over 435 KB of messages (7.7 ms for a pattern
# that first looks for the ":" "," "[" before a number)
_EXPONENT = re.compile(rb"e[0-9]+(?:[,}\]]|$)")


def dumps(value: Any, enc_hook: Callable[[Any], Any] | None = None) -> bytes:
    """``value`` as compact JSON (UTF-8, keys in insertion order), byte for byte as orjson wrote it."""
    encode = _encode if enc_hook is None else _encoder(enc_hook)
    out = encode(value)
    if _EXPONENT.search(out) is None:
        return out
    return encode(_plus_exponents(value))


@functools.cache
def _encoder(enc_hook: Callable[[Any], Any]) -> Callable[[Any], bytes]:
    return msgspec.json.Encoder(enc_hook=enc_hook).encode


def _plus_exponents(value: Any) -> Any:
    """``value`` with every float of 1e16 or more given as raw JSON with a ``+`` in its exponent."""
    if type(value) is float:
        text = _encode(value)
        return msgspec.Raw(text.replace(b"e", b"e+")) if b"e" in text and b"e-" not in text else value
    if isinstance(value, dict):
        return {key: _plus_exponents(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plus_exponents(item) for item in value]
    return value


def pretty(value: Any, enc_hook: Callable[[Any], Any] | None = None) -> bytes:
    """``value`` indented by two spaces, as orjson's ``OPT_INDENT_2`` (and ``json.dumps(indent=2)``) lay it out."""
    return msgspec.json.format(dumps(value, enc_hook), indent=2)


def spaced(value: Any, enc_hook: Callable[[Any], Any] | None = None) -> str:
    """``value`` on one line with a space after each ``,`` and ``:``, as ``json.dumps`` writes it by default (floats
    as orjson writes them: ``1e-7`` where json writes ``1e-07``; NaN as null)."""
    return msgspec.json.format(dumps(value, enc_hook), indent=0).decode()
