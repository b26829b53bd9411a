"""The codec's shortcuts give what the complete work gives: a value written through its struct (``encoders.py``) is
what its wire dict, made field by field from the schema, gives (integers beyond 64 bits too), and ``decode_line``
checks the size limits only for lines long enough to break one."""

from __future__ import annotations

import msgspec
import pytest
import sessiontree_strategies as strat
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree.domain import messages as m
from sessiontree.domain.errors import SessionError
from sessiontree.pi.pi import pi_codec
from sessiontree.wire import jsontext
from sessiontree.wire.codec import Codec

CODECS = {"native": Codec(), "pi": pi_codec()}
huge_ints = st.integers(min_value=2**64, max_value=2**80) | st.integers(min_value=-(2**80), max_value=-(2**63) - 1)


def walked(codec: Codec, message: object) -> object:
    """The message's wire dict made field by field from its schema, as JSON values."""
    return msgspec.json.decode(msgspec.json.encode(codec.encoders.wire(message)))


@pytest.mark.parametrize("dialect", sorted(CODECS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=strat.messages)
def test_message_to_dict_gives_what_the_walk_gives(dialect, message):
    codec = CODECS[dialect]
    assert codec.message_to_dict(message) == walked(codec, message)


@pytest.mark.parametrize("dialect", sorted(CODECS))
@settings(max_examples=50, deadline=None)
@given(big=huge_ints, key=strat.names)
def test_message_to_dict_writes_integers_beyond_64_bits(dialect, big, key):
    codec = CODECS[dialect]
    message = m.ToolResultMessage(tool_call_id="t1", tool_name="calc", content=[m.TextContent("x")], details={key: [big]})
    out = codec.message_to_dict(message)
    assert out == walked(codec, message)
    assert out["details"][key][0] == big  # exact: msgspec writes and reads integers of any size


def test_decode_line_checks_the_limits_a_line_can_break(monkeypatch):
    """A line within both limits skips the check; the limits are read when the line is, so a lowered one counts."""
    codec = Codec()
    line = (b'{"type":"custom","id":"a1","parent_id":null,"timestamp":"2026-01-01T00:00:00.000Z","custom_type":"x",'
            b'"data":"' + b"y" * 500 + b'"}')
    assert codec.decode_line(line, "s", 2).data == "y" * 500
    monkeypatch.setattr(jsontext, "MAX_LINE_BYTES", 100)
    with pytest.raises(SessionError, match="line limit"):
        codec.decode_line(line, "s", 2)
    monkeypatch.setattr(jsontext, "MAX_LINE_BYTES", 1 << 26)
    monkeypatch.setattr(jsontext, "MAX_VALUES", 3)
    with pytest.raises(SessionError, match="keys and items"):
        codec.decode_line(b'{"type":"custom","id":"a1","data":[' + b"1," * 10 + b'1]}', "s", 2)


@settings(max_examples=100, deadline=None)
@given(event=strat.entry_events(version=2), at=st.integers(min_value=0, max_value=10_000))
def test_a_native_line_with_a_key_written_twice_is_corrupt(event, at):
    """The typed path reads the last of two values; the layout check must still send the line to the repeat check."""
    codec = CODECS["native"]
    line = codec.encode_event(event)
    body = msgspec.json.decode(line)
    key = sorted(body)[at % len(body)]
    twice = line[:-1] + b"," + msgspec.json.encode({key: body[key]})[1:]  # the key again, same value, at the end
    with pytest.raises(SessionError, match="appears twice"):
        codec.decode_line(twice, "s", 2)
