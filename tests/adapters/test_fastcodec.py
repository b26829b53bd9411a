"""The generated fast codec agrees with the cattrs reference codec, object for object and byte for byte."""

import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import sessiontree_strategies as ss  # noqa: E402

from sessiontree.adapters.codec import native_codec  # noqa: E402
from sessiontree.domain import events as ev  # noqa: E402
from sessiontree.domain.errors import SessionError  # noqa: E402

CODEC = native_codec()
FAST = CODEC.fast
_ENVELOPE = {"originator_id": "s", "originator_version": 2, "timestamp": "2026-01-01T00:00:00.000Z", "id": "a", "parent_id": None}


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except SessionError as exc:
        return ("error", exc.code, exc.message)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(ss.entry_events())
def test_fast_encode_gives_the_reference_bytes(event):
    """Encoding any entry through the generated path gives exactly the reference's bytes."""
    assert FAST.encode_entry(event) == CODEC.reference_encode(event)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(ss.entry_events())
def test_fast_decode_gives_the_reference_object(event):
    """Decoding any entry line through the generated path gives an object equal to the reference's."""
    data = orjson.loads(CODEC.reference_encode(event))
    fast = FAST.decode_entry(data, event.originator_id, event.originator_version)
    reference = CODEC.decode_entry(data, event.originator_id, event.originator_version)
    assert fast == reference == event
    assert CODEC.encode_event(fast) == CODEC.reference_encode(reference)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


_replacements = st.sampled_from([None, 0, -1, 1.5, True, "", "x", [], {}, [1], {"type": 3}, {"role": None}])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(ss.entry_events(), st.data())
def test_damaged_lines_fail_or_pass_the_same_way(event, data):
    """A line with any one value replaced or removed decodes, or fails, exactly as the reference does."""
    wire = orjson.loads(CODEC.reference_encode(event))
    paths = [p for p in _paths(wire) if p]
    path = data.draw(st.sampled_from(paths))
    target = wire
    for key in path[:-1]:
        target = target[key]
    if data.draw(st.booleans()) and isinstance(target, dict):
        del target[path[-1]]
    else:
        target[path[-1]] = data.draw(_replacements)
    fast = _outcome(FAST.decode_entry, wire, event.originator_id, event.originator_version)
    reference = _outcome(CODEC.decode_entry, wire, event.originator_id, event.originator_version)
    assert fast == reference


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"message","id":"a","parent_id":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":5}]}}',
        b'{"type":"message","id":"a","parent_id":null,"timestamp":"t","message":{"role":"assistant","content":"s"}}',
        b'{"type":"label","id":"a","parent_id":null,"timestamp":"t","target_id":3,"label":null}',
        b'{"type":"compaction","id":"a","parent_id":null,"timestamp":"t","summary":"s","tokens_before":1}',
    ],
)
def test_malformed_entries_are_corrupt_on_both_paths(line):
    """Type errors and missing required fields are `corrupt`, never coerced, on both paths."""
    data = orjson.loads(line)
    with pytest.raises(SessionError) as fast:
        FAST.decode_entry(data, "s", 2)
    with pytest.raises(SessionError) as reference:
        CODEC.decode_entry(data, "s", 2)
    assert fast.value.code == reference.value.code == "corrupt"
    assert fast.value.message == reference.value.message


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(ss.entry_events())
def test_pi_lines_written_through_the_generated_encoders_are_the_reference_lines(event):
    """pi's dialect encodes through the generated encoders too: the bytes are the reference's."""
    from sessiontree.adapters.pi import pi_codec
    from sessiontree.adapters.pi_wire import dumps as pi_dumps

    codec = pi_codec()
    try:
        reference = pi_dumps(codec.unstructure_event(event))
    except (TypeError, SessionError):
        return
    assert codec.encode_event(event) == reference


@pytest.mark.parametrize("dialect", ["native", "pi"])
def test_subclasses_of_value_classes_are_written_as_their_class(tmp_path, dialect):
    """An app's subclass of a block, a message or a usage is written as the class it extends
    and reads back as that class (the reference path dispatches on subclasses too)."""
    import attrs as _attrs

    from sessiontree import Cost, JsonlSessionStorage, Session, TextContent, Usage, UserMessage
    from sessiontree.adapters.pi_storage import PiSessionStorage
    from sessiontree.domain.messages import AssistantMessage

    @_attrs.frozen
    class MyText(TextContent):
        pass

    @_attrs.frozen
    class MyUsage(Usage):
        pass

    @_attrs.frozen
    class MyUser(UserMessage):
        pass

    path = tmp_path / "s.jsonl"
    storage = (PiSessionStorage if dialect == "pi" else JsonlSessionStorage).create(path, cwd="/p")
    session = Session(storage)
    session.append_message(MyUser(content=[MyText(text="hi")], timestamp=1))
    session.append_message(
        AssistantMessage(content=[MyText(text="yo")], provider="p", model="m", usage=MyUsage(input=1, cost=Cost(total=0.5)), stop_reason="stop", timestamp=2)
    )
    messages = Session(JsonlSessionStorage.open(path)).build_context().messages
    assert [type(m).__name__ for m in messages] == ["UserMessage", "AssistantMessage"]
    assert messages[0].content == (TextContent(text="hi"),) and messages[1].usage == Usage(input=1, cost=Cost(total=0.5))


@pytest.mark.parametrize(
    ("header", "code", "words"),
    [
        ({"type": "session"}, "corrupt", "no string 'id'"),
        ({"type": "session", "version": 9}, "corrupt", "no string 'id'"),
        ({"type": "session", "id": "s", "version": 9, "timestamp": "t"}, "unsupported_version", "9"),
        ({"type": "session", "id": "s", "version": 3, "timestamp": "t", "cwd": 1}, "corrupt", "'parent_session'"),
    ],
)
def test_a_damaged_native_header_is_corrupt_before_it_is_unsupported(header, code, words):
    """A header without an id is damaged, whatever its version says; a whole one of an unknown
    version is unsupported."""
    with pytest.raises(SessionError) as err:
        CODEC.decode_header(header)
    assert err.value.code == code and words in err.value.message


def _pi_edge_messages():
    import attrs as _attrs

    from sessiontree.domain import messages as m

    @_attrs.frozen
    class MyText(m.TextContent):
        pass

    @_attrs.frozen
    class MyUsage(m.Usage):
        pass

    @_attrs.frozen
    class MyAssistant(m.AssistantMessage):  # its fields' order is not pi's
        pass

    usage = m.Usage(input=1, cost=m.Cost(input=3.75e-6, output=0.25, total=1e16))
    return [
        # text that looks like an exponent; tiny and huge cost amounts
        m.AssistantMessage(
            content=(m.TextContent(text="see 1e-5 and re-do"),), provider="p", model="x", usage=usage, stop_reason="stop", timestamp=1
        ),
        # an unknown field named like a known one pi's order places (api is None)
        m.AssistantMessage(
            content=(), provider="p", model="x", api=None, stop_reason="stop", timestamp=1, extra={"api": "late", "xZ": 1}
        ),
        # free-form floats with exponents, a field marked absent
        m.AssistantMessage(
            content=(m.ToolCall(id="t", name="n", arguments={"f": 1.5e-9, "g": [1e22, 2.5e-7]}),),
            provider="p", model="x", stop_reason="stop", timestamp=1, extra=m.Extra({"xA": 2.5e-8}, frozenset({"usage"})),
        ),
        m.UserMessage(content="hi", timestamp=3, extra=m.Extra({}, frozenset({"timestamp"}))),
        # subclasses go through the reference encoder: still in pi's key order
        MyAssistant(
            content=(MyText(text="a", extra={"xQ": 1}),), provider="p", model="x", api="a",
            usage=MyUsage(input=2, cost=m.Cost(total=1e-7)), stop_reason="stop", timestamp=4,
        ),
    ]


@pytest.mark.parametrize(
    "entry",
    [
        ev.CustomEntryAppended(custom_type="c", data={"x": [2.5e-6, {"y": 2.5e21}], "z": 0.5}, extra={"xQ": 5e-6}, **_ENVELOPE),
        ev.CustomEntryAppended(custom_type="c", data=3e-6, **_ENVELOPE),
        ev.ContextCompacted(summary="s", first_kept_entry_id=None, tokens_before=1, details={"d": 7.5e-6, "tiny": 1e-300}, **_ENVELOPE),
        ev.ModelChanged(provider="p", model_id="claude-sonnet-4-5", extra={"xN": 1e-5}, **_ENVELOPE),
    ],
    ids=["custom-data", "custom-scalar", "compaction-details", "entry-extra"],
)
def test_pi_free_form_numbers_are_laid_out_by_the_generated_encoders(entry):
    """Free-form values and unknown fields of entries are laid out as JavaScript would by the
    generated encoders themselves (no look at the finished line): the reference's bytes."""
    from sessiontree.adapters.pi import pi_codec
    from sessiontree.adapters.pi_wire import dumps as pi_dumps

    codec = pi_codec()
    line = codec.encode_event(entry)
    assert line == pi_dumps(codec.unstructure_event(entry))
    # JavaScript writes plain decimals down to 1e-6 (orjson: exponents below 1e-5)
    assert b"e-6" not in line and (b"1e-300" in line) == (b"tiny" in line)


@pytest.mark.parametrize("index", range(5))
def test_pi_key_order_and_number_layout_match_the_reference_on_edge_values(index):
    """The generated pi encoders write pi's key order and JavaScript's number layout
    themselves; on values that take their less common paths they still give the reference's
    bytes (the reference orders the finished dict and lays out every number afterwards)."""
    from sessiontree.adapters.pi import pi_codec
    from sessiontree.adapters.pi_wire import dumps as pi_dumps
    from sessiontree.domain.events import MessageAppended

    codec = pi_codec()
    event = MessageAppended(
        originator_id="s", originator_version=2, timestamp="2026-01-01T00:00:00.000Z", id="a", parent_id=None,
        message=_pi_edge_messages()[index],
    )
    assert codec.encode_event(event) == pi_dumps(codec.unstructure_event(event))
    assert CODEC.encode_event(event) == CODEC.reference_encode(event)


def _colliding_unknown_fields():
    """Unknown fields named like what pi's writer orders, nested (the reference path orders
    them wherever they sit), and free-form numbers in tuples and in a mapping that is no dict."""
    from types import MappingProxyType

    from sessiontree.domain import messages as m

    user_with_usage = m.UserMessage(content="u", extra={"usage": {"output": 1, "input": 2, "cost": {"total": 1, "input": 2}}})
    summary_with_blocks = m.BranchSummaryMessage(summary="s", from_id="f", extra={"content": [{"text": "t", "type": "text"}]})
    usage_with_cost = m.Usage(input=1, extra={"cost": {"total": 3e-7, "input": 1}})
    return {
        "entry-message": ev.CustomEntryAppended(
            custom_type="c", data=1, extra={"message": {"timestamp": 1, "content": "x", "role": "user"}}, **_ENVELOPE
        ),
        "message-usage": ev.MessageAppended(message=user_with_usage, **_ENVELOPE),
        "message-content": ev.MessageAppended(message=summary_with_blocks, **_ENVELOPE),
        "entry-retained-tail": ev.LabelChanged(
            target_id="t", label="l", extra={"retainedTail": [{"content": "x", "role": "user"}]}, **_ENVELOPE
        ),
        "usage-cost": ev.MessageAppended(
            message=m.AssistantMessage(content=(), provider="p", model="x", usage=usage_with_cost, stop_reason="stop", timestamp=1),
            **_ENVELOPE,
        ),
        "summary-usage": ev.BranchSummarized(from_id="f", summary="s", extra={"usage": {"output": 1, "input": 2}}, **_ENVELOPE),
        "tuple-numbers": ev.MessageAppended(
            message=m.AssistantMessage(
                content=(m.ToolCall(id="t", name="n", arguments={"a": (1e-6, [2.5e-6])}),),
                provider="p", model="x", stop_reason="stop", timestamp=1,
            ),
            **_ENVELOPE,
        ),
        "mapping-proxy": ev.MessageAppended(
            message=m.AssistantMessage(
                content=(m.ToolCall(id="t", name="n", arguments=MappingProxyType({"x": 1e-6})),),
                provider="p", model="x", stop_reason="stop", timestamp=1,
            ),
            **_ENVELOPE,
        ),
    }


@pytest.mark.parametrize("name", list(_colliding_unknown_fields()))
def test_pi_lines_with_unknown_fields_named_like_ordered_ones_are_the_reference_lines(name):
    """pi's writer orders nested messages, blocks and usage wherever they sit, unknown fields
    included; the generated encoders hand such objects to the same ordering."""
    from sessiontree.adapters.pi import pi_codec
    from sessiontree.adapters.pi_wire import dumps as pi_dumps

    event = _colliding_unknown_fields()[name]
    codec = pi_codec()
    assert codec.encode_event(event) == pi_dumps(codec.unstructure_event(event))


# -- the compiled encoders (adapters/_speedups.c) and the generated Python ones agree -----------

from sessiontree.adapters import fastcodec  # noqa: E402

needs_compiled = pytest.mark.skipif(fastcodec._speedups is None, reason="the compiled encoders are not built here")


def _codec_pair(dialect):
    """Two new codecs of ``dialect`` (not the shared ones): one encoding through compiled
    encoders, one through generated Python functions."""
    from sessiontree.adapters.codec import NATIVE, Codec
    from sessiontree.adapters.pi import PiCodec

    out = []
    for compiled in (True, False):
        codec = PiCodec() if dialect == "pi" else Codec(NATIVE)
        codec.__dict__["_fast"] = fastcodec.FastCodec(codec, compiled=compiled)
        out.append(codec)
    return out


@needs_compiled
@pytest.mark.parametrize("dialect", ["native", "pi"])
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(event=ss.entry_events())
def test_compiled_and_python_encoders_write_the_same_bytes(dialect, event):
    """Any entry, as made or as read back (shared, read-only ``extra`` with absent fields):
    the compiled encoders give the bytes the generated Python encoders give."""
    compiled, python = _codec_pair(dialect)
    encoder = compiled.fast._new_encoder(type(event))  # None: an unknown entry, written by the reference
    assert encoder is None or isinstance(encoder, fastcodec._speedups.Encoder)
    try:
        expected = python.encode_event(event)
    except SessionError as exc:
        with pytest.raises(SessionError) as caught:
            compiled.encode_event(event)
        assert caught.value.code == exc.code
        return
    assert compiled.encode_event(event) == expected
    read_back = python.decode(orjson.loads(expected), event.originator_id, event.originator_version)
    assert compiled.encode_event(read_back) == python.encode_event(read_back) == expected


def test_pure_python_encoders_write_the_reference_bytes():
    """With the compiled encoders switched off (SESSIONTREE_PURE_PYTHON), encoding goes
    through generated Python functions, which give the reference bytes."""
    from sessiontree.adapters.codec import NATIVE, Codec

    python = Codec(NATIVE)
    python.__dict__["_fast"] = fastcodec.FastCodec(python, compiled=False)
    event = ev.MessageAppended(**_ENVELOPE, message=_assistant())
    assert callable(python.fast._new_encoder(ev.MessageAppended))
    assert not isinstance(python.fast._encoders[ev.MessageAppended], getattr(fastcodec._speedups, "Encoder", ()))
    assert python.encode_event(event) == CODEC.reference_encode(event)


def _assistant():
    from sessiontree.domain import messages as m

    return m.AssistantMessage(
        content=[m.ThinkingContent(thinking="t"), m.TextContent(text="x"), m.ToolCall(id="1", name="n", arguments={"a": [1, 2.5]})],
        provider="p",
        model="m",
        usage=m.Usage(input=1, output=2, cost=m.Cost(input=0.1, total=0.25)),
        stop_reason="stop",
        timestamp=3,
    )


@needs_compiled
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_an_unset_attribute_fails_the_same_way_on_both_paths(compiled):
    """A value missing an attribute its class declares (a slot deleted behind attrs' back)
    raises AttributeError from either encoder, as attribute access would."""
    from sessiontree.domain import messages as m

    codec = native_codec()
    fast = fastcodec.FastCodec(codec, compiled=compiled)
    block = m.TextContent(text="x")
    object.__delattr__(block, "text")
    with pytest.raises(AttributeError):
        (fast._encoders.get(m.TextContent) or fast._new_encoder(m.TextContent))(block)


@needs_compiled
def test_a_compiled_encoder_refuses_a_bad_plan_and_bad_calls():
    Encoder = fastcodec._speedups.Encoder
    ok = dict(cls=object, name="x", items=[("k", 0, 1, None)], first=(), omit=(), fields=frozenset(), items_writer=None,
              reorder=None, reorder_arg=None, encoders={}, fallback=repr)
    from types import SimpleNamespace

    encoder = Encoder(**ok)
    assert encoder(SimpleNamespace(extra={})) == {"k": 1} and "compiled encoder x" in repr(encoder)
    assert encoder(SimpleNamespace(extra={"u": 2})) == {"k": 1, "u": 2}
    with pytest.raises(AttributeError):
        encoder(object())  # no extra
    with pytest.raises(TypeError):
        encoder()
    with pytest.raises(TypeError):
        encoder(1, 2)
    with pytest.raises(TypeError):
        encoder(value=1)
    with pytest.raises(ValueError, match="unknown encoder operation"):
        Encoder(**{**ok, "items": [("k", 42, "a", None)]})
    with pytest.raises(TypeError, match="attribute name"):
        Encoder(**{**ok, "items": [("k", 1, 5, None)]})
    with pytest.raises(TypeError, match="converter"):
        Encoder(**{**ok, "items": [("k", 2, "a", None)]})
    with pytest.raises(TypeError, match="fallback"):
        Encoder(**{**ok, "fallback": 3})
    with pytest.raises(TypeError):
        Encoder(**{**ok, "omit": ["k"]})
    with pytest.raises(TypeError):
        fastcodec._speedups.Encoder.__new__(Encoder)(object())  # never initialised: not callable
    with pytest.raises(ValueError, match="first"):
        Encoder(**{**ok, "first": (3,)})
    with pytest.raises(TypeError, match="cannot be replaced"):
        encoder.__init__(**ok)  # a running encode may be using the plan


@needs_compiled
def test_a_compiled_encoder_goes_through_getattr_for_a_subclass():
    """Slots are read directly only for values of exactly the plan's class: a subclass that
    turns a field into a property is written with the property's value."""
    import attrs as _attrs

    from sessiontree.domain import messages as m

    fast = fastcodec.FastCodec(native_codec(), compiled=True)
    encoder = fast._new_encoder(m.TextContent)

    class Shouting(m.TextContent):
        @property
        def text(self):  # type: ignore[override]
            return "LOUD"

    assert encoder(m.TextContent(text="quiet"))["text"] == "quiet"
    loud = object.__new__(Shouting)
    object.__setattr__(loud, "extra", {})
    assert encoder(loud)["text"] == "LOUD"
    assert _attrs.has(Shouting)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


def _holds_unplain(value, lo, hi):
    if type(value) is float:
        return value != 0 and not lo <= abs(value) < hi
    if type(value) is dict:
        return any(_holds_unplain(v, lo, hi) for v in value.values())
    if type(value) in (list, tuple):
        return any(_holds_unplain(v, lo, hi) for v in value)
    return False


@settings(max_examples=500)
@given(value=_json_values)
def test_pi_writers_leave_plain_floats_as_they_are(value):
    """What Dialect.plain_floats promises for pi (compiled encoders call the writers only
    for other values): a value without an unplain float comes back as the same object."""
    from sessiontree.adapters.pi import PI

    lo, hi = PI.plain_floats
    if not _holds_unplain(value, lo, hi):
        assert PI.value_writer(value) is value
        if type(value) is float or type(value) is int:
            assert PI.float_writer(value) is value


@needs_compiled
@pytest.mark.parametrize(
    ("cost", "arguments"),
    [
        (0.0, {"x": 1}),
        (-0.0, {"x": [0.5, "s"]}),
        (1e-7, {"x": [1e-9, {"y": 1e30}]}),
        (2.5e20, {"deep": [[[{"z": (1.5e-5,)}]]]}),
        (0.0001, {"edge": [1e16, 9.999999999999999e15, 0.0001, 9.9e-5]}),
        (123.25, {}),
    ],
)
def test_pi_numbers_are_laid_out_the_same_by_compiled_and_python_encoders(cost, arguments):
    """Floats at and around the edges of pi's plain range, in a cost and deep in tool
    arguments: compiled, Python and reference encoders write the same line."""
    from sessiontree.adapters.pi_wire import dumps as pi_dumps
    from sessiontree.domain import messages as m

    compiled, python = _codec_pair("pi")
    message = m.AssistantMessage(
        content=[m.ToolCall(id="1", name="n", arguments=arguments)],
        provider="p",
        model="m",
        usage=m.Usage(input=1, cost=m.Cost(input=cost, output=cost / 3, total=cost)),
        stop_reason="toolUse",
        timestamp=3,
    )
    event = ev.MessageAppended(**_ENVELOPE, message=message)
    expected = pi_dumps(python.unstructure_event(event))
    assert python.encode_event(event) == expected
    assert compiled.encode_event(event) == expected
    assert compiled.encode_event(event) == expected  # the encoder made: the fast path


@needs_compiled
def test_a_compiled_encoder_survives_its_encoders_being_dropped_while_it_runs():
    """A callback (here a dialect's value writer) that empties the encoders while a nested
    compiled encoder runs: the encoding finishes with the right line (the encoders are held
    while they run), and the next one makes them again."""
    from sessiontree.adapters.codec import Codec, Dialect
    from sessiontree.domain import messages as m

    state = {"armed": False}

    def writer(value):
        if state["armed"]:
            state["armed"] = False
            fast._encoders.clear()
            [bytearray(200) for _ in range(2000)]  # reuse the freed memory, were it freed
        return value

    class Clearing(Dialect):
        value_writer = staticmethod(writer)

    codec = Codec(Clearing())
    fast = codec.__dict__["_fast"] = fastcodec.FastCodec(codec, compiled=True)
    message = m.AssistantMessage(
        content=[m.ToolCall(id="1", name="n", arguments={"a": 1}), m.TextContent(text="after")], provider="p", model="m"
    )
    event = ev.MessageAppended(**_ENVELOPE, message=message)
    expected = fast.encode_entry(event)
    state["armed"] = True
    assert fast.encode_entry(event) == expected
    assert fast.encode_entry(event) == expected


@needs_compiled
def test_a_compiled_encoder_evaluates_in_the_generated_function_s_order():
    """Nested values first, in field order, then the rest in key order: with two broken
    attributes both paths raise about the same one."""
    from sessiontree.domain import messages as m

    def broken_message():
        message = m.AssistantMessage(content=[], provider="p", model="m", usage=m.Usage(cost=m.Cost()))
        object.__delattr__(message.usage, "cost")  # a nested value fails ...
        object.__delattr__(message, "provider")  # ... and so does a plain field before it in key order
        return message

    errors = []
    for compiled in (True, False):
        fast = fastcodec.FastCodec(native_codec(), compiled=compiled)
        encoder = fast._new_encoder(m.AssistantMessage)
        with pytest.raises(AttributeError) as caught:
            encoder(broken_message())
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "cost" in errors[0]
