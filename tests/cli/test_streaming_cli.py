"""verify, export and replay of a whole session through the console script (issue 19, part 4): the streamed output is
what the whole read gave, and progress shows on a terminal only, never on a pipe."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import sessiontree_testkit as kit
from sessiontree_streamkit import whole_conversion, whole_steps

from sessiontree import JsonlSessionStorage, Session
from sessiontree.cli.output import print_json
from sessiontree.pi.pi import pi_codec
from sessiontree.wire.codec import native_codec

SCRIPT = str(Path(sys.executable).parent / "sessiontree")


@pytest.fixture(scope="module")
def long_pi_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pi session of 1,200 entries with a leaf move and a compaction (more than one chunk of replay rows)."""
    from sessiontree.pi.pi_storage import PiSessionStorage

    path = tmp_path_factory.mktemp("long") / "long.jsonl"
    session = kit.open_session(PiSessionStorage.create(path, cwd="/p", session_id=kit.SESSION_ID))
    first = session.append_message(kit.user("start"))
    for n in range(600):
        session.append_message(kit.user(f"question {n}"))
        session.append_message(kit.assistant(f"answer {n}"))
    session.move_to(first)
    session.append_message(kit.user("again"))
    session.append_compaction("summary", session.leaf_id, 1000)
    session.close()
    return path


def _run(args: list[str], cwd: Path, *, terminal: bool = False) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
    """The console script with progress shown at once (``SESSIONTREE_PROGRESS_AFTER=0``): its result, and what it
    wrote on stderr when that is a terminal."""
    env = {**os.environ, "SESSIONTREE_PROGRESS_AFTER": "0"}
    if not terminal:
        return subprocess.run([SCRIPT, *args], capture_output=True, timeout=120, cwd=cwd, env=env), b""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([SCRIPT, *args], stdout=subprocess.PIPE, stderr=follower, timeout=120, cwd=cwd, env=env)
    finally:
        os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    return proc, shown


@pytest.mark.parametrize("kind", ["pi", "native"])
def test_export_to_a_pipe_is_the_whole_read_conversion_with_no_progress(long_pi_file: Path, tmp_path: Path, kind: str) -> None:
    """Piped, ``export --format pi|native`` writes the bytes the whole-read conversion wrote, and nothing on stderr
    even with progress due at once; on a terminal the same command shows its bar."""
    expected, _ = whole_conversion(long_pi_file, pi_codec() if kind == "pi" else native_codec())
    proc, _ = _run(["export", str(long_pi_file), "--format", kind], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected and proc.stderr == b""
    proc, shown = _run(["export", str(long_pi_file), "--format", kind, "-o", str(tmp_path / "out.jsonl")], tmp_path,
                       terminal=True)
    assert proc.returncode == 0 and (tmp_path / "out.jsonl").read_bytes() == expected
    assert b"exporting" in shown


def test_replay_json_is_written_as_the_whole_object_was(long_pi_file: Path, tmp_path: Path, capsysbinary: Any) -> None:
    """``replay --step --json`` writes its rows a chunk at a time, byte for byte what printing the whole object wrote,
    with the steps of the whole-read walk; piped, no progress."""
    proc, _ = _run(["replay", str(long_pi_file), "--step", "--json"], tmp_path)
    assert proc.returncode == 0 and proc.stderr == b""
    with Session(JsonlSessionStorage.open(long_pi_file)) as session:
        walked = whole_steps(session, 1, session.version)
        types = ["session"] + [entry.type for entry in session.get_entries()]
        stamps = [session.header.timestamp] + [entry.timestamp for entry in session.get_entries()]
    rows = [{"version": v, "type": types[v - 1], "id": i, "timestamp": stamps[v - 1], "leaf_before": b, "leaf_after": a,
             "removed": r, "added": added, "context_size": n} for v, i, b, a, r, added, n in walked]
    print_json({"session_id": kit.SESSION_ID, "steps": rows})
    assert proc.stdout == capsysbinary.readouterr().out
    assert len(json.loads(proc.stdout)["steps"]) == 1205


def test_replay_and_verify_show_progress_on_a_terminal_only(long_pi_file: Path, tmp_path: Path) -> None:
    """Stepping and verifying show their bars on a terminal; piped, stderr stays empty."""
    for args, label in ((["replay", str(long_pi_file), "--step"], b"replaying"), (["verify", str(long_pi_file)], b"verifying")):
        proc, shown = _run(args, tmp_path, terminal=True)
        assert proc.returncode == 0 and label in shown, shown[-300:]
        piped, _ = _run(args, tmp_path)
        assert piped.returncode == 0 and piped.stderr == b"" and piped.stdout == proc.stdout


def test_a_replay_that_fails_early_writes_no_partial_json(tmp_path: Path) -> None:
    """A line whose body cannot be decoded (its envelope is sound, so the open succeeds) stops ``replay --step
    --json`` with the error naming that line, and nothing on stdout: fewer steps than a chunk are never written."""
    path = tmp_path / "s.jsonl"
    with Session(JsonlSessionStorage.create(path, cwd="/p")) as session:
        for n in range(5):
            session.append_message(kit.user(f"q{n}"))
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b'"role":"user"', b'"role":5')
    path.write_bytes(b"\n".join(lines))
    proc, _ = _run(["replay", str(path), "--step", "--json"], tmp_path)
    assert proc.returncode == 1 and proc.stdout == b""
    assert f"{path.name}:4:".encode() in proc.stderr and b"corrupt" in proc.stderr
