"""The JSONL storage's file: creation, the line format, byte-exact rewriting, durability, prefix reads."""

from __future__ import annotations

import errno
import gc
import os
import stat
import weakref
from pathlib import Path
from typing import Any

import orjson
import pytest
import sessiontree_strategies as strat
import sessiontree_testkit as kit
from hypothesis import HealthCheck, given, settings

from sessiontree import JsonlSessionStorage, Session, SessionError
from sessiontree.audit import chain
from sessiontree.content import blobs
from sessiontree.domain import events as ev
from sessiontree.storage import jsonl_file
from sessiontree.wire.codec import native_codec


def new_file(tmp_path: Path, name: str = "s.jsonl", **kwargs: Any) -> JsonlSessionStorage:
    kwargs.setdefault("session_id", kit.SESSION_ID)
    kwargs.setdefault("timestamp", kit.T0_ISO)
    kwargs.setdefault("cwd", "/home/me/project")
    return JsonlSessionStorage.create(tmp_path / name, **kwargs)


def lines_of(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return data[:-1].split(b"\n")


def test_create_writes_the_header_line(tmp_path: Path) -> None:
    """A new file holds exactly the SPEC 2.2 header line, newline-terminated."""
    storage = new_file(tmp_path, metadata={"k": 1})
    assert storage.path == tmp_path / "s.jsonl" and storage.location == str(tmp_path / "s.jsonl")
    assert storage.header.originator_id == storage.session_id == kit.SESSION_ID
    assert storage.durability == "flush" and not storage.read_only and storage.warnings == []
    header = (
        b'{"type":"session","version":3,"id":"' + kit.SESSION_ID.encode() + b'","timestamp":"'
        + kit.T0_ISO.encode() + b'","cwd":"/home/me/project","parent_session":null,"metadata":{"k":1}}'
    )
    assert (tmp_path / "s.jsonl").read_bytes() == chain.seal(header, chain.GENESIS)[0] + b"\n"  # docs/audit.md


def test_create_makes_private_folders_and_file(tmp_path: Path) -> None:
    """Missing parent folders are created 0700 and the file 0600."""
    old = os.umask(0)
    try:
        storage = JsonlSessionStorage.create(tmp_path / "a" / "b" / "s.jsonl")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(storage.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "a" / "b").st_mode) == 0o700


def test_create_refuses_an_existing_file(tmp_path: Path) -> None:
    """Creating over an existing file is ``already_exists`` and leaves the file alone."""
    (tmp_path / "s.jsonl").write_bytes(b"precious\n")
    with pytest.raises(SessionError) as caught:
        new_file(tmp_path)
    assert caught.value.code == "already_exists" and caught.value.path == str(tmp_path / "s.jsonl")
    assert (tmp_path / "s.jsonl").read_bytes() == b"precious\n"


def test_bad_arguments_create_no_file(tmp_path: Path) -> None:
    """A header that cannot be written or a bad durability refuses before any file exists."""
    with pytest.raises(SessionError):
        new_file(tmp_path, metadata={"x": object()})
    with pytest.raises(ValueError):
        new_file(tmp_path, durability="sometimes")
    assert not (tmp_path / "s.jsonl").exists()


def test_open_a_missing_file_is_not_found(tmp_path: Path) -> None:
    """Opening a path with no file is ``not_found`` naming the path."""
    with pytest.raises(SessionError) as caught:
        JsonlSessionStorage.open(tmp_path / "nothing.jsonl")
    assert caught.value.code == "not_found" and "nothing.jsonl" in str(caught.value)


def test_each_entry_is_one_line_and_the_header_comes_first(tmp_path: Path) -> None:
    """Every append adds one JSON line per entry after the header, in order."""
    session = kit.open_session(new_file(tmp_path))
    first = session.append_message(kit.user("hi"))
    session.move_to(first, {"summary": "s"})
    lines = lines_of(session.storage.path)  # type: ignore[attr-defined]
    objects = [orjson.loads(chain.strip(line)) for line in lines]  # without the chain field (docs/audit.md)
    assert [o["type"] for o in objects] == ["session", "message", "leaf", "branch_summary"]
    assert objects[1] == {
        "type": "message", "id": first, "parent_id": None, "timestamp": "2026-11-29T11:30:01.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 0},
    }


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=strat.operations(max_size=20))
def test_rewriting_a_file_gives_the_same_bytes(tmp_path_factory: Any, ops: list[Any]) -> None:
    """Decoding every line and encoding it again, or saving the events to a new file, gives the same bytes."""
    place = tmp_path_factory.mktemp("rw")
    session = kit.open_session(new_file(place))
    for op in ops:
        strat.apply_operation(session, op)
    original = session.storage.path.read_bytes()  # type: ignore[attr-defined]
    codec = native_codec()
    lines = [chain.strip(line) for line in original[:-1].split(b"\n")]  # the chain field is the storage's
    store = session.storage.blobs  # content kept out of line is read back before decoding, and put out after encoding
    again = [blobs.outline(codec.encode_event(codec.decode_line(blobs.inline(line, store), kit.SESSION_ID, n + 1)), store)
             for n, line in enumerate(lines)]
    assert again == lines
    reopened = Session(JsonlSessionStorage.open(place / "s.jsonl"))
    copy = JsonlSessionStorage.create(place / "copy.jsonl", session_id=kit.SESSION_ID, timestamp=kit.T0_ISO, cwd="/home/me/project")
    copy.save(reopened.get_entries())
    assert (place / "copy.jsonl").read_bytes() == original


def test_foreign_lines_survive_appends_byte_for_byte(tmp_path: Path) -> None:
    """Lines with unknown types and fields (and another key order) are kept exactly as written
    (in an unchained file: a chained one is never extended after unchained lines)."""
    storage = new_file(tmp_path)
    header = lines_of(storage.path)[0]
    storage.path.write_bytes(header[: header.rindex(b',"chain"')] + b"}\n")
    foreign = [
        b'{"type":"future_thing","id":"f1","parent_id":null,"timestamp":"2026-01-01T00:00:00Z","x":{"y":[1,2.50,null]}}',
        b'{"id":"f2","type":"message","timestamp":"2026-01-01T00:00:01Z","parent_id":"f1","message":{"role":"user","content":"plain","timestamp":1,"xNew":true},"xTop":"kept"}',
    ]
    with open(storage.path, "ab") as out:
        out.write(b"\n".join(foreign) + b"\n")
    session = Session(JsonlSessionStorage.open(storage.path))
    assert session.leaf_id == "f2" and session.get_entry("f2").message.content == "plain"
    session.append_message(kit.user("mine"))
    assert lines_of(storage.path)[1:3] == foreign
    assert Session(JsonlSessionStorage.open(storage.path)).get_entry("f1").data["x"] == {"y": [1, 2.5, None]}


def test_a_last_line_without_newline_is_kept_and_completed(tmp_path: Path) -> None:
    """A whole last line lacking its newline counts as an entry; the next append adds the newline."""
    session = kit.open_session(new_file(tmp_path))
    first = session.append_message(kit.user("one"))
    path = session.storage.path  # type: ignore[attr-defined]
    session.close()
    path.write_bytes(path.read_bytes()[:-1])
    again = Session(JsonlSessionStorage.open(path))
    assert again.leaf_id == first and again.storage.warnings == []
    again.append_message(kit.user("two"))
    assert [orjson.loads(x)["type"] for x in lines_of(path)] == ["session", "message", "message"]


def test_save_refuses_a_version_gap(tmp_path: Path) -> None:
    """Saving an event whose version is not the next one is a ``conflict`` and appends nothing."""
    storage = new_file(tmp_path)
    before = storage.path.read_bytes()
    event = ev.SessionRenamed(
        originator_id=kit.SESSION_ID, originator_version=5, timestamp=kit.T0_ISO, id="abcdef01", parent_id=None, name="x"
    )
    with pytest.raises(SessionError) as caught:
        storage.save([event])
    assert caught.value.code == "conflict" and "not the next one" in caught.value.message
    assert storage.path.read_bytes() == before


def _record_writes(monkeypatch: pytest.MonkeyPatch) -> tuple[list[bytes], list[bool]]:
    """What each append writes, and whether it asked for an fsync."""
    writes: list[bytes] = []
    syncs: list[bool] = []
    real_write = os.write
    monkeypatch.setattr(jsonl_file.os, "write", lambda fd, data: writes.append(bytes(data)) or real_write(fd, data))
    monkeypatch.setattr(jsonl_file.os, "fsync", lambda fd: syncs.append(True))
    return writes, syncs


def test_each_append_is_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An append, even of two entries at once, is a single write of whole lines."""
    session = kit.open_session(new_file(tmp_path))
    root = session.append_message(kit.user("root"))
    writes, _ = _record_writes(monkeypatch)
    session.append_message(kit.user("child"))
    session.move_to(root, {"summary": "back"})
    assert len(writes) == 2
    assert writes[1].count(b"\n") == 2 and writes[1].endswith(b"\n")
    assert [orjson.loads(x)["type"] for x in writes[1][:-1].split(b"\n")] == ["leaf", "branch_summary"]
    assert b"".join(writes) == (tmp_path / "s.jsonl").read_bytes()[-sum(map(len, writes)) :]


@pytest.mark.parametrize(("durability", "syncs"), [("flush", 0), ("fsync", 3)])
def test_durability_fsyncs_each_append_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str, syncs: int
) -> None:
    """``durability="fsync"`` fsyncs once per append; the default never does."""
    session = kit.open_session(new_file(tmp_path, durability=durability))
    session.append_message(kit.user("first"))
    _, calls = _record_writes(monkeypatch)
    for text in ("a", "b", "c"):
        session.append_message(kit.user(text))
    assert len(calls) == syncs
    reopened = JsonlSessionStorage.open(tmp_path / "s.jsonl", durability=durability)
    assert reopened.durability == durability


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO, errno.EACCES])
def test_a_failed_write_is_a_storage_error_and_leaves_the_file_valid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """A disk error half-way through an append is ``storage``; the file is cut back and still opens."""
    session = kit.open_session(new_file(tmp_path))
    session.append_message(kit.user("kept"))
    before = session.storage.path.read_bytes()  # type: ignore[attr-defined]
    real_write = os.write

    def half_then_fail(fd: int, data: bytes) -> int:
        if len(data) > 1:
            real_write(fd, data[: len(data) // 2])
            monkeypatch.setattr(jsonl_file.os, "write", fail)
            return len(data) // 2
        return fail(fd, data)

    def fail(fd: int, data: bytes) -> int:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(jsonl_file.os, "write", half_then_fail)
    with pytest.raises(SessionError) as caught:
        session.append_message(kit.user("lost"))
    assert caught.value.code == "storage" and str(tmp_path) in str(caught.value)
    assert session.storage.path.read_bytes() == before  # type: ignore[attr-defined]
    assert len(session.get_entries()) == 1
    monkeypatch.setattr(jsonl_file.os, "write", real_write)
    session.append_message(kit.user("later"))
    assert [e.message.content[0].text for e in Session(JsonlSessionStorage.open(tmp_path / "s.jsonl")).get_entries()] == [
        "kept",
        "later",
    ]


def test_an_unwritable_file_opens_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that cannot be opened for writing opens read-only; appending is a ``storage`` error."""
    kit.open_session(new_file(tmp_path)).append_message(kit.user("x"))
    real_open = os.open

    def no_write(path: Any, flags: int, *args: Any) -> int:
        if flags & (os.O_RDWR | os.O_WRONLY):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(jsonl_file.os, "open", no_write)
    storage = JsonlSessionStorage.open(tmp_path / "s.jsonl")
    assert storage.read_only
    session = Session(storage)
    with pytest.raises(SessionError) as caught:
        session.append_message(kit.user("y"))
    assert caught.value.code == "storage" and len(session.get_entries()) == 1


def test_time_travel_reads_only_the_prefix(tmp_path: Path) -> None:
    """``load_prefix`` reads about the bytes it needs, and never looks at later lines."""
    session = kit.open_session(new_file(tmp_path))
    for n in range(1000):
        session.append_message(kit.user(f"message {n} " + "x" * 1000))
    path = session.storage.path  # type: ignore[attr-defined]
    with open(path, "ab") as out:
        out.write(b"this line is not JSON\n")
    reader = JsonlSessionStorage.open(path)
    _, entries = reader.load_prefix(11)
    assert [e.id for e in entries] == [e.id for e in session.get_entries()[:10]]
    assert reader.bytes_read < path.stat().st_size // 20
    with pytest.raises(SessionError):
        reader.load()


def test_open_reads_only_the_header(tmp_path: Path) -> None:
    """Opening a storage reads the header line, not the whole file."""
    session = kit.open_session(new_file(tmp_path))
    for _ in range(300):
        session.append_message(kit.user("y" * 1000))
    reader = JsonlSessionStorage.open(session.storage.path)  # type: ignore[attr-defined]
    assert reader.bytes_read <= 8192 < session.storage.path.stat().st_size  # type: ignore[attr-defined]


def test_appended_entries_are_held_as_their_lines(tmp_path: Path) -> None:
    """An appended entry is not kept as objects: the session holds its line and decodes it
    again when asked, to an equal entry (a long session costs its bytes, not its objects)."""
    session = kit.open_session(new_file(tmp_path))
    message = kit.assistant("held as a line", usage=kit.usage(10, 5, 0.01))
    alive = weakref.ref(message)
    entry_id = session.append_message(message)
    del message
    gc.collect()
    assert alive() is None
    assert session.get_entry(entry_id).message == kit.assistant("held as a line", usage=kit.usage(10, 5, 0.01))
