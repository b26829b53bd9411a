"""The one pipeline every line goes through (storage/pipeline.py): redact -> encode -> outline -> seal on the way in,
inline -> decode on the way out, applied by the storage, on every backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
import sessiontree_testkit as kit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import JsonlSessionStorage, Session, UserMessage, verify
from sessiontree.domain import aggregate
from sessiontree.domain.erasure import RECORD_TYPE
from sessiontree.storage.pipeline import Redaction

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


def _stored(session: Any) -> bytes:
    return b"\n".join(session.storage.read_lines())


def test_a_writer_behind_another_stores_its_entry_redacted(make_repo: Any) -> None:
    """The writer that is behind catches up and its events are made again to follow the other writer's (``rebase``):
    what is written then, and what the live session folds, is the redacted entry, on every backend."""
    repo = make_repo()
    behind = repo.create()
    ahead = repo.open(behind.id)
    ahead.append_message(kit.user("the other writer's entry"))
    secret_id = behind.append_message(UserMessage(content=f"my key is {AWS_KEY}", timestamp=1))
    assert behind.version == 3  # after the other writer's entry
    assert AWS_KEY.encode() not in _stored(behind)
    live = behind.entry(secret_id)
    assert AWS_KEY not in live.message.content and "aws-access-key-id" in live.message.content
    assert repo.open(behind.id).entry(secret_id) == live  # the live session holds what the log holds
    assert verify(behind).ok


def test_several_entries_written_together_are_redacted_after_a_catch_up(make_repo: Any) -> None:
    """A move with a summary writes two entries in one append; behind another writer, both are made again and both
    are stored redacted."""
    repo = make_repo()
    behind = repo.create()
    root = behind.append_message(kit.user("root"))
    repo.open(behind.id).append_message(kit.user("the other writer's entry"))
    summary_id = behind.move_to(root, summary={"summary": f"we used {AWS_KEY}"})
    assert summary_id is not None and behind.version == 5
    assert AWS_KEY.encode() not in _stored(behind)
    assert AWS_KEY not in behind.entry(summary_id).summary
    assert repo.open(behind.id).entry(summary_id) == behind.entry(summary_id)


def test_the_storage_applies_the_redact_step_without_a_session(tmp_path: Path) -> None:
    """A feature hooks in through the pipeline, not through the Session: an app appending to a storage directly gets
    the redactors its pipeline was given."""
    storage = JsonlSessionStorage.create(tmp_path / "s.jsonl")
    storage.pipeline.redact_with("default")
    header, log = storage.load()
    agg = aggregate.replay(header, log)
    event = aggregate.append_message(agg, UserMessage(content=f"key {AWS_KEY}", timestamp=1), id="e1", timestamp=kit.T0_ISO)
    _, written = storage.append([event])
    assert AWS_KEY not in written[0].message.content
    assert AWS_KEY.encode() not in b"".join(storage.read_lines())
    storage.pipeline.redact_with(None)  # and none: the line holds what was given
    event = attrs.evolve(event, id="e2", originator_version=3, parent_id="e1")
    storage.append([event])
    assert AWS_KEY.encode() in storage.read_lines()[-1]
    storage.close()


def test_the_redaction_record_passes_by_the_redact_step(tmp_path: Path) -> None:
    """The record an erasure appends holds the digest it vouches with: a redactor that would rewrite it (here: every
    hex digit) must not touch it, or the erased line could not be verified."""
    session = Session(JsonlSessionStorage.create(tmp_path / "s.jsonl"), redactors=[lambda text: text.replace("a", "*")])
    entry = session.append_message(kit.user("banana"))
    assert "b*n*n*" in session.entry(entry).message.content[0].text  # the redactor runs on entries
    record_id = session.redact(entry, reason="asked to")
    record = session.entry(record_id)
    assert record.custom_type == RECORD_TYPE and "*" not in record.data["digest"]
    assert verify(session).ok


def test_a_custom_message_entry_named_as_the_redaction_record_is_redacted(make_repo: Any) -> None:
    """Only the library's own record (a custom entry) passes by the redact step: a custom *message* entry an app names
    ``sessiontree.redaction`` carries the app's text and is redacted like any other, on every backend."""
    repo = make_repo()
    session = repo.create()
    entry_id = session.append_custom_message_entry(RECORD_TYPE, f"my key is {AWS_KEY}")
    assert AWS_KEY.encode() not in _stored(session)
    assert AWS_KEY not in session.entry(entry_id).content
    assert repo.open(session.id).entry(entry_id) == session.entry(entry_id)
    assert verify(session).ok


def test_sessions_over_one_storage_each_redact_with_their_own_redactors(tmp_path: Path) -> None:
    """A Session's redactors are its own: another Session made over the same storage object (here one that redacts
    nothing) neither turns them off for the first one's appends nor makes its retry ``already_exists``."""
    storage = JsonlSessionStorage.create(tmp_path / "s.jsonl")
    redacting = Session(storage)
    plain = Session(storage, redactors=None)
    assert plain.redactors == () and redacting.redactors != ()
    message = UserMessage(content=f"my key is {AWS_KEY}", timestamp=1)
    assert redacting.append_message(message, entry_id="e1") == "e1"
    assert AWS_KEY.encode() not in _stored(redacting)
    assert redacting.append_message(message, entry_id="e1") == "e1"  # a retry: answered with the id, nothing written
    assert len(storage.read_lines()) == 2
    plain.refresh()
    other = plain.append_message(message)  # and the one without redactors writes what it was given
    assert AWS_KEY.encode() in storage.read_lines()[-1] and AWS_KEY in plain.entry(other).message.content
    storage.close()


@given(redactors=st.lists(st.sampled_from(["default", None]), min_size=1, max_size=3),
       appends=st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=1, max_size=8))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_each_session_over_a_shared_storage_stores_what_its_own_redactors_make(
    redactors: list[Any], appends: list[tuple[int, bool]], tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Whatever Sessions share one storage object, and in whatever order they append: each entry is stored redacted
    exactly when the Session that appended it redacts, and what each live session folded is what a fresh open reads."""
    path = tmp_path_factory.mktemp("shared") / "s.jsonl"
    storage = JsonlSessionStorage.create(path)
    sessions = [Session(storage, redactors=r) for r in redactors]
    written = []
    for which, secret in appends:
        session = sessions[which % len(sessions)]
        session.refresh()
        text = f"key {AWS_KEY}" if secret else "no key"
        entry_id = session.append_message(UserMessage(content=text, timestamp=1))
        written.append((session, entry_id, secret and redactors[which % len(sessions)] is None))
    fresh = Session(JsonlSessionStorage.open(path), redactors=None)
    for session, entry_id, kept in written:
        stored = fresh.entry(entry_id)
        assert (AWS_KEY in stored.message.content) == kept  # the key stays only where its writer does not redact
        assert session.entry(entry_id) == stored
    assert verify(fresh).ok
    fresh.close()
    storage.close()


def test_save_stores_the_events_as_given_on_every_backend(storage_factory: Any) -> None:
    """``save`` is the port's primitive on every backend: redaction is ``append``'s first step (the JSONL storage's
    save went through its append and redacted, the others did not)."""
    storage = storage_factory.create()
    storage.pipeline.redaction = Redaction("default")  # as a Session over it would set
    header, log = storage.load()
    agg = aggregate.replay(header, log)
    event = aggregate.append_message(agg, UserMessage(content=f"key {AWS_KEY}", timestamp=1), id="e1", timestamp=kit.T0_ISO)
    storage.save([event])
    assert AWS_KEY.encode() in storage.read_lines()[-1]
    _, written = storage.append([attrs.evolve(event, id="e2", originator_version=3, parent_id="e1")])
    assert AWS_KEY not in written[0].message.content and AWS_KEY.encode() not in storage.read_lines()[-1]


def test_a_fork_of_an_erased_session_keeps_the_record_as_it_was(make_repo: Any) -> None:
    """A fork or copy redacts what it writes with the repository's redactors, but the library's own redaction record
    passes by, as on append: a redactor that rewrote its digest turned it into a custom entry of another type."""
    repo = make_repo(redactors=[lambda text: text.replace("a", "*")])
    session = repo.create()
    entry = session.append_message(kit.user("banana"))
    session.append_message(kit.user("after"))
    record_id = session.redact(entry, reason="asked to")
    record = session.entry(record_id)
    fork = repo.fork(session.id, position="at")
    assert fork.entry(record_id).custom_type == RECORD_TYPE and fork.entry(record_id).data == record.data
