"""Every dialect through the wire model against real session files: the shared pi fixtures as pi wrote them, and the
same sessions as the native writer lays them out (sealed by the hash chain). Each line decodes, both reading paths
agree, and writing the event back gives the line again; then the lines as other producers would have written them
(test_codec_paths_producers.py does the same for generated events; here the lines are the files' own)."""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec
import orjson
import pytest
import sessiontree_pi as pi
from hypothesis import given
from hypothesis import strategies as st
from sessiontree_codecpaths import (
    CODECS,
    SETTINGS,
    SID,
    UNKNOWN_KEY,
    VERSION,
    assert_paths_agree,
    entry_class,
    rewrite,
    typed_accepts,
    wire_objects,
)

from sessiontree.audit import chain
from sessiontree.pi.pi import PiCodec, js_values


@cache
def fixture_files() -> dict[str, list[bytes]]:
    """``{"pi/NAME": lines, "native/NAME": lines}``: each pi fixture, and the same session written natively."""
    files: dict[str, list[bytes]] = {}
    pi_codec, native = CODECS["pi"], CODECS["native"]
    for path in sorted(pi.fixtures_dir().glob("*.jsonl")):
        lines = path.read_bytes().splitlines()
        files[f"pi/{path.name}"] = lines
        events = [pi_codec.decode_line(lines[0], SID, 1)]
        for number, raw in enumerate(lines[1:], start=2):
            assert not PiCodec.is_leaf_marker(orjson.loads(raw))  # read in the context of its file: not here
            events.append(pi_codec.decode_line(raw, events[0].originator_id, number))
        files[f"native/{path.name}"] = chain.seal_lines([native.encode_event(e) for e in events])[0]
    return files


def entry_lines() -> list[tuple[str, bytes]]:
    """``(dialect, line)`` of every entry line of every file (the chain field stripped off native ones)."""
    return [
        (name.split("/")[0], chain.strip(line) if name.startswith("native/") else line)
        for name, lines in fixture_files().items()
        for line in lines[1:]
    ]


def written(dialect: str, data: Any) -> bytes:
    """A parsed line as the dialect's writer lays out its values (pi's numbers as JavaScript writes them)."""
    return msgspec.json.encode(js_values(data) if dialect == "pi" else data)


@pytest.mark.parametrize("dialect", ["native", "pi"])
def test_every_fixture_line_is_read_both_ways_and_written_back_exactly(dialect):
    """Every line of every file: the header and each entry decode (by the typed path, or the complete reading for
    what that refuses, such as pi's branch summaries without ``fromHook``; both agree), and encoding the event gives the line's bytes back (natively without
    the chain field, which the storage adds; test_pi_codec.py checks pi's complete path byte for byte too)."""
    codec = CODECS[dialect]
    files = {name: lines for name, lines in fixture_files().items() if name.startswith(f"{dialect}/")}
    assert files, "no fixture files"
    for name, lines in files.items():
        header = codec.decode_line(lines[0], SID, 1)
        assert codec.encode_event(header) == chain.strip(lines[0]), name
        for number, line in enumerate(lines[1:], start=2):
            bare = chain.strip(line)
            if dialect == "native":
                assert chain.split(line)[1] is not None  # sealed: decode_line reads past the field
                assert codec.decode_line(line, SID, VERSION) == codec.decode_line(bare, SID, VERSION)
            typed, via_dict = assert_paths_agree(codec, bare)
            assert codec.encode_event(typed) == bare, (name, number)
            assert codec.encode_event(via_dict) == bare, (name, number)


def test_the_fixtures_hold_every_kind_of_line_they_should():
    """The files are worth running: messages of several roles, a compaction, more than one file per dialect."""
    kinds = {orjson.loads(line)["type"] for _dialect, line in entry_lines()}
    assert {"message", "model_change", "thinking_level_change", "compaction"} <= kinds
    roles = {orjson.loads(line)["message"]["role"] for _d, line in entry_lines() if b'"type":"message"' in line[:20]}
    assert {"user", "assistant", "toolResult"} <= roles


# -- the files' lines as other producers write them ----------------------------------------------------------------


def structural(line: bytes) -> list[int]:
    """Offsets of the commas, colons and brackets outside strings: where JSON allows whitespace after them."""
    places, in_string, escaped = [], False, False
    for at, byte in enumerate(line):
        if in_string:
            escaped, in_string = (not escaped and byte == 92), in_string and (escaped or byte != 34)
        elif byte == 34:
            in_string = True
        elif byte in b",:{[":
            places.append(at)
    return places

MUTATIONS = ("drop", "null", "unknown", "reorder", "spaces")


@st.composite
def mutated_lines(draw: Any) -> tuple[str, bytes, bytes, str]:
    """``(dialect, line, mutated line, mutation)``: one fixture line with one object in it changed."""
    dialect, line = draw(st.sampled_from(entry_lines()))
    codec = CODECS[dialect]
    data = orjson.loads(line)
    assert written(dialect, data) == line  # the layout below is the writer's own
    path, cls, obj = draw(st.sampled_from(wire_objects(codec, data, entry_class(codec, data))))
    fields = codec.schemas[cls].fields
    choices = {
        "drop": [f.wire for f in fields if not f.required and f.wire in obj],
        "null": [f.wire for f in fields if f.omit_none],
        "unknown": [UNKNOWN_KEY],
        "reorder": list(obj) if len(obj) > 1 else [],
        "spaces": [True],
    }
    mutation = draw(st.sampled_from([k for k in MUTATIONS if choices[k]]))
    if mutation == "spaces":
        places = structural(line)
        chosen = draw(st.lists(st.sampled_from(places), min_size=1, max_size=8, unique=True))
        space = draw(st.sampled_from([b" ", b"\t", b"  "]))
        out = bytearray(line)
        for at in sorted(chosen, reverse=True):
            out[at + 1 : at + 1] = space
        return dialect, line, bytes(out), f"{mutation} at {len(chosen)} places"
    key = draw(st.sampled_from(choices[mutation]))
    if mutation == "reorder":
        keys = draw(st.permutations(list(obj)))
        moved = {k: obj[k] for k in keys}
        obj.clear()
        obj.update(moved)
    else:
        rewrite(codec, cls, obj, {key} if mutation == "drop" else set(), {key} if mutation == "null" else set(),
                mutation == "unknown")
    return dialect, line, written(dialect, data), f"{mutation} {key} at {path}"


@SETTINGS
@given(mutated_lines())
def test_fixture_lines_as_other_producers_write_them(case):
    """A field left out, an omit-when-None field written as null, an unknown key added (last, where the writer puts
    the fields it keeps): both paths read the line alike and it is written back as that producer wrote it. Keys
    reordered or whitespace added: the same event as the file's line, written back as the file's line (the writer
    has one layout)."""
    dialect, line, changed, mutation = case
    codec = CODECS[dialect]
    typed, via_dict = assert_paths_agree(codec, changed)
    if mutation.startswith(("reorder", "spaces")):
        original = codec.decode_line(line, SID, VERSION)
        assert typed == original, mutation
        assert codec.encode_event(typed) == line, mutation
    else:
        if mutation.startswith("unknown") or (mutation.startswith("null") and changed != line):
            assert not typed_accepts(codec, changed), mutation  # outside the writer's layout: the complete reading
        assert codec.encode_event(typed) == changed, mutation
        assert codec.encode_event(via_dict) == changed, mutation
