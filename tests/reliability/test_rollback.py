"""Rollback and forged tails (issue 15, item 5; docs/audit.md): what a chain, checkpoints kept
beside the file, and anchors kept elsewhere (a head digest, a line count, a checkpoint file)
each catch, driven through the ``sessiontree`` command as an auditor would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import sessiontree_testkit as kit

from sessiontree import JsonlSessionStorage, Session

SCRIPT = str(Path(sys.executable).parent / "sessiontree")


def st(*args: str, code: int = 0) -> Any:
    proc = subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc


def st_json(*args: str, code: int = 0) -> Any:
    return json.loads(st(*args, "--json", code=code).stdout)


def signed_log(tmp_path: Path) -> tuple[Path, Path, list[dict[str, Any]]]:
    """A session signed three times as it grew (lines 3, 5, 7), checkpoints beside it."""
    key = tmp_path / "key"
    key.write_bytes(b"k" * 32)
    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path, cwd="/audit"))
    signed = []
    for round_ in range(3):
        session.append_message(kit.user(f"question {round_}"))
        session.append_message(kit.assistant(f"answer {round_}"))
        signed.extend(st_json("sign", str(path), "--key", str(key)))
    session.close()
    return path, key, signed


def cut_back(path: Path, lines: int) -> None:
    data = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(data[:lines]) + b"\n")


def drop_checkpoints(path: Path, keep: int) -> None:
    sidecar = Path(str(path) + ".checkpoints")
    sidecar.write_bytes(b"\n".join(sidecar.read_bytes().split(b"\n")[:keep]) + b"\n")


def test_sign_numbers_its_checkpoints_and_prints_the_head(tmp_path: Path) -> None:
    """``sign`` keeps each checkpoint beside the file, numbered 1, 2, 3, with the head digest
    that ``verify`` also prints."""
    path, key, signed = signed_log(tmp_path)
    assert [(c["sequence"], c["line"]) for c in signed] == [(1, 3), (2, 5), (3, 7)]
    report = st_json("verify", str(path), "--key", str(key))["reports"][0]
    assert report["ok"] and report["checkpoints"] == 3 and report["head"] == signed[-1]["digest"]
    assert "head " + signed[-1]["digest"] in st("sign", str(path), "--key", str(key)).stdout


def test_a_rollback_with_its_checkpoints_needs_an_anchor_kept_elsewhere(tmp_path: Path) -> None:
    """The log cut back to line 5 and checkpoint 3 deleted from the sidecar: consistent with
    itself (the documented limit of files alone), but caught by the head or the line count
    an auditor kept, and by checkpoints kept in a file of their own."""
    path, key, signed = signed_log(tmp_path)
    outside = tmp_path / "elsewhere.checkpoints"
    outside.write_bytes(Path(str(path) + ".checkpoints").read_bytes())
    cut_back(path, 5)
    drop_checkpoints(path, 2)
    st("verify", str(path), "--key", str(key))  # nothing in the files shows it
    head = st("verify", str(path), "--head", signed[-1]["digest"], code=1)
    assert "rolled back" in head.stderr + head.stdout
    lines = st_json("verify", str(path), "--at-least", "7", code=1)["reports"][0]
    assert lines["first_bad_line"] == 6 and "were removed" in lines["problems"][0]["message"]
    kept = st_json("verify", str(path), "--key", str(key), "--checkpoints", str(outside), code=1)["reports"][0]
    assert "were removed" in kept["problems"][0]["message"]


def test_a_rollback_and_re_extension_is_caught_by_the_head(tmp_path: Path) -> None:
    """Cut back to line 5, then new, correctly chained lines appended: the old head is not on
    the log any more."""
    path, _, signed = signed_log(tmp_path)
    cut_back(path, 5)
    drop_checkpoints(path, 2)
    session = Session(JsonlSessionStorage.open(path))
    for n in range(3):
        session.append_message(kit.user(f"rewritten history {n}"))
    st("verify", str(path), "--head", signed[1]["digest"])  # line 5 is still there
    st("verify", str(path), "--head", signed[-1]["digest"], code=1)


def test_a_missing_checkpoint_in_the_middle_is_a_gap(tmp_path: Path) -> None:
    """Checkpoint 2 removed from the sidecar: the sequence 1, 3 has a gap, which is reported."""
    path, key, _ = signed_log(tmp_path)
    sidecar = Path(str(path) + ".checkpoints")
    kept = sidecar.read_bytes().split(b"\n")
    sidecar.write_bytes(b"\n".join([kept[0], kept[2]]) + b"\n")
    report = st_json("verify", str(path), "--key", str(key), code=1)["reports"][0]
    assert any("checkpoint(s) 2 are missing" in p["message"] for p in report["problems"])


def test_a_forged_tail_after_the_last_checkpoint_is_unverified(tmp_path: Path) -> None:
    """A correctly chained entry appended after the last checkpoint: exit status 3, and
    ``--json`` counts it as unverified (before the fix: exit 0 and a warning about removal)."""
    path, key, _ = signed_log(tmp_path)
    Session(JsonlSessionStorage.open(path)).append_message(kit.user("forged, but chained"))
    proc = st("verify", str(path), "--key", str(key), code=3)
    assert "unverified" in proc.stdout and "unverified" in proc.stderr
    report = st_json("verify", str(path), "--key", str(key), code=3)["reports"][0]
    assert report["ok"] and report["unverified_from"] == 8 and report["unverified_lines"] == 1
    assert not any("removal" in w["message"] for w in report["warnings"])
    st("sign", str(path), "--key", str(key))
    st("verify", str(path), "--key", str(key))


def test_checkpoints_can_be_kept_in_a_file_of_their_own(tmp_path: Path) -> None:
    """``sign --out FILE`` keeps checkpoints away from the log; ``verify --checkpoints FILE``
    checks against them, per session."""
    path, key, _ = signed_log(tmp_path)
    outside = tmp_path / "audit" / "kept.checkpoints"
    outside.parent.mkdir()
    first = st_json("sign", str(path), "--key", str(key), "--out", str(outside))
    assert first[0]["sequence"] == 1 and Path(first[0]["kept_in"]) == outside
    report = st_json("verify", str(path), "--key", str(key), "--checkpoints", str(outside))["reports"][0]
    assert report["ok"] and report["checkpoints"] == 1 and report["unverified_lines"] == 0
