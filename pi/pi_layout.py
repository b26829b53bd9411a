"""pi's number layout: floats written as JavaScript's ``JSON.stringify`` writes them.

pi writes each line with ``JSON.stringify``. Readers do not care how a number is laid out;
matching it is what makes a line pi wrote come back byte for byte (docs/pi.md). msgspec and
JavaScript agree on every float except those msgspec writes with an exponent.
"""

from __future__ import annotations

from typing import Any

import msgspec


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
