"""A file cut short while it is read (issue 32, item 6; docs/reliability.md): a writer repairing a torn tail truncates
the file to its last whole line, which a reader may be reading at that moment. Readers map only whole lines and read a
torn tail with plain reads, so the cut never lands in a mapping: no ``SIGBUS``, and the reader sees either the tail
or the repaired file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# Runs in a child: ``SIGBUS`` would kill the test process. The file gets a 64 KB torn tail (several pages), and the
# reader's first look at the file's lines is wrapped so that the file is cut to its last whole line just then, as a
# writer's repair would cut it.
_CHILD = r"""
import os, sys
from pathlib import Path
import sessiontree_testkit as kit
from sessiontree import JsonlSessionStorage, Session, verify
from sessiontree.storage import jsonl_index
from sessiontree.audit import verify as verify_module

path = Path(sys.argv[1])
session = Session(JsonlSessionStorage.create(path, cwd="/p"))
for number in range(50):
    session.append_message(kit.user(f"message {number} " + "x" * 300))
session.close()
whole = path.stat().st_size
with open(path, "ab") as out:
    out.write(b'{"type":"message","id":"torn' + b"y" * 65536)

def cut(real):
    def wrapped(*args, **kwargs):
        os.truncate(path, whole)
        return real(*args, **kwargs)
    return wrapped

if sys.argv[2] == "cut-below":  # another program cuts the file to half while a session reads it lazily
    from sessiontree import SessionError
    os.truncate(path, whole)  # no torn tail: the open indexes the file, and the next one reads through the index
    Session(JsonlSessionStorage.open(path)).close()
    opened = Session(JsonlSessionStorage.open(path))
    last = opened.leaf_id  # known from the index: its line is not read yet
    os.truncate(path, whole // 2)
    try:
        opened.get_entry(last)
        print("read")
    except SessionError as exc:
        print("ok" if exc.code == "corrupt" and "cut short" in exc.message else exc)
elif sys.argv[2] == "verify":
    verify_module.line_lengths = cut(verify_module.line_lengths)
    report = verify(path)
    print("ok" if report.ok else report.problems)
else:
    jsonl_index.remove(path)  # no sidecar index: the open scans the mapped file
    jsonl_index._scan_windows = cut(jsonl_index._scan_windows)
    opened = Session(JsonlSessionStorage.open(path))
    print("ok" if len(opened.get_entries()) == 50 else "wrong")
"""


@pytest.mark.parametrize("reader", ["verify", "open"])
def test_a_torn_tail_cut_off_while_it_is_read_is_no_signal(tmp_path: Path, reader: str) -> None:
    """The file is cut to its last whole line after the reader sized it: the reader finishes normally (before: it
    died of ``SIGBUS`` reading the mapped tail)."""
    support = str(Path(__file__).resolve().parents[1] / "support")
    done = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "s.jsonl"), reader], capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": support, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "ok", done.stdout


def test_a_file_cut_below_its_whole_lines_under_a_reader_is_an_error(tmp_path: Path) -> None:
    """Another program cuts the file to half while a session reads its lines lazily: ``corrupt`` "cut short", not a
    signal (before: ``SIGBUS``)."""
    support = str(Path(__file__).resolve().parents[1] / "support")
    done = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "s.jsonl"), "cut-below"], capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": support, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "ok", done.stdout
