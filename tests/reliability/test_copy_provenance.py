"""Copying and forking never launder tampering (issue 15, item 2; docs/audit.md): a source
that fails verify is refused, a salvaged copy says what it skipped, a verified copy keeps the
source's lines and chain head byte for byte, and large integers stay exact across backends."""

from __future__ import annotations

from pathlib import Path

import pytest
import sessiontree_pg as pg
import sessiontree_testkit as kit

from sessiontree import JsonlSessionStorage, Session, SessionError, open_repo, verify

BIG = 1180591620717411303424  # 2**70: above what orjson reads or writes as an integer


def _file_repo(tmp_path: Path, entries: int = 6) -> tuple[object, str, Path]:
    repo = open_repo(tmp_path / "files")
    session = repo.create(cwd="/work")
    for n in range(entries):
        session.append_message(kit.user(f"message {n}"))
    session.append_custom_entry("numbers", {"big": BIG, "neg": -BIG, "small": 1})
    path = Path(session.storage.location)
    session.close()
    return repo, session.id, path


def _tamper(path: Path, line: int) -> None:
    """Change one character of a message on ``line`` (1-based), leaving valid JSON."""
    lines = path.read_bytes().split(b"\n")
    lines[line - 1] = lines[line - 1].replace(b"message ", b"massage ", 1)
    path.write_bytes(b"\n".join(lines))


def _targets(tmp_path: Path) -> dict[str, str]:
    out = {"jsonl": str(tmp_path / "copy"), "sqlite": f"sqlite:{tmp_path / 'copy.db'}", "memory": "memory:"}
    if pg.reachable():
        out["postgres"] = pg.url("copyprov_" + tmp_path.name.replace("-", "_")[-20:])
    return out


@pytest.mark.parametrize("target", ["jsonl", "sqlite", "memory", "postgres"])
def test_a_copy_of_a_tampered_log_is_refused(target: str, tmp_path: Path) -> None:
    """A source that fails verify at line 5 is not copied: before the fix the copy re-sealed
    it into a chain that verified."""
    urls = _targets(tmp_path)
    if target not in urls:
        pytest.skip("PostgreSQL is not reachable")
    files, sid, path = _file_repo(tmp_path)
    _tamper(path, 5)
    assert verify(path).first_bad_line == 5
    dest = open_repo(urls[target])
    with pytest.raises(SessionError) as caught:
        dest.copy_from(files, sid)
    assert caught.value.code == "corrupt" and "does not verify" in caught.value.message
    assert not dest.exists(sid)


def test_a_salvaged_copy_records_what_it_skipped_and_the_source_head(tmp_path: Path) -> None:
    """``salvage=True`` copies what can be read; the header names the source's head and the
    skipped lines, so the copy does not pass for the original."""
    files, sid, path = _file_repo(tmp_path)
    _tamper(path, 5)
    source_head = verify(path).head
    dest = open_repo(f"sqlite:{tmp_path / 'copy.db'}")
    copy = dest.copy_from(files, sid, salvage=True)
    record = copy.header.extra["source"]
    assert record["head"] == source_head and 5 in record["skipped"]
    assert verify(copy).ok


@pytest.mark.parametrize("target", ["jsonl", "sqlite", "memory", "postgres"])
def test_a_verified_copy_keeps_the_source_bytes_and_big_integers(target: str, tmp_path: Path) -> None:
    """JSONL -> backend -> JSONL is byte for byte the same file, with the same chain head, and
    integers above 64 bits read back exact on every backend."""
    urls = _targets(tmp_path)
    if target not in urls:
        pytest.skip("PostgreSQL is not reachable")
    files, sid, path = _file_repo(tmp_path)
    middle = open_repo(urls[target])
    copy = middle.copy_from(files, sid)
    data = copy.find_entries("custom")[0].data
    assert data == {"big": BIG, "neg": -BIG, "small": 1} and type(data["big"]) is int
    assert verify(copy).head == verify(path).head
    back = open_repo(tmp_path / "back")
    returned = back.copy_from(middle, sid)
    assert Path(returned.storage.location).read_bytes() == path.read_bytes()


def test_a_big_integer_appended_is_written_and_read_exactly(tmp_path: Path) -> None:
    """An app's custom data with a 70-bit integer is written as its digits and reads back as
    the same int (orjson alone would refuse it, and read it as a float)."""
    session = Session(JsonlSessionStorage.create(tmp_path / "s.jsonl", cwd="/t"))
    session.append_custom_entry("numbers", {"big": BIG})
    assert b'"big":1180591620717411303424' in (tmp_path / "s.jsonl").read_bytes()
    again = Session(JsonlSessionStorage.open(tmp_path / "s.jsonl"))
    assert again.find_entries("custom")[0].data["big"] == BIG


def test_forking_a_tampered_log_is_refused_and_a_fork_records_its_source(tmp_path: Path) -> None:
    """A fork re-seals what it copies, so a source that fails verify is refused; a fork of a
    good source records the source's head, which verify of the source can be held to."""
    files, sid, path = _file_repo(tmp_path)
    fork = files.fork(sid, position="at")
    record = fork.header.extra["source"]
    assert record["session_id"] == sid and record["head"] == verify(path).head
    _tamper(path, 4)
    with pytest.raises(SessionError) as caught:
        files.fork(sid, position="at")
    assert caught.value.code == "corrupt"
    salvaged = files.fork(sid, position="at", salvage=True)
    assert 4 in salvaged.header.extra["source"]["skipped"]
    assert verify(salvaged).ok
