"""Secure defaults: private files, checked session ids, no code named by data, bounded JSON."""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sessiontree_testkit as kit

from sessiontree import JsonlSessionRepo, JsonlSessionStorage, Session, SessionError, open_repo, verify
from sessiontree.audit.checkpoints import save_checkpoint, sign_checkpoint
from sessiontree.pi.pi_convert import export_pi, import_pi
from sessiontree.wire import jsontext as codec_module

BAD_IDS = ["../escape", "a/b", "", ".hidden", "x\x00y", "a" * 201, "..", "/etc/passwd", "C:\\x", "a b", "id\n"]


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The most permissive umask, so only the library's own modes can keep files private."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def canary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An importable module that leaves a mark when imported; returns where the mark appears."""
    folder = tmp_path / "canary"
    folder.mkdir()
    mark = tmp_path / "IMPORTED"
    (folder / "st_canary_module.py").write_text(
        f"open({str(mark)!r}, 'w').write('imported')\ndef f():\n    return 'x'\nclass Thing:\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop("st_canary_module", None)
    return mark


# -- private files ----------------------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o000, 0o022])
@pytest.mark.parametrize("command", ["demo", "import"])
def test_folders_the_command_line_creates_are_private(tmp_path: Path, umask: int, command: str) -> None:
    """``demo --repo X`` and ``import --repo X`` make X (and every missing parent) 0700 under
    any umask; before the fix the CLI used a plain makedirs (0755 under 022, 0777 under 000)."""
    import subprocess

    script = str(Path(sys.executable).parent / "sessiontree")
    source = tmp_path / "pi.jsonl"
    export_pi(_native_file(tmp_path), source)
    target = tmp_path / "made" / "for" / "me"
    args = [script, command, "--repo", str(target)] + ([str(source)] if command == "import" else [])
    old = os.umask(umask)
    try:
        proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    finally:
        os.umask(old)
    assert proc.returncode == 0, proc.stderr
    for folder in (tmp_path / "made", tmp_path / "made" / "for", target):
        assert mode(folder) == 0o700, (folder, oct(mode(folder)))


def _native_file(tmp_path: Path) -> Path:
    path = tmp_path / "native.jsonl"
    session = Session(JsonlSessionStorage.create(path, cwd="/p"))
    session.append_message(kit.user("hello"))
    session.close()
    return path


def test_jsonl_repositories_make_private_folders_files_and_index(tmp_path: Path, open_umask: None) -> None:
    """Folders 0700, session files and the listing index 0600, whatever the umask."""
    repo = JsonlSessionRepo(tmp_path / "a" / "b")
    session = repo.create(cwd="/p")
    session.append_message(kit.user("secret question"))
    repo.list()
    assert mode(tmp_path / "a") == 0o700 and mode(tmp_path / "a" / "b") == 0o700
    assert mode(session.storage.path) == 0o600  # type: ignore[attr-defined]
    assert mode(tmp_path / "a" / "b" / ".sessiontree-index.json") == 0o600


def test_sqlite_databases_and_their_wal_files_are_private(tmp_path: Path, open_umask: None) -> None:
    """A new SQLite file (and the -wal/-shm files SQLite makes beside it) is 0600 in 0700 folders."""
    repo = open_repo(f"sqlite:///{tmp_path / 'new' / 'sessions.db'}")
    repo.create(cwd="/p").append_message(kit.user("secret"))
    files = sorted((tmp_path / "new").iterdir())
    assert files and files[0].name == "sessions.db"
    assert mode(tmp_path / "new") == 0o700 and all(mode(f) == 0o600 for f in files), [(f, oct(mode(f))) for f in files]
    repo.close()


def test_exports_and_checkpoint_files_are_private(tmp_path: Path, open_umask: None) -> None:
    """Conversions to pi or native files and checkpoint sidecars are written 0600."""
    path = tmp_path / "s.jsonl"
    kit.open_session(JsonlSessionStorage.create(path)).append_message(kit.user("hi"))
    export_pi(path, tmp_path / "pi.jsonl")
    import_pi(tmp_path / "pi.jsonl", tmp_path / "back.jsonl")
    where = save_checkpoint(path, sign_checkpoint(path, b"k" * 32))
    assert [mode(p) for p in (tmp_path / "pi.jsonl", tmp_path / "back.jsonl", where)] == [0o600] * 3
    assert verify(tmp_path / "back.jsonl").chained  # a new native file is chained too


# -- session ids ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
@pytest.mark.parametrize("kind", ["jsonl", "memory", "sqlite"])
def test_ids_that_could_leave_a_folder_or_a_key_are_refused(tmp_path: Path, kind: str, bad: str) -> None:
    """create, open, delete and fork refuse such ids with ``invalid_entry``; nothing is written."""
    url = {"jsonl": str(tmp_path / "repo"), "memory": "memory:", "sqlite": f"sqlite:///{tmp_path / 's.db'}"}[kind]
    repo = open_repo(url)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for call in (lambda: repo.create(session_id=bad), lambda: repo.open(bad), lambda: repo.delete(bad), lambda: repo.fork(bad)):
        with pytest.raises(SessionError) as caught:
            call()
        assert caught.value.code == "invalid_entry" and "invalid session id" in caught.value.message
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    repo.close()


def test_a_header_id_read_from_a_file_cannot_reach_a_path_or_a_row(tmp_path: Path) -> None:
    """Copying a session whose header names an unsafe id is refused by file and database repos."""
    source = tmp_path / "src"
    source.mkdir()
    evil = source / "evil.jsonl"
    kit.open_session(JsonlSessionStorage.create(evil, session_id="../../outside"))
    storage = JsonlSessionStorage.open(evil)
    header, entries = storage.load()
    for target in (JsonlSessionRepo(tmp_path / "dest"), open_repo(f"sqlite:///{tmp_path / 'd.db'}")):
        with pytest.raises(SessionError) as caught:
            target._write_session(header, list(entries))
        assert caught.value.code == "invalid_entry"
        target.close()
    assert not (tmp_path / "outside.jsonl").exists()


# -- no code named by data ----------------------------------------------------------------------


def test_stored_topics_are_never_imported(tmp_path: Path, canary: Path) -> None:
    """A database row whose topic names a module is decoded from its JSON, never resolved."""
    repo = open_repo(f"sqlite:///{tmp_path / 's.db'}")
    session = repo.create(cwd="/p")
    session.append_message(kit.user("hello"))
    sid = session.id
    repo.close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        db.execute("UPDATE stored_events SET topic = 'st_canary_module:Thing' WHERE originator_id = ?", (sid,))
        db.execute(
            "INSERT INTO stored_events (originator_id, originator_version, topic, state) VALUES (?, ?, ?, ?)",
            ("other-app", 1, "st_canary_module:Thing", b'{"not":"a session line"}'),
        )
    repo = open_repo(f"sqlite:///{tmp_path / 's.db'}")
    assert [i.id for i in repo.list()] == [sid]
    again = repo.open(sid)
    assert again.get_entries()[0].message.content[0].text == "hello"  # type: ignore[attr-defined]
    assert verify(again).ok
    with pytest.raises(SessionError) as caught:
        repo.open("other-app").get_entries()
    assert caught.value.code == "corrupt"
    repo.close()
    assert not canary.exists() and "st_canary_module" not in sys.modules


def test_a_url_cannot_name_code_to_import(tmp_path: Path, canary: Path) -> None:
    """eventsourcing imports what a *_TOPIC setting names, so URLs may not carry one."""
    for url in (
        "postgresql://u@127.0.0.1:1/db?get_password_topic=st_canary_module:f",
        "postgresql://u@127.0.0.1:1/db?POSTGRES_GET_PASSWORD_TOPIC=st_canary_module:f",
        "postgresql://u@127.0.0.1:1/db?application_recorder_topic=st_canary_module:Thing",
    ):
        with pytest.raises(SessionError) as caught:
            open_repo(url)
        assert caught.value.code == "storage" and "names code to import" in caught.value.message
    assert not canary.exists()


def test_unknown_types_roles_and_blocks_become_data_not_classes(tmp_path: Path, canary: Path) -> None:
    """Type, role and block names that look like import paths are kept as data."""
    path = tmp_path / "s.jsonl"
    kit.open_session(JsonlSessionStorage.create(path))
    with open(path, "ab") as handle:
        handle.write(
            b'{"type":"st_canary_module:Thing","id":"a1","parent_id":null,"timestamp":"2026-01-01T00:00:00.000Z"}\n'
            b'{"type":"message","id":"a2","parent_id":"a1","timestamp":"2026-01-01T00:00:00.000Z","message":'
            b'{"role":"st_canary_module:Thing","content":[{"type":"st_canary_module:f"}]}}\n'
        )
    entries = Session(JsonlSessionStorage.open(path)).get_entries()
    assert entries[0].type == "st_canary_module:Thing" and entries[1].message.role == "st_canary_module:Thing"  # type: ignore[attr-defined]
    assert not canary.exists()


# -- bounded parsing ----------------------------------------------------------------------------


def test_absurd_nesting_is_corrupt_with_its_line(tmp_path: Path) -> None:
    """A line nested thousands deep is refused by the parser's depth limit, naming the line."""
    path = tmp_path / "s.jsonl"
    kit.open_session(JsonlSessionStorage.create(path))
    with open(path, "ab") as handle:
        handle.write(
            b'{"type":"custom","id":"d1","parent_id":null,"timestamp":"2026-01-01T00:00:00.000Z","custom_type":"x","data":'
            + b"[" * 5000 + b"]" * 5000 + b"}\n"
        )
    with pytest.raises(SessionError) as caught:
        Session(JsonlSessionStorage.open(path))
    assert caught.value.code == "corrupt" and caught.value.line == 2 and "depth" in caught.value.message
    assert verify(path).first_bad_line == 2


def test_enormous_lines_are_refused_before_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines over the size limit (64 MiB; lowered here) are corrupt, named, and skipped by salvage."""
    monkeypatch.setattr(codec_module, "MAX_LINE_BYTES", 4096)
    path = tmp_path / "s.jsonl"
    session = kit.open_session(JsonlSessionStorage.create(path))
    session.append_message(kit.user("small"))
    with open(path, "ab") as handle:
        handle.write(
            b'{"type":"custom","id":"big1","parent_id":null,"timestamp":"2026-01-01T00:00:00.000Z","custom_type":"x","data":"'
            + b"x" * 10_000 + b'"}\n'
        )
    with pytest.raises(SessionError) as caught:
        Session(JsonlSessionStorage.open(path))
    assert caught.value.code == "corrupt" and caught.value.line == 3 and "line limit" in caught.value.message
    salvaged = JsonlSessionStorage.open(path, salvage=True)
    assert [n for n, _ in salvaged.skipped] == [3] and len(salvaged.load()[1]) == 1
    assert verify(path).first_bad_line == 3


def test_a_header_without_end_is_read_only_up_to_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that is one enormous line is refused after reading about the limit, not all of it."""
    monkeypatch.setattr(codec_module, "MAX_LINE_BYTES", 4096)
    path = tmp_path / "huge.jsonl"
    path.write_bytes(b'{"type":"session","x":"' + b"x" * 2_000_000)
    with pytest.raises(SessionError) as caught:
        JsonlSessionStorage.open(path)
    assert caught.value.code == "corrupt" and caught.value.line == 1 and "line limit" in caught.value.message
