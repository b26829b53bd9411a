"""Every kind of bad input we could think of, and the error a user gets for it.

Each row of ``CASES`` is tried and must fail the way it says, with a message that names what
is wrong; docs/reliability.md shows the same rows with the messages (a test checks that every
row is there). Rows: API arguments, file contents, URLs and command-line arguments.
"""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import sessiontree_faults as faults
import sessiontree_testkit as kit

from sessiontree import (
    AssistantMessage,
    JsonlSessionRepo,
    JsonlSessionStorage,
    Session,
    SessionError,
    TextContent,
    UserMessage,
    open_repo,
    sign_checkpoint,
    verify,
)
from sessiontree.wire import jsontext as codec_module

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
SID = kit.SESSION_ID


@attrs.frozen
class Case:
    area: str  # "API", "file", "URL" or "command line"
    what: str  # the bad input, as the table in docs/reliability.md names it
    run: Callable[[Path], Any]
    expect: str  # "SessionError <code>", an exception class name, "exit 1", "verify problem", "warning"
    says: str  # a fragment the message must contain


# -- builders ---------------------------------------------------------------------------------


def session(place: Path) -> Session:
    s = kit.open_session(JsonlSessionStorage.create(place / "s.jsonl", session_id=SID))
    s.append_message(kit.user("hi"))
    return s


def assistant() -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text="yo")], provider="p", model="m", stop_reason="stop", timestamp=0)


HEADER = (
    b'{"type":"session","version":3,"id":"' + SID.encode() + b'","timestamp":"2026-01-01T00:00:00.000Z",'
    b'"cwd":"/p","parent_session":null,"metadata":{}}'
)
ENTRY = b'{"type":"message","id":"e1","parent_id":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":0}}'


def file_with(*lines: bytes, end: bytes = b"\n") -> Callable[[Path], Any]:
    """Open and fully read a file made of ``lines``."""

    def run(place: Path) -> Any:
        path = place / "bad.jsonl"
        path.write_bytes(b"\n".join(lines) + end)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a warning is an outcome of its own here
            return Session(JsonlSessionStorage.open(path)).get_entries()

    return run


def tampered(place: Path) -> Any:
    path = session(place).storage.path  # type: ignore[attr-defined]
    data = path.read_bytes().replace(b'"text":"hi"', b'"text":"HI"')
    path.write_bytes(data)
    Session(JsonlSessionStorage.open(path)).get_entries()  # reading does not check the chain
    return verify(path)


def over_limit(place: Path) -> Any:
    saved = codec_module.MAX_LINE_BYTES
    codec_module.MAX_LINE_BYTES = 1000
    try:
        return file_with(HEADER, ENTRY[:-1] + b',"pad":"' + b"x" * 2000 + b'"}')(place)
    finally:
        codec_module.MAX_LINE_BYTES = saved


def cli(*args: str) -> Callable[[Path], Any]:
    def run(place: Path) -> Any:
        return ("cli", args)

    return run


# -- the table --------------------------------------------------------------------------------

CASES: list[Case] = [
    # API arguments
    Case("API", "Session(storage) with something that is not a storage", lambda p: Session("x"), "TypeError", "must be a SessionStorage"),
    Case("API", "append_message with a plain string", lambda p: session(p).append_message("hi"), "TypeError", "must be a message object"),
    Case("API", "a user message whose content is a number", lambda p: session(p).append_message(UserMessage(content=123, timestamp=0)), "TypeError", "content"),
    Case("API", "a thinking level outside the list", lambda p: session(p).append_thinking_level_change("max"), "SessionError invalid_entry", "is not one of"),
    Case("API", "a label on an entry that does not exist", lambda p: session(p).append_label_change("nope", "x"), "SessionError not_found", "label target 'nope'"),
    Case("API", "move_to an unknown entry", lambda p: session(p).move_to("nope"), "SessionError not_found", "entry 'nope' not found"),
    Case("API", "move_to with unknown summary keys", lambda p: (lambda s: s.move_to(s.leaf_id, {"summary": "x", "oops": 1}))(session(p)), "SessionError invalid_entry", "unknown branch summary keys"),
    Case("API", "a compaction keeping an entry that does not exist", lambda p: session(p).append_compaction("s", "nope", 10), "SessionError not_found", "first_kept_entry_id"),
    Case("API", "custom data that is not JSON (an object, NaN)", lambda p: session(p).append_custom_entry("t", float("nan")), "SessionError invalid_entry", "not JSON"),
    Case("API", "custom data nested 300 levels deep", lambda p: session(p).append_custom_entry("t", _nested(300)), "SessionError invalid_entry", "nested deeper"),
    Case("API", "a field named chain in an entry's extra fields", lambda p: _clashing(p), "SessionError invalid_entry", "reserves"),
    Case("API", "get_entry with a number", lambda p: session(p).get_entry(5), "TypeError", "must be a str"),
    Case("API", "at(version) outside 1..n", lambda p: session(p).at(0), "SessionError not_found", "has no version 0"),
    Case("API", "as_of with text that is not a time", lambda p: session(p).as_of("yesterday"), "SessionError invalid_entry", "not an ISO 8601 time"),
    Case("API", "as_of with a time without a zone", lambda p: session(p).as_of(datetime.datetime(2020, 1, 1)), "SessionError invalid_entry", "timezone-aware"),
    Case("API", "create a file that exists", lambda p: (session(p), JsonlSessionStorage.create(p / "s.jsonl")), "SessionError already_exists", "already exists"),
    Case("API", "open a file that does not exist", lambda p: JsonlSessionStorage.open(p / "missing.jsonl"), "SessionError not_found", "no session file there"),
    Case("API", "open a directory as a session file", lambda p: JsonlSessionStorage.open(p), "SessionError storage", "Is a directory"),
    Case("API", "an unknown durability", lambda p: JsonlSessionStorage.create(p / "t.jsonl", durability="sometimes"), "ValueError", "durability must be one of"),
    Case("API", "a session id with a path separator or ..", lambda p: JsonlSessionRepo(p / "r").create(session_id="../x"), "SessionError invalid_entry", "invalid session id"),
    Case("API", "open an unknown session id", lambda p: JsonlSessionRepo(p / "r").open("nope"), "SessionError not_found", "session nope not found"),
    Case("API", "fork at an unknown position", lambda p: (lambda r: r.fork(r.create().id, position="middle"))(JsonlSessionRepo(p / "r")), "SessionError invalid_fork_target", "'before' or 'at'"),
    Case("API", "fork before an assistant message", lambda p: _fork_before_assistant(p), "SessionError invalid_fork_target", "not a user message"),
    Case("API", "append to a session opened in salvage mode", lambda p: Session(JsonlSessionStorage.open(session(p).storage.path, salvage=True)).append_message(kit.user("x")), "SessionError storage", "read-only"),  # type: ignore[attr-defined]
    Case("API", "append through a repository that was closed", lambda p: _closed_repo(p), "SessionError storage", "repository was closed"),
    Case("API", "verify something that is not a log", lambda p: verify(42), "TypeError", "verify needs"),
    Case("API", "an HMAC checkpoint key shorter than 16 bytes", lambda p: sign_checkpoint(session(p), b"short"), "ValueError", "at least 16 bytes"),
    Case("API", "a checkpoint key given as str", lambda p: sign_checkpoint(session(p), "password"), "TypeError", "bytes, not str"),
    # file contents
    Case("file", "an empty file", file_with(end=b""), "SessionError corrupt", "the file is empty"),
    Case("file", "a first line that is not a header", file_with(ENTRY), "SessionError corrupt", "not a session header"),
    Case("file", "a header of an unknown format version", file_with(HEADER.replace(b'"version":3', b'"version":9')), "SessionError unsupported_version", "version 9"),
    Case("file", "a line that is not JSON", file_with(HEADER, b"{not json"), "SessionError corrupt", "invalid JSON"),
    Case("file", "invalid UTF-8 inside a line", file_with(HEADER, ENTRY.replace(b"hi", b"h\xff")), "SessionError corrupt", "bad.jsonl:2: invalid JSON (Invalid UTF-8"),
    Case("file", "a line that is JSON but not an object", file_with(HEADER, b"[1, 2]"), "SessionError corrupt", "must be a JSON object"),
    Case("file", "an entry whose parent is not on an earlier line", file_with(HEADER, ENTRY.replace(b'"parent_id":null', b'"parent_id":"ghost"')), "SessionError corrupt", "unknown parent 'ghost'"),
    Case("file", "two entries with one id", file_with(HEADER, ENTRY, ENTRY.replace(b'"parent_id":null', b'"parent_id":"e1"')), "SessionError corrupt", "duplicate entry id"),
    Case("file", "a second header", file_with(HEADER, HEADER), "SessionError corrupt", "bad.jsonl:2: a second session header"),
    Case("file", "a field of the wrong type (thinking level 5)", file_with(HEADER, b'{"type":"thinking_level_change","id":"t1","parent_id":null,"timestamp":"2026-01-01T00:00:01.000Z","thinking_level":5}'), "SessionError corrupt", "thinking_level_change entry 't1' is malformed"),
    Case("file", "JSON nested thousands of levels deep", file_with(HEADER, ENTRY[:-1] + b',"x":' + b"[" * 5000 + b"]" * 5000 + b"}"), "SessionError corrupt", "depth"),
    Case("file", "a line over the size limit (64 MiB; 1000 bytes here)", over_limit, "SessionError corrupt", "line limit"),
    Case("file", "a torn last line (a crash mid-append)", file_with(HEADER, ENTRY, b'{"type":"mess', end=b""), "warning", "torn last line"),
    Case("file", "an edited line in a chained file (reading does not check; verify does)", tampered, "verify problem", "does not match its chain digest"),
    # URLs
    Case("URL", "an unknown scheme (ftp://x)", lambda p: open_repo("ftp://x"), "SessionError storage", "unknown repository URL scheme"),
    Case("URL", "a host in a sqlite: URL", lambda p: open_repo("sqlite://host/x.db"), "SessionError storage", "a host is not allowed"),
    Case("URL", "jsonl: with no path", lambda p: open_repo("jsonl:"), "SessionError storage", "names no path"),
    Case("URL", "a PostgreSQL port that is not a number", lambda p: open_repo("postgresql://u@h:port/db"), "SessionError storage", "port is not a number"),
    Case("URL", "a PostgreSQL URL without a database", lambda p: open_repo("postgresql://u@h:5432/"), "SessionError storage", "name the database"),
    Case("URL", "a *_TOPIC setting in a URL (code to import)", lambda p: open_repo("postgresql://u@h:5432/db?get_password_topic=os:getcwd"), "SessionError storage", "names code to import"),
    Case("URL", "an unreachable PostgreSQL server, password in the URL", lambda p: open_repo("postgresql://u:s3cret@127.0.0.1:1/db?connect_timeout=1").create(), "SessionError storage", "127.0.0.1:1"),
    Case("URL", "a URL that is not a string", lambda p: open_repo(42), "TypeError", "non-empty str or path"),
    # command line
    Case("command line", "sessiontree frobnicate (unknown command)", cli("frobnicate"), "exit 1", "invalid choice: 'frobnicate'"),
    Case("command line", "sessiontree replay --to abc", cli("replay", "--to", "abc"), "exit 1", "invalid int value"),
    Case("command line", "sessiontree label (missing argument)", cli("label"), "exit 1", "arguments are required"),
    Case("command line", "sessiontree ls --repo ftp://x", cli("ls", "--repo", "ftp://x"), "exit 1", "unknown repository URL scheme"),
    Case("command line", "sessiontree show with no repository here", cli("show"), "exit 1", "no session repository"),
    Case("command line", "sessiontree verify missing.jsonl", cli("verify", "missing.jsonl"), "exit 1", "no such file or directory"),
    Case("command line", "sessiontree export --format docx", cli("export", "--format", "docx"), "exit 1", "invalid choice: 'docx'"),
]


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def _clashing(place: Path) -> Any:
    from sessiontree.domain.messages import Extra

    s = session(place)
    entry = s.get_entries()[0]
    clash = attrs.evolve(entry, originator_version=3, id="c1", parent_id=entry.id, extra=Extra({"chain": "x"}, frozenset()))
    s.storage.save([clash])


def _fork_before_assistant(place: Path) -> Any:
    repo = JsonlSessionRepo(place / "r")
    s = repo.create()
    return repo.fork(s.id, s.append_message(assistant()), "before")


def _closed_repo(place: Path) -> Any:
    repo = open_repo(f"sqlite:///{place / 's.db'}")
    s = repo.create()
    repo.close()
    s.append_message(kit.user("x"))


# -- running them -------------------------------------------------------------------------------


def outcome(case: Case, place: Path, capsys: Any, monkeypatch: Any) -> tuple[str, str]:
    """What the user gets: the kind of failure and its message."""
    monkeypatch.chdir(place)
    monkeypatch.delenv("SESSIONTREE_REPO", raising=False)
    try:
        result = case.run(place)
    except SessionError as exc:
        return f"SessionError {exc.code}", str(exc)
    except Warning as exc:
        return "warning", str(exc)
    except Exception as exc:
        return type(exc).__name__, str(exc)
    if isinstance(result, tuple) and result and result[0] == "cli":
        from sessiontree.cli import main

        capsys.readouterr()
        status = main(list(result[1]))
        err = capsys.readouterr().err.strip()
        return f"exit {status}", err
    if hasattr(result, "problems") and result.problems:
        return "verify problem", str(result.problems[0])
    return "no error", repr(result)[:200]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.area}: {c.what}" for c in CASES])
def test_bad_input_fails_clearly(case: Case, tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    """The input fails in the documented way, with a message that says what is wrong."""
    kind, message = outcome(case, tmp_path, capsys, monkeypatch)
    assert kind == case.expect, message
    assert case.says in message, message
    assert "Traceback" not in message
    assert "s3cret" not in message  # a password never appears
    faults.record("bad_input", area=case.area, what=case.what, kind=kind, message=message.replace(str(tmp_path), "…"))


def test_every_case_is_in_the_documentation() -> None:
    """docs/reliability.md lists every row of the table above."""
    text = DOC.read_text(encoding="utf-8")
    missing = [c.what for c in CASES if c.what.replace("|", "\\|") not in text]
    assert not missing, missing
