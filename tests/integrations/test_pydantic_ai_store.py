"""SessionTreeConversationStore conforms to pydantic-ai's ConversationStore, on every backend: loading and saving,
revisions and conflicts, branches and forks (scope, listing, delete, entries and the reference-store property are in
test_pydantic_ai_listing.py). The behaviours are those of pydantic-ai's reference store (``InMemoryConversationStore``)
and of the ``ConversationStore`` methods built on the five primitives.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart
from pydantic_ai.usage import RunUsage
from pydantic_ai_kit import cid, run, saved, texts, turn

from sessiontree.integrations.pydantic_ai import SessionTreeConversationStore
from sessiontree.repository import SessionRepo

# -- load and save -----------------------------------------------------------------------------


def test_an_unknown_conversation_loads_as_none(store: SessionTreeConversationStore) -> None:
    """No record, no entries: load, load_entries and read_record all answer None."""
    assert run(store.load("nobody")) is None
    assert run(store.load_entries("nobody")) is None
    assert run(store.read_record("nobody")) is None


def test_saved_messages_load_back_equal_with_entries_and_revision(store: SessionTreeConversationStore) -> None:
    """A save stores each message once, as an entry chained to the one before; load gives them back equal."""
    conversation = Conversation(conversation_id=cid(), messages=turn("hi", "hello") + turn("more", "sure"))
    entries = run(store.save(conversation))
    assert [e.message for e in entries] == conversation.messages
    assert [e.parent_id for e in entries] == [None] + [e.id for e in entries[:-1]]
    loaded = run(store.load(conversation.conversation_id))
    assert loaded == conversation and loaded.revision == conversation.revision is not None
    assert loaded.new_message_index == 4
    assert run(store.load_entries(conversation.conversation_id)) == entries
    assert run(store.read_record(conversation.conversation_id)).head_id == entries[-1].id


def test_a_save_appends_only_what_is_new(store: SessionTreeConversationStore) -> None:
    """A loaded conversation, extended and saved, stores just the new messages; a save with nothing new stores none."""
    loaded = run(saved(store, cid(), ("one", "1")))
    first = run(store.load_entries(loaded.conversation_id))
    loaded.messages.extend(turn("two", "2"))
    new = run(store.save(loaded))
    assert [e.parent_id for e in new] == [first[-1].id, new[0].id]
    assert run(store.save(loaded)) == []
    assert texts(run(store.load(loaded.conversation_id))) == ["one", "1", "two", "2"]


def test_load_with_a_limit_gives_the_last_messages(store: SessionTreeConversationStore) -> None:
    """limit=n loads the last n messages; a negative limit is a UserError."""
    loaded = run(saved(store, cid(), ("one", "1"), ("two", "2")))
    assert texts(run(store.load(loaded.conversation_id, limit=3))) == ["1", "two", "2"]
    assert texts(run(store.load(loaded.conversation_id, limit=0))) == []
    with pytest.raises(UserError):
        run(store.load(loaded.conversation_id, limit=-1))


def test_the_record_keeps_usage_and_deferred_tool_requests(store: SessionTreeConversationStore) -> None:
    """What the messages cannot carry (usage, deferred tool requests) is in the record, read back equal."""
    from pydantic_ai.tools import DeferredToolRequests

    call = ToolCallPart("approve", {"x": 1}, tool_call_id="c1")
    deferred = DeferredToolRequests(approvals=[call])
    conversation = Conversation(conversation_id=cid(), messages=[ModelRequest.user_text_prompt("go"), ModelResponse(parts=[call])],
                                usage=RunUsage(input_tokens=7, output_tokens=3, requests=1), deferred_tool_requests=deferred)
    run(store.save(conversation))
    loaded = run(store.load(conversation.conversation_id))
    assert loaded.usage == RunUsage(input_tokens=7, output_tokens=3, requests=1)
    assert loaded.deferred_tool_requests == deferred


# -- revisions and conflicts ------------------------------------------------------------------


def test_a_stale_save_is_a_conflict_and_writes_nothing(store: SessionTreeConversationStore, repo: SessionRepo) -> None:
    """Two copies loaded at the same revision: the first save wins, the second is ConversationConflict."""
    first = run(saved(store, cid(), ("one", "1")))
    second = run(store.load(first.conversation_id))
    first.messages.extend(turn("two", "2"))
    run(store.save(first))
    before = repo.open(first.conversation_id).version
    second.messages.extend(turn("other", "x"))
    with pytest.raises(ConversationConflict):
        run(store.save(second))
    assert repo.open(first.conversation_id).version == before
    assert texts(run(store.load(first.conversation_id))) == ["one", "1", "two", "2"]


def test_a_new_conversation_with_a_taken_id_is_a_conflict(store: SessionTreeConversationStore) -> None:
    """A conversation not loaded from the store (revision None) cannot be saved over a stored one."""
    stored = run(saved(store, cid(), ("one", "1")))
    with pytest.raises(ConversationConflict):
        run(store.save(Conversation(conversation_id=stored.conversation_id, messages=turn("x", "y"))))


def test_write_record_checks_the_expected_revision(store: SessionTreeConversationStore) -> None:
    """The primitive itself: a wrong revision, or None for a stored record, is a conflict."""
    stored = run(saved(store, cid(), ("one", "1")))
    record = run(store.read_record(stored.conversation_id))
    for expected in ("not-the-revision", None):
        with pytest.raises(ConversationConflict):
            run(store.write_record(ConversationRecord(conversation_id=stored.conversation_id, head_id=record.head_id),
                                   expected_revision=expected))
    assert run(store.read_record(stored.conversation_id)) == record


def test_a_head_no_entry_holds_is_a_conflict(store: SessionTreeConversationStore, repo: SessionRepo) -> None:
    """A record whose head names an entry neither the store nor the save has is refused, and nothing is left behind."""
    with pytest.raises(ConversationConflict):
        run(store.write_record(ConversationRecord(conversation_id="orphan", head_id="nowhere"), expected_revision=None))
    stored = run(saved(store, cid(), ("one", "1")))
    revision = stored.revision
    lost = ConversationEntry(parent_id="nowhere", message=ModelRequest.user_text_prompt("x"))
    with pytest.raises(ConversationConflict):
        run(store.write_record(ConversationRecord(conversation_id=stored.conversation_id, head_id=lost.id),
                               new_entries=[lost], expected_revision=revision))
    assert not repo.exists("orphan")
    assert run(store.read_record(stored.conversation_id)).revision == revision


def test_the_record_written_is_the_record_read(store: SessionTreeConversationStore) -> None:
    """write_record then read_record: the same record, field for field (revision and updated_at included)."""
    entry = ConversationEntry(parent_id=None, message=ModelRequest.user_text_prompt("hi"))
    record = ConversationRecord(conversation_id=cid(), head_id=entry.id, usage=RunUsage(requests=2), branches=[entry.id])
    run(store.write_record(record, new_entries=[entry], expected_revision=None))
    assert run(store.read_record(record.conversation_id)) == record
    assert run(store.read_entry(entry.id)) == entry


def test_a_change_made_outside_the_store_changes_the_revision(store: SessionTreeConversationStore, repo: SessionRepo) -> None:
    """The revision follows the session's version: a leaf moved with sessiontree makes a loaded copy stale."""
    loaded = run(saved(store, cid(), ("one", "1")))
    entries = run(store.load_entries(loaded.conversation_id))
    session = repo.open(loaded.conversation_id)
    session.move_to(entries[0].id)
    session.close()
    assert run(store.read_record(loaded.conversation_id)).head_id == entries[0].id
    loaded.messages.extend(turn("two", "2"))
    with pytest.raises(ConversationConflict):
        run(store.save(loaded))
    assert texts(run(store.load(loaded.conversation_id))) == ["one"]


def test_two_stores_on_one_repository_see_each_others_saves(repo: SessionRepo) -> None:
    """Two store objects (two processes, say) share the revisions: a stale one is refused, a reloaded one saves."""
    a, b = SessionTreeConversationStore(repo), SessionTreeConversationStore(repo)
    loaded_a = run(saved(a, cid(), ("one", "1")))
    loaded_b = run(b.load(loaded_a.conversation_id))
    loaded_a.messages.extend(turn("a", "a"))
    run(a.save(loaded_a))
    loaded_b.messages.extend(turn("b", "b"))
    with pytest.raises(ConversationConflict):
        run(b.save(loaded_b))
    again = run(b.load(loaded_a.conversation_id))
    again.messages.extend(turn("b", "b"))
    run(b.save(again))
    assert texts(run(a.load(loaded_a.conversation_id))) == ["one", "1", "a", "a", "b", "b"]


def test_concurrent_saves_of_one_conversation_let_exactly_one_win(store: SessionTreeConversationStore) -> None:
    """Saves of two copies run at once on one store: one is stored, the other is a conflict."""
    loaded = run(saved(store, cid(), ("one", "1")))

    async def race() -> list[Any]:
        copies = [await store.load(loaded.conversation_id) for _ in range(2)]
        for index, copy in enumerate(copies):
            copy.messages.extend(turn(f"q{index}", f"a{index}"))
        return await asyncio.gather(*(store.save(c) for c in copies), return_exceptions=True)

    outcomes = run(race())
    assert sorted(type(o).__name__ for o in outcomes) == ["ConversationConflict", "list"]
    assert len(texts(run(store.load(loaded.conversation_id)))) == 4


# -- branches and forks -------------------------------------------------------------------------


def test_branch_moves_the_head_and_keeps_the_branch_it_leaves(store: SessionTreeConversationStore) -> None:
    """branch(at=n) keeps n messages; the old tip is listed in branches; from_entry switches back; a turn goes on the branch."""
    loaded = run(saved(store, cid(), ("one", "1"), ("two", "2")))
    old = run(store.load_entries(loaded.conversation_id))
    branched = run(store.branch(loaded.conversation_id, at=2, expected_revision=loaded.revision))
    assert texts(branched) == ["one", "1"]
    record = run(store.read_record(loaded.conversation_id))
    assert record.head_id == old[1].id and record.branches == [old[-1].id]
    branched.messages.extend(turn("other", "x"))
    run(store.save(branched))
    assert texts(run(store.load(loaded.conversation_id))) == ["one", "1", "other", "x"]
    current = run(store.load(loaded.conversation_id))
    back = run(store.branch(loaded.conversation_id, from_entry=old[-1].id, expected_revision=current.revision))
    assert texts(back) == ["one", "1", "two", "2"]
    record = run(store.read_record(loaded.conversation_id))
    assert record.head_id == old[-1].id and len(record.branches) == 1 and record.branches[0] != old[-1].id


def test_branch_checks_its_revision_and_range(store: SessionTreeConversationStore) -> None:
    """A branch from a stale copy is a conflict; at out of range, or an unknown entry, is a UserError."""
    loaded = run(saved(store, cid(), ("one", "1")))
    run(store.branch(loaded.conversation_id, at=1, expected_revision=loaded.revision))
    with pytest.raises(ConversationConflict):
        run(store.branch(loaded.conversation_id, at=0, expected_revision=loaded.revision))
    fresh = run(store.load(loaded.conversation_id))
    with pytest.raises(UserError):
        run(store.branch(loaded.conversation_id, at=5, expected_revision=fresh.revision))
    with pytest.raises(UserError):
        run(store.branch(loaded.conversation_id, from_entry="unknown", expected_revision=fresh.revision))
    with pytest.raises(UserError):
        run(store.branch("nobody", at=0, expected_revision=None))


def test_branch_to_the_start_empties_the_history(store: SessionTreeConversationStore) -> None:
    """at=0 leaves no messages; the next save starts a new root, and the old history is a branch."""
    loaded = run(saved(store, cid(), ("one", "1")))
    empty = run(store.branch(loaded.conversation_id, at=0, expected_revision=loaded.revision))
    assert empty.messages == [] and run(store.read_record(loaded.conversation_id)).head_id is None
    empty.messages.extend(turn("fresh", "start"))
    entries = run(store.save(empty))
    assert entries[0].parent_id is None
    assert texts(run(store.load(loaded.conversation_id))) == ["fresh", "start"]


def test_a_rewritten_history_branches_off_the_last_shared_message(store: SessionTreeConversationStore) -> None:
    """Saving messages that differ from the stored ones (no new_message_index) keeps the old ones as a branch."""
    loaded = run(saved(store, cid(), ("one", "1"), ("two", "2")))
    old = run(store.load_entries(loaded.conversation_id))
    rewritten = Conversation(conversation_id=loaded.conversation_id, revision=loaded.revision,
                             messages=loaded.messages[:2] + turn("edited", "e"))
    new = run(store.save(rewritten))
    assert new[0].parent_id == old[1].id
    assert run(store.read_record(loaded.conversation_id)).branches == [old[-1].id]
    assert texts(run(store.load(loaded.conversation_id))) == ["one", "1", "edited", "e"]


def test_fork_starts_a_new_conversation_from_a_point(store: SessionTreeConversationStore, repo: SessionRepo) -> None:
    """fork(at=n) makes a conversation with n messages (same entry ids), recording where it came from; the source is as it was."""
    loaded = run(saved(store, cid(), ("one", "1"), ("two", "2")))
    entries = run(store.load_entries(loaded.conversation_id))
    fork_id = cid()
    fork = run(store.fork(loaded.conversation_id, at=2, new_conversation_id=fork_id, scope="team"))
    assert texts(fork) == ["one", "1"]
    record = run(store.read_record(fork_id))
    assert (record.forked_from, record.forked_at, record.scope) == (loaded.conversation_id, entries[1].id, "team")
    assert run(store.load_entries(fork_id)) == entries[:2]
    fork.messages.extend(turn("fork", "f"))
    run(store.save(fork))
    assert texts(run(store.load(fork_id))) == ["one", "1", "fork", "f"]
    assert texts(run(store.load(loaded.conversation_id))) == ["one", "1", "two", "2"]
    assert repo.open(fork_id).header.parent_session is not None
    with pytest.raises(ConversationConflict):
        run(store.fork(loaded.conversation_id, new_conversation_id=fork_id))


def test_fork_from_a_left_branch_and_to_nothing(store: SessionTreeConversationStore, repo: SessionRepo) -> None:
    """from_entry may name an entry on a branch the conversation left; at=0 gives an empty fork."""
    loaded = run(saved(store, cid(), ("one", "1"), ("two", "2")))
    tip = run(store.load_entries(loaded.conversation_id))[-1]
    run(store.branch(loaded.conversation_id, at=2, expected_revision=loaded.revision))
    fork = run(store.fork(loaded.conversation_id, from_entry=tip.id))
    assert texts(fork) == ["one", "1", "two", "2"]
    empty = run(store.fork(loaded.conversation_id, at=0))
    assert empty.messages == [] and run(store.read_record(empty.conversation_id)).forked_from == loaded.conversation_id
    parents = {repo.open(c).header.parent_session for c in (fork.conversation_id, empty.conversation_id)}
    assert len(parents) == 1 and loaded.conversation_id in parents.pop()  # the id, or (JSONL) the file's path
    empty.messages.extend(turn("new", "n"))
    run(store.save(empty))
    assert texts(run(store.load(empty.conversation_id))) == ["new", "n"]


def test_a_fork_outlives_its_source(store: SessionTreeConversationStore) -> None:
    """A fork holds its own copy of the history it shares: deleting the source leaves it whole."""
    loaded = run(saved(store, cid(), ("one", "1")))
    fork = run(store.fork(loaded.conversation_id))
    run(store.delete(loaded.conversation_id))
    assert run(store.load(loaded.conversation_id)) is None
    assert texts(run(store.load(fork.conversation_id))) == ["one", "1"]
