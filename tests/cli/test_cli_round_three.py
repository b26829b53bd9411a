"""The command line, round three (issue 37): what a new user met, each item run through the console script."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sessiontree_cli_runner import run


def _demo_id(demo: dict[str, Any]) -> str:
    return str(demo["session_id"])


# -- 1. `name SESSION` prints the name; a rename to an id or id prefix is refused ---------------------------------


def test_name_with_one_argument_that_names_a_session_prints_its_name(tmp_path, demo, cli, cli_json):
    """`name SESSION` (its id, an id prefix or its file) prints the session's name and appends nothing."""
    sid = _demo_id(demo)
    path = next((tmp_path / ".sessions").glob("*.jsonl"))
    before = path.read_bytes()
    for ref in (sid, sid[:8], str(path)):
        assert cli("name", ref).stdout.strip() == "Fix the flaky cache test"
        assert cli_json("name", ref) == {"session_id": sid, "name": "Fix the flaky cache test"}
    assert path.read_bytes() == before  # no session_info entry was written


def test_a_rename_takes_the_name_last_and_refuses_a_session_id_or_prefix(tmp_path, demo, cli, cli_json):
    """`name SESSION NAME` renames; a name that is a session's id or id prefix is refused (`invalid_name`), unwritten."""
    sid = _demo_id(demo)
    path = next((tmp_path / ".sessions").glob("*.jsonl"))
    assert cli_json("name", sid[:8], "Cache test: fixed")["name"] == "Cache test: fixed"
    assert cli_json("name", "Renamed again")["name"] == "Renamed again"  # one word naming no session: a rename
    before = path.read_bytes()
    for bad in ((sid[:8], sid), (sid, sid[:6])):
        proc = cli("name", *bad, "--json", fails=True)
        error = json.loads(proc.stderr)["error"]
        assert error["code"] == "invalid_name" and sid in error["message"], error
    assert path.read_bytes() == before
    assert cli("name", sid).stdout.strip() == "Renamed again"


# -- 4. `ls` orders by when a session was last written; forks are marked ----------------------------------------------


def test_a_fork_is_listed_first_and_marked_in_ls_and_show(tmp_path, demo, cli, cli_json):
    """A fork made now is the newest session (its copied entries keep their older times), and `ls` and `show` say
    "fork of X at Y": the source by its short id, the entry its branch was copied up to."""
    sid = _demo_id(demo)
    fork = cli_json("fork", "--entry", "0d99ed20", "--position", "before")["session_id"]
    rows = cli_json("ls")
    assert [r["id"] for r in rows] == [fork, sid]
    assert rows[0]["parent_session"].endswith(f"{sid}.jsonl") and rows[0]["forked_at"] == "25318bf2"
    assert rows[1]["forked_at"] is None
    note = f"fork of {sid[:8]} at 25318bf2"
    listing = cli("ls").stdout
    assert listing.count(note) == 1 and listing.index(fork) < listing.index(note) < listing.index(sid)
    assert note in cli("show", fork[:8]).stdout.splitlines()[0]
    assert "fork of" not in cli("show", sid[:8]).stdout.splitlines()[0]
    assert cli_json("show", fork[:8])["parent_session"].endswith(f"{sid}.jsonl")
    cli("label", sid[:8], "0d99ed20", "later")  # the source written after the fork: first again
    assert [r["id"] for r in cli_json("ls")] == [sid, fork]


# -- 6. folder arguments ------------------------------------------------------------------------------------------


def test_ls_dir_lists_that_repository_as_ls_repo_does(tmp_path, demo, cli, cli_json):
    """`ls DIR` is `ls --repo DIR`, relative or absolute; with both, it asks for one."""
    (tmp_path / "elsewhere").mkdir()
    sid = _demo_id(demo)
    assert [r["id"] for r in cli_json("ls", "../.sessions", cwd=tmp_path / "elsewhere")] == [sid]
    assert [r["id"] for r in cli_json("ls", str(tmp_path / ".sessions"), cwd=tmp_path / "elsewhere")] == [sid]
    assert "no session repository at nowhere" in cli("ls", "nowhere", fails=True).stderr
    assert "once" in cli("ls", ".sessions", "--repo", ".sessions", fails=True).stderr


def test_show_dir_says_pass_it_as_repo_whether_relative_or_absolute(tmp_path, demo, cli):
    """A directory named as the session is refused with the same advice, however it is written."""
    (tmp_path / "old").mkdir()
    for ref in ("old", "./old", str(tmp_path / "old"), ".sessions"):
        for command in (("show", ref), ("stats", ref), ("fork", ref)):
            err = cli(*command, fails=True).stderr
            assert f"{ref} is a directory: pass it as --repo" in err, (command, err)
    (tmp_path / ".sessions-gone").mkdir()
    err = cli("show", "old", "--repo", ".sessions-gone", fails=True).stderr  # an empty repository: the same advice
    assert "old is a directory: pass it as --repo" in err


# -- 5. damaged files: the error suggests --salvage, and import takes it -----------------------------------------


def _damaged(tmp_path: Path) -> Path:
    """A copy of the demo whose fifth line is cut short (invalid JSON)."""
    source = next((tmp_path / ".sessions").glob("*.jsonl"))
    lines = source.read_bytes().splitlines(keepends=True)
    lines[4] = b'{"type":"message","id":\n'
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(b"".join(lines))
    return damaged


def test_a_command_stopped_by_a_corrupt_line_suggests_salvage(tmp_path, demo, cli):
    """Each reading command that stops on a bad line names it and suggests --salvage; with it, it reads on."""
    damaged = str(_damaged(tmp_path))
    for command in ("show", "context", "stats", "replay", "export", "fork"):
        err = cli(command, damaged, fails=True).stderr
        assert "corrupt" in err and "--salvage" in err, (command, err)
        cli(command, damaged, "--salvage")
    err = cli("label", damaged, "05fdf179", "x", fails=True).stderr  # no --salvage to suggest: it writes
    assert "corrupt" in err and "--salvage" not in err


def test_import_salvage_imports_what_can_be_read_once(tmp_path, demo, cli, cli_json):
    """`import` of a damaged file fails suggesting --salvage; with it, the readable lines are imported, the copy's
    header records the skipped lines, it verifies, and a second run finds it already there."""
    damaged = str(_damaged(tmp_path))
    proc = run(("import", damaged, "--repo", "copies"), tmp_path, fails=True)
    assert "--salvage" in proc.stderr and not list((tmp_path / "copies").glob("*.jsonl"))
    first = cli_json("import", damaged, "--repo", "copies", "--salvage")
    assert [i["status"] for i in first] == ["imported"] and first[0]["skipped"][0] == 5 and first[0]["entries"] == 3
    copy = tmp_path / first[0]["location"]
    header = json.loads(copy.read_bytes().splitlines()[0])
    assert header["source"]["skipped"] == first[0]["skipped"]
    assert "0 error(s)" in cli("verify", str(copy)).stdout
    again = cli_json("import", damaged, "--repo", "copies", "--salvage")
    assert [i["status"] for i in again] == ["already_there"]


# -- 3. the README's lines, one by one (tests/test_readme.py runs them all in order) ------------------------------


def test_compact_with_nothing_to_do_says_why_and_what_to_pass(tmp_path, demo, cli):
    """`compact --dry-run` on the demo says its entries fit the default budget, with their estimate and the flag."""
    out = " ".join(cli("compact", "--dry-run").stdout.split())
    assert out.startswith("nothing to compact: the ") and "20,000 tokens" in out and "--keep-tokens N" in out
    assert cli("compact", "--keep-tokens", "200", "--dry-run").stdout.startswith("would summarise ")


def test_importing_pis_folder_where_there_is_none_says_folder_and_why(tmp_path, cli):
    """`import ~/.pi/agent/sessions` without pi says the folder is missing and where pi keeps its sessions."""
    err = cli("import", str(tmp_path / ".pi" / "agent" / "sessions"), fails=True).stderr
    assert "no such session file or folder" in err and "is pi installed" in err


def test_a_fork_says_it_is_now_the_newest_session(tmp_path, demo, cli, cli_json):
    """The fork's message says commands without a SESSION now work on it, and they do."""
    out = " ".join(cli("fork", "--entry", "0d99ed20", "--position", "before").stdout.split())
    assert "it is now the newest session there, which commands without a SESSION work on" in out
    fork = out.split(" into ")[1].split()[0]
    assert cli_json("stats")["session_id"] == fork


# -- 2. what cannot be read is named on stderr ----------------------------------------------------------------------


def _as_a_user(args: tuple[str, ...], cwd: Path) -> Any:
    """The script as a user whom file modes bind: root runs it without the capabilities that let it read anything
    (``setpriv`` drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from its bounding set)."""
    import os
    import shutil
    import subprocess

    import pytest
    from sessiontree_cli_runner import SCRIPT, _env

    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root without setpriv (util-linux) reads every file whatever its mode")
        prefix = [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]
    return subprocess.run([*prefix, SCRIPT, *args], cwd=cwd, capture_output=True, text=True, env=_env(), timeout=120)


def test_an_unreadable_session_file_is_named_by_ls_search_and_show(tmp_path, demo):
    """A session file at mode 000 is not silently missing: `ls`, `search`, `show` and `prune` name it on stderr."""
    sid = _demo_id(demo)
    readable = json.loads(run(("fork", "--entry", "0d99ed20", "--json"), tmp_path).stdout)["session_id"]
    hidden = tmp_path / ".sessions" / f"{sid}.jsonl"
    hidden.chmod(0)
    said = f"{hidden.relative_to(tmp_path)}: cannot read it (Permission denied)"
    ls = _as_a_user(("ls", "--json"), tmp_path)
    assert ls.returncode == 0 and [r["id"] for r in json.loads(ls.stdout)] == [readable]
    assert said in ls.stderr and "sessiontree: warning:" in ls.stderr
    found = _as_a_user(("search", "clock"), tmp_path)
    assert found.returncode == 0 and said in found.stderr
    shown = _as_a_user(("show", sid[:8]), tmp_path)
    assert shown.returncode == 1 and said in shown.stderr and "could not be read" in shown.stderr
    by_id = _as_a_user(("show", sid), tmp_path)
    assert by_id.returncode == 1 and "Permission denied" in by_id.stderr and str(hidden.name) in by_id.stderr
    pruned = _as_a_user(("prune", "--older-than", "90d", "--dry-run"), tmp_path)
    assert pruned.returncode == 0 and said in pruned.stderr
    hidden.chmod(0o600)  # readable again: listed again (what could not be read is not remembered as empty)
    assert sid in {r["id"] for r in json.loads(_as_a_user(("ls", "--json"), tmp_path).stdout)}


def test_verify_fails_on_what_it_cannot_read_or_a_named_folder_without_sessions(tmp_path, demo):
    """`verify DIR` names an unreadable folder or file and exits 1 (it checks the rest); a named folder with no
    session file is an error too, while an empty repository is not."""
    folder = tmp_path / "logs"
    (folder / "locked").mkdir(parents=True)
    source = next((tmp_path / ".sessions").glob("*.jsonl"))
    (folder / "ok.jsonl").write_bytes(source.read_bytes())
    (folder / "locked" / "inside.jsonl").write_bytes(source.read_bytes())
    (folder / "shut.jsonl").write_bytes(source.read_bytes())
    (folder / "shut.jsonl").chmod(0)
    (folder / "locked").chmod(0)
    try:
        proc = _as_a_user(("verify", "logs"), tmp_path)
        assert proc.returncode == 1, proc
        assert "logs/locked: cannot read the folder (Permission denied)" in proc.stdout
        assert "logs/shut.jsonl: cannot read the file: Permission denied" in proc.stdout
        assert "✓ logs/ok.jsonl" in proc.stdout and "could not read 2 place(s)" in proc.stderr
        report = json.loads(_as_a_user(("verify", "logs", "--json"), tmp_path).stdout)
        assert report["ok"] is False and len(report["unreadable"]) == 2 and report["files"] == 1
    finally:
        (folder / "locked").chmod(0o700)
    (tmp_path / "nothing").mkdir()
    proc = _as_a_user(("verify", "nothing"), tmp_path)
    assert proc.returncode == 1 and "nothing: no session files (*.jsonl) in it" in proc.stdout
    (tmp_path / "empty-repo").mkdir()
    assert _as_a_user(("verify", "--repo", "empty-repo"), tmp_path).returncode == 0


# -- 7. ambiguity and prefixes --------------------------------------------------------------------------------------


def test_a_session_held_by_two_files_lists_both_paths(tmp_path, demo, cli):
    """Two files holding one session id (copies in two of pi's sub-folders): by id or by prefix, the error names both
    files, and either opens by its path."""
    sid = _demo_id(demo)
    pi_dir = tmp_path / "pi"
    copies = [pi_dir / "--home-me-a--" / f"2026-01-01T00-00-00-000Z_{sid}.jsonl",
              pi_dir / "--home-me-b--" / f"2026-01-02T00-00-00-000Z_{sid}.jsonl"]
    for copy in copies:
        copy.parent.mkdir(parents=True)
        cli("export", sid, "--format", "pi", "-o", str(copy))
    for ref in (sid, sid[:8]):
        err = cli("show", ref, "--repo", "pi", fails=True).stderr
        assert all(f"pi/{c.relative_to(pi_dir)}" in err for c in copies), err
        assert "ambiguous" in err or "conflict" in err
    assert sid in cli("show", str(copies[1])).stdout


def test_repo_open_of_a_prefix_or_name_says_it_wants_a_full_id(tmp_path, demo):
    """`repo.open` takes a full id; given a prefix or a name that names a session, its not_found says so and names
    the id (the command line accepts all three)."""
    import pytest

    from sessiontree import JsonlSessionRepo, SessionError

    sid = _demo_id(demo)
    with JsonlSessionRepo(tmp_path / ".sessions") as repo:
        for ref in (sid[:8], "Fix the flaky cache test"):
            with pytest.raises(SessionError) as caught:
                repo.open(ref)
            assert caught.value.code in ("not_found", "invalid_entry")
            assert "open takes a full session id" in caught.value.message and sid in caught.value.message
        with pytest.raises(SessionError) as caught:
            repo.open("zzzzzzzz")
        assert caught.value.code == "not_found" and "full session id" not in caught.value.message
        repo.open(sid).close()


# -- 8. small ones --------------------------------------------------------------------------------------------------


def test_replay_step_piped_pads_no_row_to_the_longest_event(tmp_path, demo):
    """Piped (no $COLUMNS), each step row ends with its event, whole, with no trailing blanks: a long event does not
    widen every other row."""
    import subprocess

    from sessiontree_cli_runner import SCRIPT, _env

    env = {k: v for k, v in _env().items() if k != "COLUMNS"}
    proc = subprocess.run([SCRIPT, "replay", "--step"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["#", "time", "leaf", "context", "msgs", "event"]
    rows = lines[2:]
    assert len(rows) == 40 and all(row == row.rstrip() for row in rows)
    assert max(map(len, rows)) > 2 * min(map(len, rows))  # short events stay short
    leaf = next(row for row in rows if "leaf: moved to" in row)
    assert leaf.endswith("leaf: moved to 651011cb") and "→ 651011cb" in leaf
