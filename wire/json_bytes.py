"""JSON written and read with msgspec, the library's one JSON library, in the layout orjson wrote before it.

Bytes we stored or printed must not change: listing caches, database summaries, checkpoints, CLI ``--json`` output.
msgspec and orjson agree on every value but one: a float of 1e16 or more, which msgspec writes ``1e16`` and orjson
(and JavaScript) ``1e+16``. :func:`dumps` keeps the ``+``: output in which no ``e<digits>`` ends a value is returned as
msgspec wrote it (one C scan), and only output that may hold such a float is written again with those floats laid out.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import msgspec

# What a parse of a line may raise, by either parser: a malformed line (msgspec.DecodeError, orjson's
# JSONDecodeError, both ValueError) or one nested too deep for msgspec (RecursionError).
DECODE_ERRORS = (ValueError, RecursionError)

decode = msgspec.json.decode
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


__all__ = ["DECODE_ERRORS", "decode", "dumps", "pretty", "spaced"]
