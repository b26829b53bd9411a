"""wire/jsontext.py writes, with msgspec, the bytes orjson wrote: stored caches, summaries, checkpoints and the
CLI's --json output do not change (orjson is still installed for the codec, so the two are compared directly)."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessiontree.wire import jsontext

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(1 << 63), (1 << 64) - 1), st.floats(allow_nan=False, allow_infinity=False),
    st.text(), st.sampled_from(["1e5", ":3e4", "a,1e16", "é😀"]),
)
VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                      max_leaves=20)


@given(VALUES)
def test_compact_and_indented_output_is_orjsons(value: Any) -> None:
    assert jsontext.dumps(value) == orjson.dumps(value)
    assert jsontext.pretty(value) == orjson.dumps(value, option=orjson.OPT_INDENT_2)


@pytest.mark.parametrize("number", [1e16, -1.5e22, 1.7976931348623157e308, 123456789012345680000.0, 1e-7, 2.5e-8,
                                    0.1 + 0.2, 1e15, 9990000000000000.0, 5e-324, -0.0])
def test_floats_are_laid_out_as_orjson_lays_them_out(number: float) -> None:
    # msgspec alone writes 1e16 where orjson (and JavaScript) write 1e+16
    for value in (number, [number], {"a": number, "b": "1e5"}, {"k": [1, {"x": number}]}):
        assert jsontext.dumps(value) == orjson.dumps(value)


def test_what_orjson_refused_or_nulled() -> None:
    # orjson refused integers beyond 64 bits (the callers wrote their digits as raw JSON): msgspec writes them exact
    assert jsontext.dumps({"n": 1 << 70}) == b'{"n":1180591620717411303424}'
    assert jsontext.dumps([math.nan, math.inf]) == b"[null,null]"  # as orjson
    assert jsontext.decode(b"123456789012345678901234567890") == 123456789012345678901234567890  # orjson: a float


def test_spaced_is_json_dumps_default_layout() -> None:
    import json

    value = {"a": [1, 2, {"b": None, "c": []}], "d": {}, "e": 1.5, "f": "é"}
    assert jsontext.spaced(value) == json.dumps(value, ensure_ascii=False)


def test_a_hook_writes_what_msgspec_cannot() -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing"

    assert jsontext.dumps({"x": Thing(), "y": 1e16}, str) == b'{"x":"thing","y":1e+16}'
    with pytest.raises(TypeError):
        jsontext.dumps(Thing())


@pytest.mark.parametrize("line", [b"", b"{", b'{"a":1} x', b"NaN", b'"\xff"', b"[" * 5000 + b"]" * 5000])
def test_a_bad_line_raises_one_of_the_decode_errors(line: bytes) -> None:
    with pytest.raises(jsontext.DECODE_ERRORS):
        jsontext.decode(line)
