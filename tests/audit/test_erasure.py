"""Erasure (issue 22): ``session.redact`` on every backend keeps verify passing, names the redaction, and any other
change still fails; the context shows a placeholder; signed checkpoints stay valid; pi files are refused unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import AssistantMessage, Session, SessionError, TextContent, ToolCall, ToolResultMessage, UserMessage
from sessiontree.audit.checkpoints import sign_checkpoint
from sessiontree.audit.erasure import PLACEHOLDER, RECORD_TYPE
from sessiontree.audit.verify import verify
from sessiontree.storage.jsonl import JsonlSessionStorage

SECRET = "the customer's address is 12 Long Road"


def conversation(session: Any) -> dict[str, str]:
    ids = {"user": session.append_message(UserMessage(SECRET))}
    ids["call"] = session.append_message(AssistantMessage(
        [TextContent(f"looking up {SECRET}"), ToolCall(id="t1", name="lookup", arguments={"q": SECRET})],
        provider="p", model="m"))
    ids["result"] = session.append_message(ToolResultMessage(
        tool_call_id="t1", tool_name="lookup", content=[TextContent(SECRET)], details={"raw": SECRET}))
    ids["answer"] = session.append_message(AssistantMessage([TextContent("done")], provider="p", model="m"))
    return ids


def lines_of(session: Any) -> list[bytes]:
    return session.storage.read_lines()


def test_redact_on_every_backend(repo: Any) -> None:
    session = repo.create(cwd="/p")
    ids = conversation(session)
    before = [m.role if hasattr(m, "role") else None for m in session.build_context().messages]
    record = session.redact(ids["call"], reason="customer asked", by="support")
    session.redact(ids["result"], reason="customer asked", by="support")
    assert not any(SECRET.encode() in line for line in lines_of(session)[2:4])
    report = verify(session)
    assert report.ok, report.problems
    assert [(r["entry_id"], r["reason"], r["by"]) for r in report.redactions] == [
        (ids["call"], "customer asked", "support"), (ids["result"], "customer asked", "support")]
    messages = session.build_context().messages
    assert [getattr(m, "role", None) for m in messages] == before  # the shape stays: roles and tool-call pairing
    assert messages[1].content[0].text == PLACEHOLDER and messages[1].content[1].id == "t1"
    assert messages[1].content[1].arguments == {}
    assert messages[2].tool_call_id == "t1" and messages[2].content[0].text == PLACEHOLDER and messages[2].details is None
    reopened = repo.open(session.id)
    assert reopened.build_context() == session.build_context()
    assert reopened.entry(record).custom_type == RECORD_TYPE
    # appending goes on after an erasure, and the chain holds
    session.close()
    reopened.append_message(UserMessage("more"))
    reopened.close()
    assert verify(repo.open(session.id)).ok


def test_any_other_change_still_fails_naming_the_first_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path))
    ids = conversation(session)
    session.redact(ids["user"], reason="r")
    session.close()
    good = path.read_bytes().split(b"\n")
    for n in (3, 4, 5):  # every other entry line
        bad = list(good)
        bad[n - 1] = bad[n - 1].replace(b'"lookup"', b'"Lookup"').replace(b'"done"', b'"DONE"')
        if bad[n - 1] == good[n - 1]:
            bad[n - 1] = bad[n - 1].replace(b'"p"', b'"q"', 1)
        path.write_bytes(b"\n".join(bad))
        report = verify(path)
        assert not report.ok and report.first_bad_line == n
    # a stub without its record (the record line removed) fails at the stub
    path.write_bytes(b"\n".join(good[:-2] + [b""]))
    report = verify(path)
    assert report.first_bad_line == 2 and "no later redaction record" in str(report.problems[0])
    # erasing a line by hand, even keeping its digest and marking it, fails without a record naming it
    path.write_bytes(b"\n".join(good))
    forged = good[2].replace(b'"looking up', b'"LOOKING up').replace(b',"chain"', b',"redacted":true,"chain"')
    path.write_bytes(b"\n".join([*good[:2], forged, *good[3:]]))
    assert verify(path).first_bad_line == 3


def test_signed_checkpoints_stay_valid(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path))
    ids = conversation(session)
    key = b"k" * 32
    checkpoint = sign_checkpoint(session, key)
    head = verify(path).head
    session.redact(ids["result"], reason="r")
    report = verify(path, key=key, checkpoints=[checkpoint], head=head)
    assert report.ok, report.problems
    assert report.anchored_at == 5 and report.checkpoints == 1  # the header and four entries, as signed


def test_an_interrupted_erasure_is_reported_and_completed_by_redacting_again(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path))
    ids = conversation(session)

    def crash(*args: Any) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("sessiontree.audit.line_replace.replace_in_file", crash)
    with pytest.raises(SessionError) as failed:
        session.redact(ids["user"], reason="r")
    assert failed.value.code == "storage"
    monkeypatch.undo()
    report = verify(path)
    assert report.ok and "was recorded here but its line still holds the content" in str(report.warnings)
    assert SECRET.encode() in path.read_bytes().split(b"\n")[1]
    session.close()
    session = Session(JsonlSessionStorage.open(path))
    record = session.redact(ids["user"], reason="r")
    assert session.redact(ids["user"], reason="again") == record  # done already: the same record, nothing written
    report = verify(path)
    assert report.ok and not report.warnings and len(report.redactions) == 1


def test_refusals_change_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path))
    ids = conversation(session)
    label = session.append_label_change(ids["user"], "first")
    before = path.read_bytes()
    for entry, reason, code in ((label, "r", "invalid_entry"), ("nope", "r", "not_found"), (ids["user"], " ", "invalid_entry")):
        with pytest.raises(SessionError) as refused:
            session.redact(entry, reason=reason)
        assert refused.value.code == code
    record = session.redact(ids["user"], reason="r")
    with pytest.raises(SessionError, match="redaction record"):
        session.redact(record, reason="r")
    assert path.read_bytes().startswith(before.split(b"\n")[0])


def test_a_pi_file_is_refused_unchanged(tmp_path: Path) -> None:
    from sessiontree import open_session
    from sessiontree.pi.pi_storage import PiSessionStorage

    path = tmp_path / "pi.jsonl"
    pi = Session(PiSessionStorage.create(path, cwd="/p"))
    entry = pi.append_message(UserMessage(SECRET))
    pi.append_message(AssistantMessage([TextContent("ok")], provider="p", model="m"))
    pi.close()
    before = path.read_bytes()
    with pytest.raises(SessionError, match="import the file") as refused:
        open_session(path).redact(entry, reason="r")
    assert refused.value.code == "storage"
    assert path.read_bytes() == before


def test_a_writer_on_the_old_file_is_told_to_reopen_instead_of_losing_its_append(tmp_path: Path) -> None:
    """A rewrite replaces the file: another object still open on the old one is refused at its next append (never
    writing into the unlinked file) and appends once it opens the file again."""
    path = tmp_path / "s.jsonl"
    first = Session(JsonlSessionStorage.create(path))
    ids = conversation(first)
    second = Session(JsonlSessionStorage.open(path))
    first.redact(ids["user"], reason="r")
    with pytest.raises(SessionError) as caught:
        second.append_message(UserMessage("from the second writer"))
    assert caught.value.code == "conflict" and "open it again" in caught.value.message
    first.append_message(UserMessage("the rewriter goes on"))
    again = Session(JsonlSessionStorage.open(path))
    again.append_message(UserMessage("after reopening"))
    assert verify(path).ok and [e.id for e in first.get_entries()] == [e.id for e in again.get_entries()]  # read on


@given(st.lists(st.sampled_from(["user", "call", "result", "answer"]), min_size=1, max_size=4, unique=True),
       st.integers(min_value=0, max_value=2))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_set_of_erasures_verifies_and_replays_as_the_live_session(tmp_path: Path, which: list[str], more: int) -> None:
    path = tmp_path / f"s{abs(hash((tuple(which), more)))}.jsonl"
    path.unlink(missing_ok=True)
    session = Session(JsonlSessionStorage.create(path))
    ids = conversation(session)
    for name in which:
        session.redact(ids[name], reason=f"erase {name}")
        for n in range(more):
            session.append_message(UserMessage(f"after {name} {n}"))
    report = verify(path)
    assert report.ok and {r["entry_id"] for r in report.redactions} == {ids[n] for n in which}
    assert Session(JsonlSessionStorage.open(path)).build_context() == session.build_context()
    assert (SECRET.encode() in path.read_bytes()) == (not {"user", "call", "result"} <= set(which))


def _chained_after(previous_line: bytes, canonical: bytes) -> bytes:
    """``canonical`` sealed after ``previous_line`` (what anyone can compute: the chain is plain SHA-256)."""
    from sessiontree.audit import chain

    return chain.seal(canonical, chain.recorded(previous_line) or b"")[0]


def test_a_forged_erasure_that_changes_content_fails(tmp_path: Path) -> None:
    """Rewriting a line with new content, marking it erased and appending a record that vouches for it is caught: a
    stub must hold nothing but the placeholder."""
    from sessiontree.audit import chain

    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path))
    ids = conversation(session)
    session.close()
    lines = path.read_bytes().split(b"\n")[:-1]
    canonical, digest = chain.split(lines[4])  # the answer "done"
    forged = canonical.replace(b'"done"', b'"YES, deploy now"')[:-1] + b',"redacted":true,"chain":"' + digest + b'"}'
    record = (b'{"type":"custom","id":"f0f0f0f0","parent_id":"' + ids["answer"].encode() + b'","timestamp":'
              b'"2026-01-01T00:00:00.000Z","custom_type":"sessiontree.redaction","data":{"entry_id":"'
              + ids["answer"].encode() + b'","version":5,"digest":"' + digest + b'","reason":"gdpr","by":"x"}}')
    path.write_bytes(b"\n".join([*lines[:4], forged, _chained_after(lines[4], record)]) + b"\n")
    report = verify(path)
    assert report.first_bad_line == 5 and "holds more than the placeholder" in str(report.problems[0])
    assert not report.redactions


def test_a_record_inside_a_stub_vouches_for_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path))
    ids = conversation(session)
    session.redact(ids["result"], reason="r")
    session.close()
    lines = path.read_bytes().split(b"\n")[:-1]
    # the stub of line 4 rewritten to also hold a "record" for line 3's entry, and line 3 changed and marked by hand
    forged_record = lines[3].replace(b'"redacted":true', b'"redacted":true,"custom_type":"sessiontree.redaction"')
    path.write_bytes(b"\n".join([lines[0], lines[1], lines[2].replace(b"looking up", b"LOOKING up").replace(
        b',"chain"', b',"redacted":true,"chain"'), forged_record, *lines[4:]]) + b"\n")
    report = verify(path)
    assert not report.ok and report.first_bad_line == 3


def test_records_are_the_librarys_own_and_no_redactor_rewrites_them(tmp_path: Path) -> None:
    import re

    def hex_tokens(text: str) -> str:  # an app's rule that would also match the digest a record vouches with
        return re.sub(r"\b[0-9a-f]{40,}\b", "[hex]", text)

    session = Session(JsonlSessionStorage.create(tmp_path / "s.jsonl"), redactors=[hex_tokens])
    ids = conversation(session)
    with pytest.raises(SessionError, match="reserved"):
        session.append_custom_entry(RECORD_TYPE, {"entry_id": ids["user"], "digest": "0" * 64})
    session.redact(ids["user"], reason="r")
    assert verify(tmp_path / "s.jsonl").ok


def test_an_erasure_after_the_last_signed_checkpoint_is_a_warning_until_signed_again(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path))
    ids = conversation(session)
    key = b"k" * 32
    first = sign_checkpoint(session, key)
    session.redact(ids["user"], reason="r")
    report = verify(path, key=key, checkpoints=[first])
    assert report.ok and "not signed yet" in str(report.warnings)
    second = sign_checkpoint(session, key)
    report = verify(path, key=key, checkpoints=[first, second])
    assert report.ok and "not signed yet" not in str(report.warnings)


def test_another_session_on_a_rewritten_file_is_told_to_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first = Session(JsonlSessionStorage.create(path))
    ids = conversation(first)
    other = Session(JsonlSessionStorage.open(path))
    first.redact(ids["user"], reason="r")
    with pytest.raises(SessionError) as refused:
        other.refresh()
    assert refused.value.code == "conflict" and "open it again" in refused.value.message


def test_a_session_held_open_elsewhere_never_keeps_erased_content_on_any_backend(make_repo: Any) -> None:
    """Another object holding the session (an integration's held session, a server's cache) is told to open it again
    after an erasure, on every backend: a database session read on as if nothing happened kept the erased content in
    memory. An erasure of another session in the same store is not this one's business."""
    repo = make_repo()
    first = repo.create()
    ids = conversation(first)
    other = repo.open(first.id)
    bystander = repo.create()
    bystander.append_message(UserMessage("nothing secret"))
    held_bystander = repo.open(bystander.id)
    first.redact(ids["user"], reason="r")
    with pytest.raises(SessionError) as refused:
        other.refresh()
    assert refused.value.code == "conflict" and "open it again" in refused.value.message
    assert SECRET not in str(repo.open(first.id).entry(ids["user"]))
    assert held_bystander.refresh() == 0 and bystander.refresh() == 0
    assert first.refresh() == 0  # the eraser read its own log again
    first.append_message(UserMessage("after"))
    assert verify(first).ok


def test_the_redaction_record_keeps_its_documented_type_on_disk(tmp_path: Path) -> None:
    """The record's type is a value in the logs (docs/audit.md), not a module's name: files written before a module
    moved must still vouch for their stubs, so the line says ``sessiontree.redaction`` whatever the package layout."""
    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path))
    ids = conversation(session)
    session.redact(ids["result"], reason="r")
    session.close()
    records = [line for line in path.read_bytes().split(b"\n") if b'"type":"custom"' in line]
    assert len(records) == 1 and b'"custom_type":"sessiontree.redaction"' in records[0]
    assert verify(path).ok
