"""pi files of versions 1 and 2 are migrated in memory, deterministically; bad pi input is refused."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import sessiontree_pi as pi
import sessiontree_testkit as kit

from sessiontree import JsonlSessionStorage, Session, SessionError, UserMessage
from sessiontree.domain.ids import counter_ids, fixed_clock

SID = pi.SESSION_ID


def open_pi(path: Path) -> Session:
    return Session(JsonlSessionStorage.open(path), clock=fixed_clock(kit.T0), id_generator=counter_ids("st", 8))


# -- versions 1 and 2 ---------------------------------------------------------------------


def v1_file(path: Path) -> Path:
    return pi.write_lines(
        path,
        [
            pi.pi_header(None, branchedFrom="/old.jsonl"),
            {"type": "message", "timestamp": "2025-12-01T00:00:01.000Z", "message": pi.user_msg("one", 1)},
            {"type": "message", "timestamp": "2025-12-01T00:00:02.000Z", "message": pi.assistant_msg("two", 2)},
            {"type": "message", "timestamp": "2025-12-01T00:00:03.000Z", "message": pi.user_msg("three", 3)},
            {"type": "message", "timestamp": "2025-12-01T00:00:04.000Z", "message": pi.assistant_msg("four", 4)},
            {"type": "compaction", "timestamp": "2025-12-01T00:00:05.000Z", "summary": "S", "firstKeptEntryIndex": 3, "tokensBefore": 9},
            {"type": "message", "timestamp": "2025-12-01T00:00:06.000Z",
             "message": {"role": "hookMessage", "customType": "h", "content": "hook", "display": True, "timestamp": 6}},
        ],
    )


def test_version_1_is_migrated_in_memory_deterministically(tmp_path):
    """A v1 file opens as one chain with ids derived from (session id, line), the same every time."""
    path = v1_file(tmp_path / "v1.jsonl")
    before = path.read_bytes()
    first, second = Session(JsonlSessionStorage.open(path)), Session(JsonlSessionStorage.open(path))
    ids = [e.id for e in first.get_entries()]
    assert ids == [e.id for e in second.get_entries()]
    assert all(len(i) == 8 for i in ids) and len(set(ids)) == 6
    assert [e.parent_id for e in first.get_entries()] == [None, *ids[:-1]]
    compaction = first.get_entries()[4]
    assert compaction.first_kept_entry_id == ids[2]
    roles = [m.role for m in first.build_context().messages]
    assert roles == ["compaction_summary", "user", "assistant", "custom"]
    assert first.header.version == 1 and first.header.extra == {"branchedFrom": "/old.jsonl"}
    assert path.read_bytes() == before


def test_version_1_ids_depend_on_the_session_id(tmp_path):
    """Two v1 files that differ only in their session id get different entry ids."""
    a = Session(JsonlSessionStorage.open(v1_file(tmp_path / "a.jsonl")))
    other = tmp_path / "b.jsonl"
    other.write_bytes(v1_file(tmp_path / "tmp.jsonl").read_bytes().replace(SID.encode(), b"other-session"))
    b = Session(JsonlSessionStorage.open(other))
    assert {e.id for e in a.get_entries()}.isdisjoint({e.id for e in b.get_entries()})


def test_version_1_files_are_read_only(tmp_path):
    """Appending to a v1 file is refused (pi would give every entry a new id) and writes nothing."""
    path = v1_file(tmp_path / "v1.jsonl")
    before = path.read_bytes()
    session = Session(JsonlSessionStorage.open(path))
    with pytest.raises(SessionError) as caught:
        session.append_session_info("x")
    assert caught.value.code == "storage" and "version 1" in caught.value.message
    assert path.read_bytes() == before


def test_version_2_renames_hook_messages_and_accepts_appends(tmp_path):
    """A v2 file's hookMessage role reads as custom, and appends keep the file readable."""
    path = pi.write_lines(
        tmp_path / "v2.jsonl",
        [
            pi.pi_header(2),
            pi.pi_node("message", "a1", None, message=pi.user_msg("hi")),
            pi.pi_node("message", "a2", "a1", message={"role": "hookMessage", "customType": "h", "content": "x", "display": False, "timestamp": 3}),
        ],
    )
    session = open_pi(path)
    assert session.get_entry("a2").message.role == "custom"
    assert path.read_bytes().count(b"hookMessage") == 1
    session.append_message(UserMessage(content="more", timestamp=4))
    reopened = Session(JsonlSessionStorage.open(path))
    assert kit.snapshot(reopened) == kit.snapshot(session)


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "code", "line"),
    [
        ([b'{"hello":"world"}'], "corrupt", 1),
        ([b'{"kind":"header","version":4,"id":"x","createdAt":1,"cwd":"/"}'], "corrupt", 1),
        ([b"not json at all"], "corrupt", 1),
        ([orjson.dumps(pi.pi_header(7))], "unsupported_version", 1),
        ([orjson.dumps(pi.pi_header()), orjson.dumps(pi.pi_node("message", "a1", "nope", message=pi.user_msg("x")))], "corrupt", 2),
        (
            [orjson.dumps(pi.pi_header()), orjson.dumps(pi.pi_node("message", "a1", None, message=pi.user_msg("x"))),
             orjson.dumps(pi.pi_node("label", "a1", "a1", targetId="a1"))],
            "corrupt",
            3,
        ),
        ([orjson.dumps(pi.pi_header()), orjson.dumps({"type": "message", "id": "a1", "parent_id": None, "timestamp": "t"})], "corrupt", 2),
        ([orjson.dumps(pi.pi_header()), b'{"type":"message",'], "corrupt", 2),
    ],
    ids=["neither-dialect", "pi-v4-log", "not-json", "unknown-version", "missing-parent", "duplicate-id", "snake-case-entry", "bad-json-line"],
)
def test_bad_files_raise_session_errors_naming_file_and_line(tmp_path, lines, code, line):
    """Bad input is a SessionError with the file and line, and the file is not rewritten."""
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    before = path.read_bytes()
    with pytest.raises(SessionError) as caught:
        Session(JsonlSessionStorage.open(path))
    assert (caught.value.code, caught.value.path, caught.value.line) == (code, str(path), line)
    assert path.read_bytes() == before
