"""FIFOs, devices and symlinks in a repository, and over-long lines in the listing index
(issue 15, items 3 and 7; docs/reliability.md): nothing hangs, nothing reads without bound,
and nothing outside the repository is listed, opened or written through a link."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sessiontree_testkit as kit

from sessiontree import JsonlSessionStorage, SessionError, open_repo, verify
from sessiontree.storage import files, jsonl_repo
from sessiontree.storage import index as index_module
from sessiontree.wire import jsontext

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and symlinks")
SCRIPT = str(Path(sys.executable).parent / "sessiontree")


def within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()``'s result, or a test failure if it has not returned after ``seconds``."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still running after {seconds} s (it hangs)")
    if "error" in out:
        raise out["error"]
    return out["value"]


def _repo_with(tmp_path: Path, special: Callable[[Path], None]) -> tuple[Path, str]:
    root = tmp_path / "repo"
    repo = open_repo(root)
    session = repo.create(cwd="/w")
    session.append_message(kit.user("hello"))
    special(root)
    return root, session.id


def _fifo(root: Path) -> None:
    os.mkfifo(root / "f.jsonl")


def _zero(root: Path) -> None:
    os.symlink("/dev/zero", root / "z.jsonl")


@pytest.mark.parametrize("special", [_fifo, _zero], ids=["fifo", "dev-zero-link"])
def test_a_fifo_or_device_in_a_repository_neither_hangs_nor_is_read(special: Any, tmp_path: Path) -> None:
    """list(), open of an unknown id and verify come back at once; the special file is not
    listed, and opening or verifying it is one clear ``storage`` error."""
    root, sid = _repo_with(tmp_path, special)
    repo = open_repo(root)
    assert [i.id for i in within(10, repo.list)] == [sid]
    with pytest.raises(SessionError) as missing:
        within(10, lambda: repo.open("nosuch"))
    assert missing.value.code == "not_found"
    name = "f.jsonl" if special is _fifo else "z.jsonl"
    for call in (lambda: verify(root / name), lambda: JsonlSessionStorage.open(root / name)):
        with pytest.raises(SessionError) as caught:
            within(10, call)
        assert caught.value.code == "storage" and "not a regular file" in caught.value.message


@pytest.mark.parametrize("special", [_fifo, _zero], ids=["fifo", "dev-zero-link"])
def test_the_command_line_lists_and_verifies_past_special_files(special: Any, tmp_path: Path) -> None:
    """``sessiontree ls`` lists the real session; ``verify`` of the special file is one error
    line, never a hang or a MemoryError."""
    root, sid = _repo_with(tmp_path, special)
    listed = subprocess.run([SCRIPT, "ls", "--repo", str(root), "--json"], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and sid in listed.stdout
    name = "f.jsonl" if special is _fifo else "z.jsonl"
    checked = subprocess.run([SCRIPT, "verify", str(root / name)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 1 and "not a regular file" in checked.stderr
    assert "MemoryError" not in checked.stderr and "Traceback" not in checked.stderr


def test_the_listing_index_never_parses_a_line_over_the_limit(tmp_path: Path, monkeypatch: Any) -> None:
    """A session file with a line over the line limit is still listed, from its other lines;
    the over-long line is skipped without being parsed or held whole."""
    monkeypatch.setattr(jsontext, "MAX_LINE_BYTES", 1 << 20)
    root, sid = _repo_with(tmp_path, lambda root: None)
    path = root / f"{sid}.jsonl"
    with open(path, "ab") as out:
        out.write(b'{"type":"custom","id":"big1","parent_id":null,"timestamp":"2026-01-01T00:00:00.000Z","data":"')
        out.write(b"x" * (3 << 20) + b'"}\n')
    parsed: list[int] = []

    class Counting:  # the listing's typed views, each decode counted
        def __init__(self, real: Any) -> None:
            self.real = real

        def decode(self, line: bytes) -> Any:
            parsed.append(len(line))
            return self.real.decode(line)

    for name in ("LISTED", "HEADER", "LINE"):
        monkeypatch.setattr(index_module, name, Counting(getattr(index_module, name)))
    (info,) = open_repo(root).list()
    assert info.id == sid and info.message_count == 1
    assert parsed and max(parsed) <= 1 << 20


def test_read_lines_holds_no_over_long_line(tmp_path: Path) -> None:
    """``read_lines`` gives an over-long line as None and the offsets of every whole line."""
    path = tmp_path / "f"
    path.write_bytes(b"ab\n" + b"x" * 5000 + b"\ncd\ntorn")
    fd = os.open(path, os.O_RDONLY)
    try:
        got = list(files.read_lines(fd, 0, 100, chunk=64))
    finally:
        os.close(fd)
    assert got == [(b"ab", 3), (None, 5004), (b"cd", 5007)]


# -- symlinks (item 7) ---------------------------------------------------------------------------


def _outside_session(tmp_path: Path) -> tuple[Path, str]:
    outside = tmp_path / "outside"
    session = open_repo(outside).create(cwd="/elsewhere")
    session.append_message(kit.user("not yours"))
    return Path(session.storage.location), session.id


def test_a_symlinked_session_file_is_neither_listed_opened_nor_written(tmp_path: Path) -> None:
    """A link in the repository to a session file outside it: list() leaves it out, open and
    delete refuse it with a clear error, and the file outside is never written (before the
    fix list showed it, appends went to the outside file and delete removed only the link)."""
    target, sid = _outside_session(tmp_path)
    before = target.read_bytes()
    root, own = _repo_with(tmp_path, lambda root: (root / f"{sid}.jsonl").symlink_to(target))
    (root / "renamed.jsonl").symlink_to(target)
    repo = open_repo(root)
    assert [i.id for i in repo.list()] == [own]
    for call in (lambda: repo.open(sid), lambda: repo.delete(sid)):
        with pytest.raises(SessionError) as caught:
            call()
        assert caught.value.code == "storage" and "symbolic link" in caught.value.message
    assert (root / f"{sid}.jsonl").is_symlink() and target.read_bytes() == before
    with pytest.raises(SessionError) as caught:
        JsonlSessionStorage.open(root / f"{sid}.jsonl", follow_links=False)
    assert "symbolic link" in caught.value.message


def test_files_we_create_are_never_written_through_a_planted_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The listing index's temporary file and a checkpoint sidecar: a link planted at their
    names is not followed (O_NOFOLLOW / O_EXCL), so the file it points to stays as it was."""
    from sessiontree.audit.checkpoints import save_checkpoint, sign_checkpoint

    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    root, sid = _repo_with(tmp_path, lambda root: None)
    index = root / jsonl_repo.INDEX_FILE
    index.unlink(missing_ok=True)
    monkeypatch.setattr(os, "urandom", lambda n: b"\0" * n)  # the temporary name's random part, guessed
    (root / f"{jsonl_repo.INDEX_FILE}.{os.getpid()}.00000000.tmp").symlink_to(victim)
    open_repo(root).list()
    path = root / f"{sid}.jsonl"
    Path(str(path) + ".checkpoints").symlink_to(victim)
    with pytest.raises(SessionError):
        save_checkpoint(path, sign_checkpoint(path, b"k" * 32))
    assert victim.read_bytes() == b"precious\n"
