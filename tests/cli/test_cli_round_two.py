"""The command line, round two (issue 18): naming sessions and entries as people do, errors and warnings in the house
style, --salvage on reading commands, pi's context shape, and the small things. Each runs the console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import sessiontree_pi as pi
from sessiontree_cli_runner import SCRIPT, run

from sessiontree import (
    AssistantMessage,
    InMemorySessionStorage,
    JsonlSessionRepo,
    JsonlSessionStorage,
    Session,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

COMMANDS = ("demo", "ls", "show", "context", "stats", "replay", "fork", "label", "name", "move", "compact", "import",
            "export", "verify", "sign")


def _raw(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The script with the user's environment (warnings shown, no COLUMNS), for what the shared runner smooths over."""
    full = {k: v for k, v in os.environ.items() if k not in ("SESSIONTREE_REPO", "PYTHONWARNINGS", "COLUMNS")} | env
    return subprocess.run([SCRIPT, *args], cwd=cwd, capture_output=True, text=True, env=full, timeout=120)


def test_bare_sessiontree_prints_the_help_with_every_command(tmp_path):
    proc = _raw([], tmp_path)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("usage: sessiontree")
    for command in COMMANDS:
        assert f"    {command} " in proc.stdout, command


def test_a_torn_line_warning_is_one_line_in_the_house_style(tmp_path, demo):
    path = next((tmp_path / ".sessions").glob("*.jsonl"))
    with path.open("ab") as f:
        f.write(b'{"type":"message","id":"torn')
    proc = _raw(["stats", str(path)], tmp_path)
    assert proc.returncode == 0
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sessiontree: warning: ") and "torn last line" in lines[0]
    assert ".py:" not in proc.stderr and "Warning" not in proc.stderr


def test_with_json_errors_are_json_on_stderr_too(tmp_path, demo):
    proc = _raw(["show", "no-such-session", "--json"], tmp_path)
    assert proc.returncode == 1 and proc.stdout == ""
    error = json.loads(proc.stderr)["error"]
    assert error["code"] == "not_found" and "no-such-session" in error["message"]
    assert not error["message"].startswith("not_found")
    usage = _raw(["show", "--window", "many", "--json"], tmp_path)
    assert usage.returncode == 1 and json.loads(usage.stderr)["error"]["code"] == "usage"


def _two_named(root: Path, name: str) -> list[str]:
    repo = JsonlSessionRepo(root / ".sessions")
    ids = []
    for _ in range(2):
        with repo.create(cwd="/w", name=name) as session:
            session.append_message(UserMessage("hi"))
            ids.append(session.id)
    return ids


def test_an_ambiguous_session_name_is_ambiguous_and_lists_every_candidate(tmp_path):
    ids = _two_named(tmp_path, "twin")
    proc = run(("show", "twin"), tmp_path, fails=True)
    assert "ambiguous: 'twin' names 2 sessions" in proc.stderr
    assert all(i in proc.stderr for i in ids)
    error = json.loads(_raw(["context", "twin", "--json"], tmp_path).stderr)["error"]
    assert error["code"] == "ambiguous" and all(i in error["message"] for i in ids)


def _counted_ids(prefix: str) -> Any:
    counter = iter(range(1, 1000))
    return lambda: f"{prefix}{next(counter):04d}"


def test_entries_are_named_by_a_four_character_prefix_or_a_label(tmp_path, cli, cli_json):
    path = tmp_path / "s.jsonl"
    with Session(JsonlSessionStorage.create(path, cwd="/w"), id_generator=_counted_ids("beef")) as session:
        first = session.append_message(UserMessage("first"))
        second = session.append_message(UserMessage("second"))
    assert (first, second) == ("beef0001", "beef0002")
    assert cli_json("context", str(path), "--leaf", "beef0001")["leaf_id"] == first
    cli("label", str(path), "beef0001", "start")  # the session first, then the entry and the label
    assert cli_json("context", str(path), "--leaf", "start")["leaf_id"] == first
    cli("move", str(path), "start")
    assert cli_json("context", str(path))["leaf_id"] == first
    ambiguous = run(("context", str(path), "--leaf", "beef"), tmp_path, fails=True)
    assert "ambiguous: 'beef' names" in ambiguous.stderr and first in ambiguous.stderr and second in ambiguous.stderr
    short = run(("move", str(path), "bee"), tmp_path, fails=True)
    assert "not_found" in short.stderr and "4 or more characters" in short.stderr
    assert cli_json("context", str(path), "--leaf", "beef0002")["leaf_id"] == second


def test_label_name_and_move_take_the_session_positionally_or_with_s(tmp_path, demo, cli, cli_json):
    sid = demo["session_id"]
    leaf = cli_json("context")["leaf_id"]
    cli("name", sid, "Positional")
    assert cli_json("name", "-s", sid)["name"] == "Positional"
    cli("label", sid, leaf, "here")
    assert cli_json("show", sid)["rows"] and "here" in cli("show", sid).stdout
    cli("label", sid, leaf, "--clear")
    assert "here" not in cli("show", sid).stdout
    cli("label", "-s", sid, leaf, "again")
    cli("move", sid, "root")
    assert cli_json("context", sid)["leaf_id"] is None
    cli("move", "-s", sid, "again")
    assert cli_json("context", sid)["leaf_id"] == leaf
    twice = run(("move", sid, leaf, "-s", sid), tmp_path, fails=True)
    assert "name the session once" in twice.stderr


def _damaged_pi_file(tmp_path: Path) -> Path:
    source = pi.fixtures_dir() / "branches.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    lines[3] = b'{"type": "message", "id": oops}\n'
    path = tmp_path / "damaged.jsonl"
    path.write_bytes(b"".join(lines))
    return path


@pytest.mark.parametrize("command", ["show", "context", "stats", "replay", "export"])
def test_salvage_reads_past_a_bad_line_and_says_which_it_skipped(tmp_path, command):
    path = _damaged_pi_file(tmp_path)
    before = path.read_bytes()
    refused = run((command, str(path)), tmp_path, fails=True)
    assert "corrupt" in refused.stderr and ":4:" in refused.stderr
    proc = _raw([command, str(path), "--salvage"], tmp_path, COLUMNS="200")
    assert proc.returncode == 0, proc.stderr
    assert f"sessiontree: warning: {path}:4: skipped: invalid JSON" in proc.stderr
    assert proc.stdout.strip()
    assert path.read_bytes() == before  # salvage reads; it never repairs


def test_salvage_works_through_a_repository_too(tmp_path, demo, cli_json):
    path = next((tmp_path / ".sessions").glob("*.jsonl"))
    lines = path.read_bytes().splitlines(keepends=True)
    lines[-2] = b"{not json}\n"
    path.write_bytes(b"".join(lines))
    run(("stats",), tmp_path, fails=True)
    proc = _raw(["stats", demo["session_id"][:8], "--salvage", "--json"], tmp_path)
    assert proc.returncode == 0 and "skipped: invalid JSON" in proc.stderr
    assert json.loads(proc.stdout)["whole"]["entry_count"] > 0


@pytest.mark.parametrize("name", sorted(p.stem for p in pi.FIXTURES.glob("*.jsonl")) or ["(no fixtures)"])
def test_context_format_pi_is_what_pi_builds(tmp_path, cli, name):
    folder = pi.fixtures_dir()
    expected = json.loads((folder / f"{name}.expected.json").read_text())
    shutil.copyfile(folder / f"{name}.jsonl", tmp_path / "s.jsonl")
    got = json.loads(cli("context", "s.jsonl", "--format", "pi").stdout)
    assert got["messages"] == expected["contextMessages"]
    assert got["thinkingLevel"] == expected["context"]["thinkingLevel"] and got["model"] == expected["context"]["model"]


@pytest.mark.postgres
def test_a_wrong_database_name_says_the_database_does_not_exist(tmp_path):
    proc = run(("ls", "--repo", "postgresql://postgres@127.0.0.1:5432/no_such_database_here"), tmp_path, fails=True)
    assert 'database "no_such_database_here" does not exist' in proc.stderr
    assert "couldn't get a connection" not in proc.stderr


def test_open_session_detects_the_dialect(tmp_path):
    import sessiontree

    native = tmp_path / "native.jsonl"
    with Session(JsonlSessionStorage.create(native)) as s:
        s.append_message(UserMessage("hi"))
    assert [m.content for m in sessiontree.open_session(native).build_context().messages] == ["hi"]
    if pi.FIXTURES.is_dir():
        opened = sessiontree.open_session(pi.fixtures_dir() / "small.jsonl")
        assert type(opened.storage).__name__ == "PiSessionStorage" and opened.build_context().messages
    assert isinstance(Session(InMemorySessionStorage.create()).leaf_id, type(None))


def test_a_fork_before_a_reply_suggests_the_flag_and_into_names_the_target(tmp_path, demo, cli_json):
    rows = cli_json("show", "--filter", "all")["rows"]
    reply = next(r["id"] for r in rows if r["type"] == "message" and r["entry"]["message"]["role"] == "assistant")
    refused = run(("fork", "--entry", reply, "--position", "before"), tmp_path, fails=True)
    assert "invalid_fork_target" in refused.stderr and "--position at" in refused.stderr
    assert "position='at'" not in refused.stderr
    fork = cli_json("fork", "--entry", reply[:5], "--into", "elsewhere")
    assert Path(fork["location"]).parent.name == "elsewhere" and fork["entries"] > 1
    assert (tmp_path / "elsewhere" / ".sessiontree-repository").is_file()


def test_piped_output_is_not_cut_at_80_columns(tmp_path, demo):
    """Without a terminal (and without $COLUMNS) a tree row is printed whole; the message boxes keep their width."""
    show = _raw(["show"], tmp_path)
    assert show.returncode == 0
    row = next(line for line in show.stdout.splitlines() if " user: tests/test_cache.py" in line)
    assert row.endswith("Can you find out why?") and len(row) > 80
    context = _raw(["context"], tmp_path)
    widths = {len(line) for line in context.stdout.splitlines() if line.startswith("╭")}
    assert widths == {120}
    narrow = _raw(["show"], tmp_path, COLUMNS="60")
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 60


def test_context_and_compact_give_one_token_figure(tmp_path, demo, cli, cli_json):
    context = cli_json("context")
    plan = cli_json("compact", "--dry-run")
    assert context["estimated_tokens"] == plan["tokens_before"] == context["reported_tokens"]
    assert f"≈{context['estimated_tokens']:,} tokens" in cli("context").stdout


def test_terminal_control_sequences_in_a_session_are_shown_not_sent(tmp_path, cli):
    """An ESC in session text would clear the screen, set the title or write the clipboard: every human view shows it
    as an escape (piped output has no colours, so any ESC on stdout came from the session)."""
    with Session(JsonlSessionStorage.create(tmp_path / "e.jsonl", cwd="/x\x1b]0;title\x07")) as session:
        first = session.append_message(UserMessage("\x1b[2Jhello \x1b[31mred"))
        session.append_message(AssistantMessage([ToolCall(id="c1", name="ba\x1bsh", arguments={"cmd": "ls\x1b[1m"}),
                                                 TextContent("ok\x1b]52;c;Zm9v\x07")]))
        session.append_message(ToolResultMessage([TextContent("out\x1b[2J")], tool_call_id="c1", tool_name="ba\x1bsh"))
        session.append_label_change(first, "lab\x1b[5mel")
        session.append_session_info("na\x1b]0;T\x07me")
    for args in (["show"], ["show", "--full"], ["context"], ["context", "--full"], ["replay", "--step"],
                 ["replay", "--to", "3", "--full"], ["stats"], ["name", "-s"], ["ls", "--repo", "."]):
        out = cli(*args, *([] if args[0] == "ls" else ["e.jsonl"])).stdout
        assert "\x1b" not in out and "\x07" not in out, args
    assert "\\x1b[2Jhello" in cli("context", "e.jsonl").stdout


def test_reading_never_adds_tables_to_a_database_that_is_not_ours(tmp_path):
    import sqlite3

    with sqlite3.connect(tmp_path / "otherapp.db") as db:
        db.execute("CREATE TABLE notes (x)")
    (tmp_path / "empty.db").touch()
    (tmp_path / "text.db").write_text("hello\n")
    for name, said in (("otherapp", "not a sessiontree database"), ("empty", "not a sessiontree database"),
                       ("text", "cannot be read as a SQLite database")):
        before = (tmp_path / f"{name}.db").read_bytes()
        for command in ("ls", "show", "stats"):
            proc = run((command, "--repo", f"sqlite:///{name}.db"), tmp_path, fails=True)
            assert said in proc.stderr
        assert (tmp_path / f"{name}.db").read_bytes() == before
    run(("demo", "--repo", "sqlite:///mine.db", "--quiet"), tmp_path)
    assert "Fix the flaky cache test" in run(("ls", "--repo", "sqlite:///mine.db"), tmp_path).stdout


def test_small_refusals_say_why(tmp_path, demo, cli_json):
    """Arguments that would silently print nothing, or the wrong thing, are refused with a reason."""
    for args, said in ((("ls", "-n", "0"), "--limit must be 1 or more"), (("show", ""), "empty session name"),
                       (("replay", "--step", "--from", "30", "--to", "20"), "comes after --to"),
                       (("context", "--format", "pi", "--last", "1"), "--last does not apply")):
        assert said in run(args, tmp_path, fails=True).stderr, args
    leaf = cli_json("context")["leaf_id"]
    run(("label", leaf, "root"), tmp_path)
    assert cli_json("context", "--leaf", "root")["leaf_id"] == leaf  # a label named root, outside move
    run(("move", "root"), tmp_path)
    assert cli_json("context")["leaf_id"] is None  # move's keyword


def test_salvage_on_a_database_repository_and_fork_salvage_entries_by_prefix(tmp_path, cli_json):
    import sqlite3

    run(("demo", "--repo", "sqlite:///s.db", "--quiet"), tmp_path)
    with sqlite3.connect(tmp_path / "s.db") as db:
        db.execute("UPDATE stored_events SET state = X'7b2267617262616765' WHERE originator_version = 12")
    run(("stats", "--repo", "sqlite:///s.db"), tmp_path, fails=True)
    proc = _raw(["stats", "--repo", "sqlite:///s.db", "--salvage", "--json"], tmp_path)
    assert proc.returncode == 0 and ":12: skipped: invalid JSON" in proc.stderr
    assert 0 < json.loads(proc.stdout)["whole"]["entry_count"] < 39  # the demo has 39; event 12 and its descendants go
    file = _damaged_pi_file(tmp_path)
    first = json.loads(_raw(["show", str(file), "--salvage", "--json", "--filter", "all"], tmp_path).stdout)["rows"][1]
    fork = _raw(["fork", str(file), "--salvage", "--entry", first["id"][:5], "--json"], tmp_path)
    assert fork.returncode == 0, fork.stderr
    assert json.loads(fork.stdout)["entries"] >= 1


def test_a_label_that_is_also_another_entrys_prefix_is_ambiguous(tmp_path, cli_json):
    path = tmp_path / "s.jsonl"
    with Session(JsonlSessionStorage.create(path, cwd="/w"), id_generator=_counted_ids("cafe")) as session:
        first = session.append_message(UserMessage("first"))
        second = session.append_message(UserMessage("second"))
        session.append_label_change(first, "cafe0002")  # a label spelled like the other entry's id... prefix
        session.append_label_change(second, "cafe00")
    assert cli_json("context", str(path), "--leaf", "cafe0002")["leaf_id"] == second  # an exact id wins
    proc = run(("context", str(path), "--leaf", "cafe00"), tmp_path, fails=True)
    assert "ambiguous" in proc.stderr and first in proc.stderr and second in proc.stderr
