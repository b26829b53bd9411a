"""pi's sessions folder from the command line: listed, opened and imported in place, never written.

pi keeps one sub-folder per working directory (``--home-me-app--/<time>_<id>.jsonl``). Every
test builds such a folder from the shared fixtures and checks, after the commands, that its
bytes, modification times and file list are exactly as they were.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sessiontree_cli_runner import SCRIPT, _env
from sessiontree_pi import fixtures_dir

PROJECT, APP = "/home/user/project", "/home/me/app"
SESSIONS = {  # fixture: (session id, working directory it is filed under)
    "branches": ("01a22719-520e-73c5-90fe-20a5781271ca", PROJECT),
    "compaction": ("01a2271d-b98d-75fa-8b9e-395c5e9bfd86", PROJECT),
    "small": ("01a22719-3541-759d-a745-5e5f131c9378", APP),
}


def pi_folder(where: Path) -> Path:
    """pi's layout: ``--<cwd>--/<timestamp>_<id>.jsonl``, the ``small`` session moved to another cwd."""
    root = where / "pi-sessions"
    for fixture, (sid, cwd) in SESSIONS.items():
        header_line, rest = (fixtures_dir() / f"{fixture}.jsonl").read_bytes().split(b"\n", 1)
        header = json.loads(header_line)
        assert header["id"] == sid
        header["cwd"] = cwd
        folder = root / ("--" + cwd.lstrip("/").replace("/", "-") + "--")
        folder.mkdir(parents=True, exist_ok=True)
        stamp = header["timestamp"].replace(":", "-").replace(".", "-")
        line = json.dumps(header, separators=(",", ":")).encode()
        (folder / f"{stamp}_{sid}.jsonl").write_bytes(line + b"\n" + rest)
    return root


def snapshot(root: Path) -> dict[str, Any]:
    """Every file and folder under ``root``: its bytes (files) and modification time."""
    found: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        st = path.stat()
        found[str(path.relative_to(root))] = (path.read_bytes() if path.is_file() else None, st.st_mtime_ns)
    return found


def run(args: list[str], cwd: Path, *, umask: int = 0o022, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SCRIPT, *args], cwd=cwd, capture_output=True, text=True, env={**_env(), **env}, timeout=120, umask=umask
    )


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.fixture
def pi(tmp_path: Path) -> Path:
    return pi_folder(tmp_path)


def test_ls_lists_pi_s_sub_folders_with_their_cwd_and_filters_like_resume(pi: Path, cli, cli_json, tmp_path: Path) -> None:
    """``ls --repo`` on pi's sessions folder finds the sessions of every cwd sub-folder; ``--cwd`` keeps one project's,
    the directory written as pi resolves it (a trailing slash, a relative path)."""
    before = snapshot(pi)
    rows = cli_json("ls", "--repo", str(pi))
    assert {r["id"]: r["cwd"] for r in rows} == dict(SESSIONS.values())
    assert all(Path(r["path"]).parent.parent == pi for r in rows)
    assert "/home/me/app" in cli("ls", "--repo", str(pi)).stdout  # the cwd column
    assert [r["id"] for r in cli_json("ls", "--repo", str(pi), "--cwd", APP + "/")] == [SESSIONS["small"][0]]
    here = tmp_path / "home" / "me" / "app"
    here.mkdir(parents=True)
    rows = cli_json("ls", "--repo", str(pi), "--cwd", ".", cwd=here)
    assert rows == []  # resolved to this directory, where no session was started
    assert len(cli_json("ls", "--repo", str(pi), "--cwd", PROJECT)) == 2
    home = run(["ls", "--repo", str(pi), "--cwd", "~/app", "--json"], tmp_path, HOME="/home/me")
    assert [r["id"] for r in json.loads(home.stdout)] == [SESSIONS["small"][0]]
    assert snapshot(pi) == before


def test_reading_commands_never_write_into_pi_s_folder(pi: Path, cli, cli_json) -> None:
    """ls, show, context, stats and verify open pi's sessions by id, id prefix or name and leave the folder as it was;
    the listing index lives in the user's cache directory, private."""
    before = snapshot(pi)
    small, _ = SESSIONS["small"]
    assert "Explain the leaf pointer" in cli("show", small, "--repo", str(pi)).stdout
    assert cli_json("context", small[:13], "--repo", str(pi))["session_id"] == small
    assert cli_json("stats", "Branches sample", "--repo", str(pi))["session_id"] == SESSIONS["branches"][0]
    assert "checked 3 session(s)" in cli("verify", "--repo", str(pi)).stdout
    cli("ls", "--repo", str(pi))
    assert snapshot(pi) == before
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "sessiontree" / "indexes"
    indexes = [p for p in cache.iterdir() if json.loads(p.read_bytes()).get("root") == os.path.realpath(pi)]
    assert len(indexes) == 1 and mode(indexes[0]) == 0o600 and mode(cache) == 0o700
    assert len(json.loads(indexes[0].read_bytes())["files"]) == 3


def test_fork_of_a_pi_session_goes_to_our_repository(pi: Path, cli, cli_json, tmp_path: Path) -> None:
    """A fork, by file path or by id in pi's folder, is written to ./.sessions (0600), never beside pi's files; the
    fork names pi's file as its parent, as pi does."""
    before = snapshot(pi)
    branches, _ = SESSIONS["branches"]
    [source] = pi.glob(f"*/*_{branches}.jsonl")
    by_path = cli_json("fork", str(source))
    assert Path(by_path["location"]).parent == Path(".sessions") and by_path["parent_session"] == str(source)
    proc = cli("fork", branches[:13], "--repo", str(pi))
    assert "sessiontree never writes into it, so the fork goes to .sessions" in proc.stderr
    labelled = cli_json("fork", str(source), "--entry", "approach-b")  # an entry named by its label
    assert cli_json("show", labelled["session_id"], "--filter", "labelled")["rows"][-1]["label"] == "approach-b"
    forks = sorted((tmp_path / ".sessions").glob("*.jsonl"))
    assert len(forks) == 3 and all(mode(f) == 0o600 for f in forks)
    assert cli_json("context", by_path["session_id"])["messages"] == cli_json("context", str(source))["messages"]
    assert snapshot(pi) == before


def test_import_of_pi_s_folder_can_be_run_again(pi: Path, cli, cli_json, tmp_path: Path) -> None:
    """``import DIR`` takes every session of every sub-folder; run again, it finds them all already there and exits 0."""
    before = snapshot(pi)
    first = cli_json("import", str(pi), "--repo", "mine")
    assert sorted(i["session_id"] for i in first) == sorted(sid for sid, _ in SESSIONS.values())
    assert {i["status"] for i in first} == {"imported"} and {i["dialect"] for i in first} == {"pi"}
    again = cli("import", str(pi), "--repo", "mine")
    assert again.stdout.count("already there: ") == 3
    assert again.stdout.splitlines()[-1] == "imported 0, already there 3, failed 0"
    assert {i["status"] for i in cli_json("import", str(pi), "--repo", "mine")} == {"already_there"}
    assert all(mode(f) == 0o600 for f in (tmp_path / "mine").glob("*.jsonl"))
    assert len(cli_json("ls", "--repo", "mine", "--cwd", APP)) == 1
    assert snapshot(pi) == before


def test_a_bad_file_is_reported_and_the_rest_are_imported(pi: Path, tmp_path: Path) -> None:
    """A file that is not a session fails on its own: the others are imported, the summary counts each, and the exit
    status is 1; ``--json`` reports every file with its status."""
    (pi / "--home-me-app--" / "notes.jsonl").write_text("not a session\n")
    missing = str(tmp_path / "gone.jsonl")
    proc = run(["import", str(pi), missing, "--repo", "mine"], tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1] == "imported 3, already there 0, failed 2"
    errors = proc.stderr.splitlines()
    assert len(errors) == 2 and all(e.startswith("sessiontree: error: ") for e in errors)
    assert "notes.jsonl:1" in errors[0] and "corrupt" in errors[0] and "no such session file" in errors[1]
    proc = run(["import", str(pi), "--repo", "mine", "--json"], tmp_path)
    assert proc.returncode == 1
    report = {Path(i["file"]).name: i for i in json.loads(proc.stdout)}
    assert report["notes.jsonl"]["status"] == "failed" and report["notes.jsonl"]["code"] == "corrupt"
    assert sorted(i["status"] for i in report.values()) == ["already_there"] * 3 + ["failed"]


def test_import_into_pi_s_folder_is_refused(pi: Path, cli, tmp_path: Path) -> None:
    """pi's folder is never a target: importing into it is refused before anything is read or written."""
    before = snapshot(pi)
    native = tmp_path / "native.jsonl"
    cli("export", str(next(pi.glob("*/*.jsonl"))), "--format", "native", "-o", str(native))
    proc = cli("import", str(native), "--repo", str(pi), fails=True)
    assert "storage" in proc.stderr and "pi's layout" in proc.stderr
    assert snapshot(pi) == before


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_exports_follow_the_umask_and_session_logs_stay_private(pi: Path, tmp_path: Path, umask: int) -> None:
    """An export is a document for the user: its mode comes from the umask. Logs that import writes stay 0600."""
    source = str(next(pi.glob("--home-me-app--/*.jsonl")))
    for kind in ("markdown", "html", "pi", "native"):
        assert run(["export", source, "--format", kind, "-o", f"out.{kind}"], tmp_path, umask=umask).returncode == 0
        assert mode(tmp_path / f"out.{kind}") == 0o666 & ~umask
    assert run(["import", source, "--repo", "mine"], tmp_path, umask=umask).returncode == 0
    [log] = (tmp_path / "mine").glob("*.jsonl")
    assert mode(log) == 0o600 and mode(tmp_path / "mine") == 0o700


def test_a_fork_with_nowhere_of_our_own_to_go_is_refused(pi: Path, cli, tmp_path: Path) -> None:
    """When ./.sessions holds pi's files too (a folder sessiontree did not make), the fork is refused, nothing written."""
    (tmp_path / ".sessions").mkdir()
    source = next(pi.glob("--home-me-app--/*.jsonl"))
    (tmp_path / ".sessions" / source.name).write_bytes(source.read_bytes())
    before, ours = snapshot(pi), snapshot(tmp_path / ".sessions")
    proc = cli("fork", SESSIONS["small"][0], "--repo", str(pi), fails=True)
    assert "storage" in proc.stderr and "SESSIONTREE_REPO" in proc.stderr
    assert snapshot(pi) == before and snapshot(tmp_path / ".sessions") == ours
