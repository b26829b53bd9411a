"""pi's wire layout: the key order of its writer and the way it writes numbers.

pi writes each line with ``JSON.stringify``: keys in the order its code builds each object
(which differs by entry type), and numbers as JavaScript lays them out. Readers do not
care; matching both is what makes a line pi wrote come back byte for byte
(``docs/pi.md``). Everything here works on plain wire dicts in pi's names.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from sessiontree.adapters.codec import dumps as exact_dumps, ordered_keys

PI_PARENT_KEY = "parentId"

# -- pi's key order (what its own writer emits), in wire names --------------------------

_BASE = ("type", "id", PI_PARENT_KEY, "timestamp")
ENTRY_KEY_ORDER: dict[str, tuple[str, ...]] = {
    "message": (*_BASE, "message"),
    "thinking_level_change": (*_BASE, "thinkingLevel"),
    "model_change": (*_BASE, "provider", "modelId"),
    "active_tools_change": (*_BASE, "activeToolNames"),
    "compaction": (*_BASE, "summary", "firstKeptEntryId", "tokensBefore", "details", "usage", "fromHook", "retainedTail"),
    "branch_summary": (*_BASE, "fromId", "summary", "details", "usage", "fromHook"),
    "custom": ("type", "customType", "data", "id", PI_PARENT_KEY, "timestamp"),
    "custom_message": ("type", "customType", "content", "display", "details", "id", PI_PARENT_KEY, "timestamp"),
    "label": (*_BASE, "targetId", "label"),
    "session_info": (*_BASE, "name"),
}
MESSAGE_KEY_ORDER: dict[str, tuple[str, ...]] = {
    "user": ("role", "content", "timestamp"),
    "assistant": ("role", "content", "api", "provider", "model", "usage", "stopReason", "timestamp", "errorMessage"),
    "toolResult": ("role", "toolCallId", "toolName", "content", "details", "isError", "timestamp"),
    "custom": ("role", "customType", "content", "display", "details", "timestamp"),
    "compactionSummary": ("role", "summary", "tokensBefore", "timestamp"),
    "branchSummary": ("role", "summary", "fromId", "timestamp"),
}
BLOCK_KEY_ORDER: dict[str, tuple[str, ...]] = {
    "text": ("type", "text"),
    "image": ("type", "data", "mimeType"),
    "thinking": ("type", "thinking", "thinkingSignature"),
    "toolCall": ("type", "id", "name", "arguments"),
}
USAGE_KEY_ORDER = ("input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost")
COST_KEY_ORDER = ("input", "output", "cacheRead", "cacheWrite", "total")



def order_usage(usage: Any) -> Any:
    """A usage dict (and its cost) in pi's key order."""
    if not isinstance(usage, dict):
        return usage
    out = ordered_keys(usage, USAGE_KEY_ORDER)
    if isinstance(out.get("cost"), dict):
        out["cost"] = ordered_keys(out["cost"], COST_KEY_ORDER)
    return out


def order_blocks(content: Any) -> Any:
    """A content list with each known block in pi's key order."""
    if not isinstance(content, list):
        return content
    return [
        ordered_keys(block, BLOCK_KEY_ORDER[block["type"]])
        if isinstance(block, dict) and block.get("type") in BLOCK_KEY_ORDER
        else block
        for block in content
    ]


def order_message(message: Any) -> Any:
    """A pi message dict in pi's key order (unknown roles are left exactly as they are)."""
    if not isinstance(message, dict) or message.get("role") not in MESSAGE_KEY_ORDER:
        return message
    out = ordered_keys(message, MESSAGE_KEY_ORDER[message["role"]])
    if "content" in out:
        out["content"] = order_blocks(out["content"])
    if "usage" in out:
        out["usage"] = order_usage(out["usage"])
    return out


def js_number(value: float) -> str:
    """A float as JavaScript's ``JSON.stringify`` writes it (pi's writer).

    Both use the shortest digits that read back exactly; they differ in layout: JavaScript
    writes plain decimals from 1e-7 up to 1e21 and drops a ``.0`` (``0.00000375``,
    ``123456789012345680000``, ``1``), where orjson switches to exponents sooner.
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
    # leave it to orjson ("1.0"), which both languages read as the same number.
    return orjson.Fragment(text.encode("ascii")) if "." in text or "e" in text else value


# Floats orjson writes as JavaScript does: 0 and those with lo <= |f| < hi (it writes the
# others with an exponent, as Python's ``repr`` does below 1e-4 and from 1e16).
PLAIN_FLOATS = (1e-4, 1e16)
_LO, _HI = PLAIN_FLOATS


def js_float_value(value: float) -> Any:
    """A float field's value for orjson to write as JavaScript would: itself, unless orjson
    would write it with an exponent (see ``PLAIN_FLOATS``)."""
    if value.__class__ is float and value and not _LO <= abs(value) < _HI:
        return _js_float(value)
    return value


def _needs_layout(value: Any) -> bool:
    """Does ``value`` hold a float that orjson would write with an exponent?"""
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
    """A free-form value for orjson to write as JavaScript would: itself, or a copy whose
    floats are laid out when orjson would write one of them with an exponent."""
    return _js_numbers(value) if _needs_layout(value) else value


def js_items(fields: Any) -> Any:
    """Unknown fields (a mapping) with their values as :func:`js_values` gives them."""
    for item in fields.values():
        kind = item.__class__
        if (kind is float or kind is dict or kind is list or kind is tuple) and _needs_layout(item):
            return {key: _js_numbers(value) for key, value in fields.items()}
    return fields


def laid_out(data: Any) -> Any:
    """A wire dict (from the reference encoder) with every float laid out as JavaScript would."""
    return _js_numbers(data)


def _js_numbers(value: Any) -> Any:
    kind = type(value)
    if kind is float:
        return _js_float(value)
    if kind is dict:
        out = {}
        for key, item in value.items():
            kind = type(item)
            if kind is float:
                item = _js_float(item)
            elif kind is dict or kind is list or kind is tuple:
                item = _js_numbers(item)
            out[key] = item
        return out
    if kind is list or kind is tuple:  # a tuple is written as an array, as the reference's list
        return [_js_numbers(item) for item in value]
    return value


def ordered_entry(kind: str, out: dict[str, Any]) -> dict[str, Any]:
    """An entry's wire dict in pi's key order, its nested messages, blocks and usage too."""
    out = ordered_keys(out, ENTRY_KEY_ORDER[kind]) if kind in ENTRY_KEY_ORDER else out
    if "message" in out:
        out["message"] = order_message(out["message"])
    if isinstance(out.get("retainedTail"), list):
        out["retainedTail"] = [order_message(msg) for msg in out["retainedTail"]]
    if "usage" in out and kind in ("compaction", "branch_summary"):
        out["usage"] = order_usage(out["usage"])
    if kind == "custom_message" and "content" in out:
        out["content"] = order_blocks(out["content"])
    return out


# What orjson writes for a number with an exponent (always signed: ``3.75e-6``, ``1e+16``).
# Text may match too ("1e-5" in a string): then the walk below finds no float to change.
_EXPONENT = re.compile(rb"[0-9]e[-+][0-9]")


def dumps(data: Any) -> bytes:
    """One line as pi's writer would lay it out (orjson, with JavaScript's number layout)."""
    line = exact_dumps(data)
    # orjson and JavaScript differ only where orjson writes an exponent.
    if (b"e-" in line or b"e+" in line) and _EXPONENT.search(line):  # memchr first: the regex is slower
        return exact_dumps(_js_numbers(data))
    return line


__all__ = [
    "ENTRY_KEY_ORDER",
    "MESSAGE_KEY_ORDER",
    "dumps",
    "js_float_value",
    "js_items",
    "js_number",
    "js_values",
    "laid_out",
    "order_blocks",
    "order_message",
    "order_usage",
    "ordered_entry",
]
