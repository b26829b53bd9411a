"""Damaged JSONL files: torn last lines, malformed lines (file and line named) and salvage mode."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import sessiontree_testkit as kit

from sessiontree import JsonlSessionStorage, Session, SessionError
from sessiontree.storage.jsonl_file import TornLineWarning

SID = kit.SESSION_ID
HEADER = (
    '{"type":"session","version":3,"id":"' + SID + '","timestamp":"2026-11-29T11:30:00.000Z",'
    '"cwd":"/p","parent_session":null,"metadata":{}}'
)


def entry(entry_id: str, parent: str | None, kind: str = "session_info", **fields: object) -> str:
    body = {"type": kind, "id": entry_id, "parent_id": parent, "timestamp": "2026-11-29T11:30:01.000Z"}
    body.update(fields or {"name": entry_id})
    return orjson.dumps(body).decode()


GOOD = [HEADER, entry("a", None), entry("b", "a"), entry("c", "b")]


def write(path: Path, lines: list[str], tail: str = "") -> Path:
    path.write_text("".join(line + "\n" for line in lines) + tail)
    return path


def test_a_torn_last_line_is_ignored_then_repaired(tmp_path: Path) -> None:
    """A torn last line is skipped with a warning on read and cut off before the next append."""
    path = write(tmp_path / "s.jsonl", GOOD, tail='{"type":"session_info","id":"d","par')
    storage = JsonlSessionStorage.open(path)
    with pytest.warns(TornLineWarning, match="line 5"):
        session = Session(storage)
    assert [e.id for e in session.get_entries()] == ["a", "b", "c"]
    assert storage.warnings and "torn" in storage.warnings[0]
    with pytest.warns(TornLineWarning, match="removed"):
        session.append_session_info("after")
    lines = path.read_text().splitlines()
    assert lines[:4] == GOOD and orjson.loads(lines[4])["name"] == "after" and len(lines) == 5
    assert len(storage.warnings) == 2
    assert [e.id for e in Session(JsonlSessionStorage.open(path)).get_entries()][:3] == ["a", "b", "c"]


def test_a_torn_header_is_corrupt(tmp_path: Path) -> None:
    """A file whose only line is torn has no header: ``corrupt`` at line 1."""
    path = tmp_path / "s.jsonl"
    path.write_text(HEADER[:30])
    with pytest.raises(SessionError) as caught:
        JsonlSessionStorage.open(path)
    assert (caught.value.code, caught.value.line, caught.value.path) == ("corrupt", 1, str(path))


BAD_FILES = {
    "bad JSON": ([*GOOD[:2], '{"type":"session_info",', GOOD[3]], 3, "corrupt", "invalid JSON"),
    "blank line": ([*GOOD[:2], "", *GOOD[2:]], 3, "corrupt", "invalid JSON"),
    "not an object": ([*GOOD[:2], "[1, 2]"], 3, "corrupt", "object"),
    "missing id": ([*GOOD[:2], '{"type":"label","parent_id":"a","timestamp":"t"}'], 3, "corrupt", "'id'"),
    "missing parent": ([*GOOD[:2], '{"type":"label","id":"z","timestamp":"t"}'], 3, "corrupt", "parent_id"),
    "missing timestamp": ([*GOOD[:2], '{"type":"label","id":"z","parent_id":"a"}'], 3, "corrupt", "timestamp"),
    "unknown parent": ([*GOOD[:2], entry("z", "nowhere")], 3, "corrupt", "unknown parent"),
    "parent later in the file": ([HEADER, entry("a", "b"), entry("b", None)], 2, "corrupt", "unknown parent"),
    "duplicate id": ([*GOOD, entry("b", "c")], 5, "corrupt", "duplicate entry id 'b'"),
    "dangling leaf": ([*GOOD, entry("l", "c", "leaf", target_id="zz")], 5, "corrupt", "targets unknown"),
    "second header": ([*GOOD, HEADER], 5, "corrupt", "second session header"),
    "not a header": ([entry("a", None)], 1, "corrupt", "not a session header"),
    "header not JSON": (["{nope", *GOOD[1:]], 1, "corrupt", "not valid JSON"),
    "unsupported version": ([HEADER.replace('"version":3', '"version":9'), *GOOD[1:]], 1, "unsupported_version", "9"),
    "empty file": ([], 1, "corrupt", "empty"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_malformed_lines_raise_naming_file_and_line(tmp_path: Path, case: str) -> None:
    """Every other malformed line is a ``SessionError`` with its code, the file and the line."""
    lines, line_no, code, words = BAD_FILES[case]
    path = write(tmp_path / "s.jsonl", lines)
    with pytest.raises(SessionError) as caught:
        Session(JsonlSessionStorage.open(path))
    error = caught.value
    assert (error.code, error.path, error.line) == (code, str(path), line_no)
    assert words in error.message and f"{path}:{line_no}:" in str(error)


def test_a_bad_entry_body_is_corrupt_when_read(tmp_path: Path) -> None:
    """An entry whose body does not decode raises ``corrupt`` naming file and line when it is read."""
    bad = entry("z", "c", "message", message={"role": "user"})
    path = write(tmp_path / "s.jsonl", [*GOOD, bad])
    session = Session(JsonlSessionStorage.open(path))
    assert session.leaf_id == "z"
    with pytest.raises(SessionError) as caught:
        session.get_entry("z")
    assert (caught.value.code, caught.value.path, caught.value.line) == ("corrupt", str(path), 5)


def test_invalid_utf8_inside_a_line_is_corrupt_on_open(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 inside a string make that line ``corrupt`` (file and line named) on open."""
    path = write(tmp_path / "s.jsonl", GOOD)
    with open(path, "ab") as out:
        out.write(b'{"type":"session_info","id":"u","parent_id":"c","timestamp":"t","name":"\xff\xfe"}\n')
    with pytest.raises(SessionError) as caught:
        Session(JsonlSessionStorage.open(path))
    assert (caught.value.code, caught.value.path, caught.value.line) == ("corrupt", str(path), 5)
    salvaged = JsonlSessionStorage.open(path, salvage=True)
    assert [n for n, _ in salvaged.skipped] == [5]


def test_nothing_is_appended_to_a_corrupt_file(tmp_path: Path) -> None:
    """A file that does not load cannot be appended to through a session; its bytes stay as they were."""
    path = write(tmp_path / "s.jsonl", [*GOOD[:2], "garbage", GOOD[2]])
    before = path.read_bytes()
    with pytest.raises(SessionError):
        Session(JsonlSessionStorage.open(path)).append_session_info("x")
    assert path.read_bytes() == before


def test_salvage_skips_and_reports_every_bad_line(tmp_path: Path) -> None:
    """Salvage mode opens read-only, keeps every sound line and reports each skipped one with its reason."""
    lines = [
        HEADER,
        entry("a", None),
        "garbage",
        entry("b", "a"),
        entry("c", "gone"),
        entry("d", "b"),
        entry("b", "d"),
        entry("m", "d", "message", message={"role": "user"}),
        entry("e", "m"),
        entry("f", "d"),
    ]
    path = write(tmp_path / "s.jsonl", lines, tail='{"torn')
    storage = JsonlSessionStorage.open(path, salvage=True)
    assert storage.read_only
    reasons = dict(storage.skipped)
    assert sorted(reasons) == [3, 5, 7, 8, 9, 11]
    assert "invalid JSON" in reasons[3] and "unknown parent" in reasons[5] and "duplicate" in reasons[7]
    assert "torn" in reasons[11]
    session = Session(storage)
    assert [e.id for e in session.get_entries()] == ["a", "b", "d", "f"]
    assert [e.originator_version for e in session.get_entries()] == [2, 3, 4, 5]
    assert session.leaf_id == "f"
    with pytest.raises(SessionError) as caught:
        session.append_session_info("no")
    assert caught.value.code == "storage"
    assert path.read_text().endswith('{"torn')


def test_salvage_of_a_sound_file_skips_nothing(tmp_path: Path) -> None:
    """Salvaging a sound file reports nothing and gives the same session as a normal open."""
    path = write(tmp_path / "s.jsonl", GOOD)
    salvaged = Session(JsonlSessionStorage.open(path, salvage=True))
    assert salvaged.storage.skipped == []  # type: ignore[attr-defined]
    assert kit.snapshot(salvaged) == kit.snapshot(Session(JsonlSessionStorage.open(path)))


def test_salvage_still_needs_a_header(tmp_path: Path) -> None:
    """Without a readable header there is no session to salvage: ``corrupt`` at line 1."""
    path = write(tmp_path / "s.jsonl", ["junk", *GOOD[1:]])
    with pytest.raises(SessionError) as caught:
        JsonlSessionStorage.open(path, salvage=True)
    assert (caught.value.code, caught.value.line) == ("corrupt", 1)
