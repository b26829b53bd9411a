"""Lines that are costly or ambiguous to parse (issue 15, item 8; docs/reliability.md): a line
with more keys and items than the bound is ``corrupt`` before it is parsed, and a key repeated
in one object is refused in native files and warned about in pi's."""

from __future__ import annotations

import tracemalloc
import warnings
from pathlib import Path

import orjson
import pytest
import sessiontree_testkit as kit

from sessiontree import JsonlSessionStorage, Session, SessionError, verify
from sessiontree.pi.pi_convert import export_pi
from sessiontree.storage.jsonl_scan import DuplicateKeyWarning
from sessiontree.wire import jsontext as codec_module


def native_file(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path, cwd="/p"))
    session.append_message(kit.user("hello"))
    session.close()
    return path


def add_line(path: Path, line: bytes) -> None:
    with open(path, "ab") as out:
        out.write(line + b"\n")


def parent_of_new(path: Path, key: str = "parent_id") -> bytes:
    last = orjson.loads(path.read_bytes().splitlines()[-1])
    return orjson.dumps(last["id"])


def test_a_line_of_too_many_keys_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """1.2M keys in a custom entry's data: ``corrupt`` naming the line, and the attempt stays
    far below the ~180 MB its parse would take (before the fix: a 54 MB line of 5M keys took
    747 MB)."""
    path = native_file(tmp_path)
    keys = b",".join(b'"k%d":1' % i for i in range(1_200_000))
    add_line(path, b'{"type":"custom","id":"big00001","parent_id":' + parent_of_new(path)
             + b',"timestamp":"2026-01-01T00:00:00.000Z","custom_type":"x","data":{' + keys + b"}}")
    session = Session(JsonlSessionStorage.open(path))
    tracemalloc.start()
    try:
        with pytest.raises(SessionError) as caught:
            session.get_entries()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.code == "corrupt" and caught.value.line == 3
    assert "more than 1,000,000 keys and items" in caught.value.message
    assert peak < 60 << 20, peak
    report = verify(path)
    assert report.first_bad_line == 3


def test_a_repeated_key_in_a_native_line_is_corrupt(tmp_path: Path) -> None:
    """``"id"`` twice: readers would disagree on which entry this is; refused, named by line,
    by the reader and by verify."""
    path = native_file(tmp_path)
    add_line(path, b'{"type":"message","id":"aaaa0001","parent_id":' + parent_of_new(path)
             + b',"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"x","content":"y","timestamp":0}}')
    session = Session(JsonlSessionStorage.open(path))
    with pytest.raises(SessionError) as caught:
        session.build_context()
    assert caught.value.code == "corrupt" and caught.value.line == 3 and "'content' appears twice" in caught.value.message
    report = verify(path)
    assert report.first_bad_line == 3 and "appears twice" in report.problems[0].message


def test_a_repeated_key_in_a_pi_line_is_read_with_a_warning(tmp_path: Path) -> None:
    """pi reads the last value of a repeated key: so do we, and say so."""
    pi_path = tmp_path / "pi.jsonl"
    export_pi(native_file(tmp_path), pi_path)
    last = orjson.loads(pi_path.read_bytes().splitlines()[-1])
    add_line(pi_path, b'{"type":"message","id":"bbbb0001","parentId":' + orjson.dumps(last["id"])
             + b',"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"first","content":"second","timestamp":0}}')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session = Session(JsonlSessionStorage.open(pi_path))
        assert session.build_context().messages[-1].content == "second"
    assert any(issubclass(w.category, DuplicateKeyWarning) for w in caught)
    assert any("appears twice" in w for w in session.storage.warnings)
    report = verify(pi_path)
    assert report.ok and any("appears twice" in w.message for w in report.warnings)


def test_line_problem_is_cheap_for_ordinary_lines_and_exact_for_repeats() -> None:
    """The bound only looks at lines longer than it; repeats are found at any depth."""
    assert codec_module.line_problem(b'{"a":{"b":[1,{"c":2}]}}') is None
    assert "'c'" in codec_module.line_problem(b'{"a":{"b":[1,{"c":2,"c":3}]}}')
    assert codec_module.duplicate_key(b'{"a" : 1, "b": "\\"a\\":"}') is None
