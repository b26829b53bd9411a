"""After an erasure no file holds the erased bytes: not the log, nor a leftover of a rewrite or a blob write that a
crash interrupted, nor the listing index, the search index (its FTS5 segments and WAL) or the SQLite database and its
WAL. Crashes are made by a child process that kills itself (SIGKILL) at a chosen step (issue 32, item 2;
docs/audit.md, *What is left on the disk*)."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sessiontree_cli_runner import run

from sessiontree import UserMessage, open_repo, verify

SECRET = "zebracorn4711"  # a word of its own, so the search index keeps it as a term
SECRET_LONG = "quokkalantern9021"  # in a message long enough to be kept out of line (a blob)
THRESHOLD = 256


def _holders(needle: str, *roots: Path) -> list[str]:
    """Every file under ``roots`` (hidden ones, -wal/-shm, temporary files included) whose bytes hold ``needle``."""
    found = []
    for root in roots:
        for folder, _dirs, files in os.walk(root):
            for name in files:
                path = os.path.join(folder, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                with open(path, "rb") as handle:
                    if needle.encode() in handle.read():
                        found.append(os.path.relpath(path, root))
    return sorted(found)


def _terms(database: Path, *words: str) -> list[str]:
    """Which of ``words`` the FTS5 search index in ``database`` still holds as terms (its segments may store a term
    prefix-compressed, which a byte search would miss)."""
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, search_fts, 'row')")
        found = [row[0] for row in conn.execute(f"SELECT term FROM temp.vocab WHERE term IN ({','.join('?' * len(words))})",
                                                words)]
    return sorted(found)


def _cache() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"])


def _fill(url: str) -> tuple[str, str, str, str]:
    """A session whose first message holds SECRET and whose second, kept out of line, SECRET_LONG; listed and searched
    before anything is erased (so the listing and search indexes hold both). (session, first, second, third ids)"""
    with open_repo(url, blob_threshold=THRESHOLD) as repo:
        session = repo.create(cwd="/w")
        first = session.append_message(UserMessage(content=f"the launch word is {SECRET}", timestamp=0))
        second = session.append_message(UserMessage(content=f"notes {SECRET_LONG} " + "padding " * 80, timestamp=0))
        third = session.append_message(UserMessage(content="nothing secret here", timestamp=0))
        assert repo.list()[0].first_message is not None
        assert {h.entry_id for h in repo.search(SECRET)} == {first}
        assert {h.entry_id for h in repo.search(SECRET_LONG)} == {second}
        sid = session.id
        session.close()
    return sid, first, second, third


URLS = {"jsonl": "{tmp}/r", "sqlite": "sqlite:///{tmp}/db/s.db"}


@pytest.mark.parametrize("kind", URLS)
def test_an_erasure_leaves_no_copy_on_the_disk(kind: str, tmp_path: Path) -> None:
    """Erasing two entries (one with a blob) after they were listed and searched: no file under the repository or
    the cache directory holds their words; search finds nothing and verify passes."""
    url = URLS[kind].format(tmp=tmp_path)
    sid, first, second, _ = _fill(url)
    assert _holders(SECRET, tmp_path) and _holders(SECRET_LONG, tmp_path)
    index = tmp_path / "r" / ".sessiontree-search.sqlite" if kind == "jsonl" else tmp_path / "db" / "s.db"
    assert _terms(index, SECRET, SECRET_LONG) == sorted([SECRET, SECRET_LONG])
    with open_repo(url) as repo:
        session = repo.open(sid)
        session.redact(first, reason="a secret")
        session.redact(second, reason="a secret")
        assert repo.search(SECRET) == [] and repo.search(SECRET_LONG) == []
        assert verify(session).ok
        session.close()
    assert _holders(SECRET, tmp_path, _cache()) == []
    assert _holders(SECRET_LONG, tmp_path, _cache()) == []
    assert _terms(index, SECRET, SECRET_LONG) == []


_CHILD = """
import os, signal, sys
from sessiontree import UserMessage, open_repo
url, sid, entry, step = sys.argv[1:5]
THRESHOLD = int(sys.argv[5])
real_replace, real_unlink, real_open = os.replace, os.unlink, os.open

def die(): os.kill(os.getpid(), signal.SIGKILL)

def replace(src, dst, *a, **k):
    if step == "rewrite-renamed" and str(src).endswith(".rewrite"): die()
    # a blob's files are named relative to their folder's descriptor (blob_stores.py), so named by that here
    if step == "blob-renamed" and str(src).endswith(".tmp") and ("/.blobs/" in str(src) or "src_dir_fd" in k): die()
    return real_replace(src, dst, *a, **k)

def unlink(path, *a, **k):
    if step == "blob-deleted" and ("/.blobs/sha256/" in str(path) or ("dir_fd" in k and len(str(path)) == 62)): die()
    return real_unlink(path, *a, **k)

def opener(path, flags, *a, **k):
    if step == "record-written" and str(path).endswith(".rewrite"): die()
    return real_open(path, flags, *a, **k)

os.replace, os.unlink, os.open = replace, unlink, opener
with open_repo(url, blob_threshold=THRESHOLD) as repo:
    session = repo.open(sid)
    if step == "blob-renamed":
        session.append_message(UserMessage(content="unacknowledged NEEDLE " + "padding " * 80, timestamp=0))
    else:
        session.redact(entry, reason="a secret")
"""


def _crash(url: str, sid: str, entry: str, step: str, needle: str) -> None:
    code = textwrap.dedent(_CHILD).replace("NEEDLE", needle)
    child = subprocess.run([sys.executable, "-c", code, url, sid, entry, step, str(THRESHOLD)], capture_output=True,
                           text=True, timeout=60)
    assert child.returncode == -signal.SIGKILL, (step, child.returncode, child.stderr)


@pytest.mark.parametrize("step", ["record-written", "rewrite-renamed", "blob-deleted", "blob-renamed"])
def test_a_crash_at_any_step_of_an_erasure_leaves_no_copy_once_redact_runs_again(step: str, tmp_path: Path) -> None:
    """A writer killed during an erasure (after its record, before and after the rewritten file's rename, before the
    blobs are deleted) or during a blob's write: verify reports what the crash left that holds content, and the next
    ``sessiontree redact`` leaves no file holding it."""
    url = str(tmp_path / "r")
    sid, first, second, _third = _fill(url)
    secret = SECRET_LONG if step != "blob-renamed" else "wombatpylon5150"
    _crash(url, sid, second, step, secret)
    report = run(("verify", "--json", "--repo", url), tmp_path, fails=False).stdout if step != "record-written" else ""
    if step in ("rewrite-renamed", "blob-renamed"):
        assert "interrupted" in report and ("rewrite" in report or ".tmp" in report), report
    # The documented recovery: redact again (completes an interrupted erasure); then erase another entry, whose
    # content the dead rewrite's copy of the file still held.
    run(("redact", sid, second, "--reason", "again", "--repo", url), tmp_path)
    run(("redact", sid, first, "--reason", "another", "--repo", url), tmp_path)
    assert _holders(secret, tmp_path, _cache()) == []
    assert _holders(SECRET, tmp_path, _cache()) == []
    leftovers = [p.name for p in (tmp_path / "r").rglob("*") if p.name.endswith((".rewrite", ".tmp"))]
    assert leftovers == []
    assert "nothing secret here" in (tmp_path / "r" / f"{sid}.jsonl").read_text()  # third is untouched
    checked = run(("verify", "--json", "--repo", url), tmp_path).stdout
    assert "interrupted" not in checked, checked


def test_a_live_writers_blob_temporary_file_is_never_removed(tmp_path: Path) -> None:
    """A blob's temporary file of a running process (this one) survives another process's erasure and write; one left
    by a dead process goes."""
    url = str(tmp_path / "r")
    sid, first, _, _ = _fill(url)
    part = next((tmp_path / "r" / ".blobs" / "sha256").iterdir())
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = part / f".deadbeef.{int(dead.stdout)}.00000000.tmp"
    live = part / f".cafebabe.{os.getpid()}.00000000.tmp"
    stale.write_bytes(b"stale")
    live.write_bytes(b"live")
    os.utime(live, (0, 0))  # however old it looks
    run(("redact", sid, first, "--reason", "r", "--repo", url), tmp_path)
    assert live.exists() and not stale.exists()


def test_a_blob_write_removes_a_dead_writers_old_temporary_file_in_its_folder(tmp_path: Path) -> None:
    """The next blob write into a folder removes a temporary file there whose writer is gone and that is over a minute
    old; a younger one, or a running process's, is kept (a writer holds only a shared lock)."""
    from sessiontree.content.blob_stores import FolderBlobs

    blobs = FolderBlobs(tmp_path / ".blobs")
    digest = hashlib.sha256(b"content").hexdigest()
    part = blobs.path(digest).parent
    part.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    old, young, live = (part / f".{name}.{p}.00000000.tmp" for name, p in
                        (("0ld0ld00", pid), ("y0un6000", pid), ("11ve0000", os.getpid())))
    for path in (old, young, live):
        path.write_bytes(SECRET.encode())
    os.utime(old, (0, 0))
    os.utime(live, (0, 0))
    blobs.put(digest, b"content")
    assert not old.exists() and young.exists() and live.exists()


_SQLITE_CHILD = """
import os, signal, sys
import sessiontree.audit.row_replace as rows
from sessiontree import open_repo
url, sid, entry, step = sys.argv[1:5]

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

if step == "record-written":
    rows.replace_recorded = die
    import sessiontree.storage.recorder as recorder
    recorder.replace_recorded = die
else:
    rows.checkpoint = die  # the row is rewritten and committed; the WAL still holds the old pages
with open_repo(url) as repo:
    repo.open(sid).redact(entry, reason="a secret")
"""


@pytest.mark.parametrize("step", ["record-written", "checkpoint"])
def test_a_crash_during_a_sqlite_erasure_leaves_no_copy_once_redact_runs_again(step: str, tmp_path: Path) -> None:
    """A writer killed after the redaction record, or after the rewrite's commit but before the WAL is checkpointed:
    the next ``redact`` leaves neither the database nor its -wal and -shm files holding the erased bytes."""
    url = URLS["sqlite"].format(tmp=tmp_path)
    sid, first, _second, _third = _fill(url)
    child = subprocess.run([sys.executable, "-c", _SQLITE_CHILD, url, sid, first, step], capture_output=True, text=True,
                           timeout=60)
    assert child.returncode == -signal.SIGKILL, child.stderr
    run(("redact", sid, first, "--reason", "again", "--repo", url), tmp_path)
    assert _holders(SECRET, tmp_path, _cache()) == []
    assert _terms(tmp_path / "db" / "s.db", SECRET) == []
