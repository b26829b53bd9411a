"""The typed wire decoder (msgspec structs) never decides a line differently from the dict path.

For every line it either gives an object equal to the dict path's (which the fast codec
tests tie to the reference codec), with the same unknown and absent fields, or it declines
(None) and the dict path decides, errors included.
"""

import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import sessiontree_strategies as ss  # noqa: E402

from sessiontree.adapters.chain import CHAIN_KEY, is_sealed, seal_lines  # noqa: E402
from sessiontree.adapters.codec import native_codec  # noqa: E402
from sessiontree.adapters.jsonl_scan import codec_wire_decoder  # noqa: E402
from sessiontree.adapters.pi import pi_codec  # noqa: E402
from sessiontree.domain.errors import SessionError  # noqa: E402

CODECS = {"native": native_codec(), "pi": pi_codec()}


def _dict_path(codec, line, version=2):
    try:
        data = orjson.loads(line)
        if isinstance(data, dict) and is_sealed(line):
            data.pop(CHAIN_KEY)
        return ("ok", codec.decode(data, "s", version))
    except (SessionError, orjson.JSONDecodeError) as exc:
        return ("error", type(exc).__name__)


def _same(a, b):
    """Equal, and equal in what equality ignores: which fields were absent, everywhere."""
    assert a == b
    assert type(a) is type(b)
    if hasattr(a, "extra"):
        assert dict(a.extra) == dict(b.extra)
        assert getattr(a.extra, "absent", frozenset()) == getattr(b.extra, "absent", frozenset())
        assert getattr(a.extra, "nulls", frozenset()) == getattr(b.extra, "nulls", frozenset())
    for name in ("message", "usage", "cost", "retained_tail", "content"):
        x, y = getattr(a, name, None), getattr(b, name, None)
        if isinstance(x, tuple):
            for p, q in zip(x, y, strict=True):
                _same(p, q)
        elif hasattr(x, "extra"):
            _same(x, y)


@pytest.mark.parametrize("dialect", sorted(CODECS))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(event=ss.entry_events())
def test_any_entry_decodes_to_what_the_dict_path_gives(dialect, event):
    """Every line either decodes to the dict path's object (absent fields and all) or is declined."""
    codec = CODECS[dialect]
    try:
        line = codec.encode_event(event)
    except SessionError:
        return  # an entry this dialect cannot write
    wire = codec_wire_decoder(codec).decode(line, "s", 2)
    outcome = _dict_path(codec, line)
    if wire is not None:
        assert outcome[0] == "ok"
        _same(wire, outcome[1])
        assert codec.encode_event(wire) == line


def test_common_entries_take_the_typed_path():
    """The entries a context is made of are decoded by the typed path, not declined."""
    codec = CODECS["native"]
    line = (
        b'{"type":"message","id":"a","parent_id":null,"timestamp":"2026-01-01T00:00:00.000Z",'
        b'"message":{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"x"},'
        b'{"type":"tool_call","id":"c","name":"read","arguments":{"path":"a"}}],"provider":"p","model":"m",'
        b'"usage":{"input":1,"output":2,"cache_read":0,"cache_write":0,"total_tokens":3,'
        b'"cost":{"input":0.1,"output":0.2,"cache_read":0,"cache_write":0,"total":0.3}},"stop_reason":"stop","timestamp":5}}'
    )
    entry = codec_wire_decoder(codec).decode(line, "s", 2)
    assert entry is not None
    _same(entry, _dict_path(codec, line)[1])
    sealed = seal_lines([line])[0]
    assert sealed != line
    assert codec_wire_decoder(codec).decode(sealed, "s", 2) == entry


_BASE = '{"type":"message","id":"a","parent_id":null,"timestamp":"t","message":{"role":"user","content":%s,"timestamp":%s}}'
_CALL = (
    '{"type":"message","id":"a","parent_id":null,"timestamp":"t","message":{"role":"assistant",'
    '"content":[{"type":"tool_call","id":"x","name":"n","arguments":%s}]}}'
)


@pytest.mark.parametrize(
    "line",
    [
        _BASE % ('"hi"', "18446744073709551616"),  # orjson: a float, so not an int
        _BASE % ('"hi"', "-9223372036854775809"),
        _BASE % ('"hi"', "9223372036854775808"),  # orjson: an int; msgspec's bounds are int64
        _BASE % ('"hi"', "1e400"),  # orjson: not JSON
        _BASE % ('"hi"', "1.0"),  # a float where an int is wanted
        _BASE % ('"\\ud800"', "1"),  # a lone surrogate
        _BASE % ('"a","content":"b"', "1"),  # a duplicate key: the last wins on both paths
        _BASE % ('[{"type":"text","text":"x","xNew":1}]', "1"),  # an unknown field: kept in extra
        _BASE % ('[{"type":"video","url":"x"}]', "1"),  # an unknown block type
        _BASE % ('"hi","xNew":[1]', "1"),
        _CALL % '{"a":18446744073709551616}',
        _CALL % '{"a":12345678901234567890}',
        _CALL % '{"a":1,"a":2}',
        _CALL % "[1]",  # arguments must be an object
        _CALL % "null",
        '{"type":"message","id":"","parent_id":null,"timestamp":"t","message":{"role":"user","content":"x"}}',
        '{"type":"message","id":"a","parent_id":null,"timestamp":"t","message":{"role":"user","content":"x"},"chain":"x"}',
        '{"type":"label","id":"a","parent_id":null,"timestamp":"t","target_id":"b"}',
        '{"type":"video","id":"a","parent_id":null,"timestamp":"t"}',
    ],
)
def test_edge_cases_are_decided_as_the_dict_path_decides(line):
    """Numbers at orjson's limits, duplicate keys, unknown fields and types, a bad chain field:
    the typed path agrees with the dict path or declines."""
    codec = CODECS["native"]
    wire = codec_wire_decoder(codec).decode(line.encode(), "s", 2)
    outcome = _dict_path(codec, line.encode())
    if wire is not None:
        assert outcome[0] == "ok"
        _same(wire, outcome[1])


def test_pi_entries_with_pi_rules_are_left_to_the_dict_path():
    """Entry types pi reads with extra rules (absent label, explicit nulls, leaf markers) are declined."""
    codec = CODECS["pi"]
    for line in (
        b'{"type":"label","id":"a","parentId":null,"timestamp":"t","targetId":"b"}',
        b'{"type":"custom","customType":"x","data":null,"id":"a","parentId":null,"timestamp":"t"}',
        b'{"type":"session_info","id":"a","parentId":null,"timestamp":"t"}',
    ):
        assert codec_wire_decoder(codec).decode(line, "s", 2) is None
    line = b'{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"toolResult","toolCallId":"c","toolName":"n","content":[],"isError":false,"timestamp":1}}'
    entry = codec_wire_decoder(codec).decode(line, "s", 2)
    assert entry is not None
    _same(entry, _dict_path(codec, line)[1])


def test_decoded_values_share_one_read_only_extra_per_set_of_absent_fields():
    """Values with no unknown fields share their (empty) extra; it cannot be changed, and a copy can."""
    import copy

    from sessiontree.domain.messages import Extra, SharedExtra

    codec = CODECS["native"]
    line = b'{"type":"message","id":"%s","parent_id":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"x"}],"timestamp":1}}'
    a = codec_wire_decoder(codec).decode(line % b"a", "s", 2)
    b = codec_wire_decoder(codec).decode(line % b"b", "s", 3)
    assert a.message.content[0].extra is b.message.content[0].extra
    assert a.message.extra is b.message.extra == {}
    extra = a.message.content[0].extra
    assert isinstance(extra, SharedExtra) and extra == {}
    with pytest.raises(TypeError):
        extra["x"] = 1
    with pytest.raises(TypeError):
        extra.update(x=1)
    mine = copy.copy(extra)
    mine["x"] = 1
    assert type(mine) is Extra and extra == {}
    assert codec.encode_event(a) == line % b"a"
    dict_path = _dict_path(codec, line % b"a")[1]
    assert dict_path.message.content[0].extra is extra  # the dict path shares them too


def test_decoding_a_block_drops_its_lines_and_releases_memory_as_it_goes(tmp_path, monkeypatch):
    """Decoded lines are dropped, and free memory is handed back every RELEASE_EVERY lines."""
    from sessiontree import JsonlSessionStorage, Session, TextContent, UserMessage
    from sessiontree.adapters import jsonl_scan

    session = Session(JsonlSessionStorage.create(tmp_path / "s.jsonl", cwd="/p"))
    for index in range(10):
        session.append_message(UserMessage(content=[TextContent(text=f"m{index}")], timestamp=index))
    calls = []
    monkeypatch.setattr(jsonl_scan, "RELEASE_EVERY", 4)
    monkeypatch.setattr(jsonl_scan, "release_free_memory", lambda: calls.append(1))
    storage = JsonlSessionStorage.open(tmp_path / "s.jsonl")
    _, block = storage.load()
    entries = block.load_many(list(range(10)))
    assert [e.message.content[0].text for e in entries] == [f"m{i}" for i in range(10)]
    assert len(calls) == 3  # after 4 and 8 lines, and for the last 2 (at least half of 4)
    reopened = Session(JsonlSessionStorage.open(tmp_path / "s.jsonl"))
    assert reopened.build_context().messages == session.build_context().messages


def _session_file(tmp_path, count):
    from sessiontree import JsonlSessionStorage, Session, TextContent, UserMessage

    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path, cwd="/p"))
    for index in range(count):
        session.append_message(UserMessage(content=[TextContent(text=f"m{index}")], timestamp=index))
    return path, session


def test_a_bad_line_leaves_the_entries_decoded_before_it_readable(tmp_path):
    """Given a context whose last line has a bad body, building it fails naming that line,
    again on a retry, and every other entry stays readable (none is lost with the error)."""
    from sessiontree import JsonlSessionStorage, Session

    path, written = _session_file(tmp_path, 5)
    lines = path.read_bytes().splitlines()
    lines[-1] = lines[-1].replace(b'"content":[{"type":"text"', b'"content":[{"type":7')
    path.write_bytes(b"\n".join(lines) + b"\n")
    session = Session(JsonlSessionStorage.open(path))
    for _ in range(2):
        with pytest.raises(SessionError) as err:
            session.build_context()
        assert err.value.code == "corrupt" and err.value.line == 6
    for entry in written.get_entries()[:-1]:
        assert session.get_entry(entry.id) == entry
    assert session._agg.log.get_many([0, 0, 1])[0] is session._agg.log.get(0)


def test_threads_building_one_context_at_once_agree(tmp_path):
    """Four threads building the context of a freshly opened session all get the same one."""
    import threading

    from sessiontree import JsonlSessionStorage, Session

    path, written = _session_file(tmp_path, 3000)
    expected = written.build_context().messages
    for _ in range(5):
        session = Session(JsonlSessionStorage.open(path))
        results, errors = [], []

        def build():
            try:
                results.append(session.build_context().messages)
            except Exception as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=build) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == [] and all(result == expected for result in results)


def test_a_free_form_number_orjson_refuses_is_the_dict_paths_corrupt_error(tmp_path):
    """A value orjson cannot read (1e400) inside free-form data is `corrupt`, naming the line."""
    from sessiontree import JsonlSessionStorage, Session

    path, _ = _session_file(tmp_path, 1)
    with path.open("ab") as f:
        f.write(b'{"type":"custom","id":"c1","parent_id":null,"timestamp":"2026-01-01T00:00:00.000Z","custom_type":"x","data":{"x":1e400}}\n')
    session = Session(JsonlSessionStorage.open(path))
    with pytest.raises(SessionError) as err:
        session.get_entry("c1")
    assert err.value.code == "corrupt" and err.value.line == 3 and "JSON" in err.value.message


def test_a_str_subclass_is_written_as_a_string(tmp_path):
    """Content given as a str subclass (a StrEnum, say) is written and read back as text."""
    from sessiontree import JsonlSessionStorage, Session, UserMessage

    class Text(str):
        pass

    path, session = _session_file(tmp_path, 0)
    session.append_message(UserMessage(content=Text("hello"), timestamp=1))
    assert b'"content":"hello"' in path.read_bytes()
    assert Session(JsonlSessionStorage.open(path)).build_context().messages[0].content == "hello"
