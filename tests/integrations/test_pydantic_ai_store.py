"""SessionTreeConversationStore conforms to pydantic-ai's ConversationStore, on every backend.

The behaviours are those of pydantic-ai's reference store (``InMemoryConversationStore``) and of the ``ConversationStore``
methods built on the five primitives: conflicts, branches, forks, head moves, listing by scope and limit, delete, and
reading entries. Each test runs on JSONL, memory, SQLite and PostgreSQL repositories.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import sessiontree_pg as pg
from eventsourcing.persistence import ConnectionPoolClosedError
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationEntry,
    ConversationRecord,
    ConversationStore,
    InMemoryConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.usage import RunUsage

from sessiontree import SessionError, open_repo
from sessiontree.integrations.pydantic_ai import SessionTreeConversationStore
from sessiontree.repository import SessionRepo

BACKENDS = ["jsonl", "memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def repo(request: Any, tmp_path: Path) -> Iterator[SessionRepo]:
    if request.param == "postgres":
        with pg.temp_schema("pyai") as schema:
            repo = open_repo(pg.url(schema))
            yield repo
            repo.close()
        return
    url = {"jsonl": str(tmp_path / "sessions"), "memory": "memory:", "sqlite": f"sqlite:///{tmp_path / 's.db'}"}
    repo = open_repo(url[request.param])
    yield repo
    repo.close()


@pytest.fixture
def store(repo: SessionRepo) -> SessionTreeConversationStore:
    return SessionTreeConversationStore(repo)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def cid() -> str:
    return f"conv-{uuid.uuid4().hex[:12]}"  # unique per test, so PostgreSQL runs never meet


def turn(question: str, answer: str) -> list[Any]:
    return [ModelRequest.user_text_prompt(question), ModelResponse(parts=[TextPart(answer)])]


async def saved(store: SessionTreeConversationStore, conversation_id: str, *turns: tuple[str, str], scope: str | None = None
                ) -> Conversation:
    """A conversation saved turn by turn, as an app saves after each run; returned as loaded."""
    conversation = Conversation(conversation_id=conversation_id)
    for question, answer in turns:
        conversation.messages.extend(turn(question, answer))
        await store.save(conversation, scope=scope)
    loaded = await store.load(conversation_id, scope=scope)
    assert loaded is not None
    return loaded


def texts(conversation: Conversation | None) -> list[str]:
    assert conversation is not None
    out = []
    for message in conversation.messages:
        part = message.parts[0]
        out.append(getattr(part, "content", ""))
    return out


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


# -- scope, listing, delete, entries -------------------------------------------------------------


def test_scope_keeps_a_conversation_to_its_owner(store: SessionTreeConversationStore, repo: SessionRepo) -> None:
    """Another scope does not load, save over or delete it; the scope is in the session's header metadata."""
    loaded = run(saved(store, cid(), ("one", "1"), scope="alice"))
    assert dict(repo.open(loaded.conversation_id).header.metadata) == {"pydantic_ai": {"scope": "alice"}}
    assert run(store.load(loaded.conversation_id, scope="bob")) is None
    assert run(store.load(loaded.conversation_id, scope="alice")) is not None
    loaded.messages.extend(turn("two", "2"))
    with pytest.raises(ConversationConflict):
        run(store.save(loaded, scope="bob"))
    run(store.delete(loaded.conversation_id, scope="bob"))
    assert run(store.read_record(loaded.conversation_id)).scope == "alice"


def test_list_conversations_is_newest_first_by_scope_and_limit(store: SessionTreeConversationStore) -> None:
    """Records are listed newest save first, filtered by scope, at most limit of them."""
    ids = [cid() for _ in range(3)]
    for index, conversation_id in enumerate(ids):
        run(saved(store, conversation_id, ("q", "a"), scope="even" if index % 2 == 0 else "odd"))
    listed = [r.conversation_id for r in run(store.list_conversations())]
    assert listed == ids[::-1]
    assert [r.conversation_id for r in run(store.list_conversations(scope="even"))] == [ids[2], ids[0]]
    assert [r.conversation_id for r in run(store.list_conversations(limit=2))] == [ids[2], ids[1]]
    assert run(store.list_conversations(limit=0)) == []
    assert run(store.list_conversations(scope="nobody")) == []
    with pytest.raises(UserError):
        run(store.list_conversations(limit=-1))


def test_sessions_not_made_by_the_store_are_not_conversations(store: SessionTreeConversationStore, repo: SessionRepo) -> None:
    """Other sessions in the repository are not listed or loaded, and their ids cannot be taken over."""
    other = repo.create(session_id=cid())
    assert run(store.read_record(other.id)) is None
    assert run(store.list_conversations()) == []
    with pytest.raises(ConversationConflict):
        run(store.save(Conversation(conversation_id=other.id, messages=turn("x", "y"))))


def test_delete_removes_the_session_and_a_new_one_gets_a_new_revision(store: SessionTreeConversationStore, repo: SessionRepo) -> None:
    """Deleted: not loaded, not listed, its session gone; created again under the id, a copy loaded before cannot save."""
    loaded = run(saved(store, cid(), ("one", "1")))
    run(store.delete(loaded.conversation_id))
    assert run(store.load(loaded.conversation_id)) is None
    assert run(store.list_conversations()) == []
    assert not repo.exists(loaded.conversation_id)
    run(store.delete(loaded.conversation_id))  # deleting what is not there is not an error
    run(saved(store, loaded.conversation_id, ("again", "2")))
    loaded.messages.extend(turn("two", "2"))
    with pytest.raises(ConversationConflict):
        run(store.save(loaded))


def test_delete_record_checks_the_revision(store: SessionTreeConversationStore) -> None:
    """The primitive: a stale or unknown conversation is a conflict, and nothing is deleted."""
    loaded = run(saved(store, cid(), ("one", "1")))
    with pytest.raises(ConversationConflict):
        run(store.delete_record(loaded.conversation_id, expected_revision="stale"))
    with pytest.raises(ConversationConflict):
        run(store.delete_record("nobody", expected_revision=loaded.revision))
    assert run(store.load(loaded.conversation_id)) is not None


def test_read_entry_finds_entries_from_a_cold_store_and_refuses_unknown_ids(repo: SessionRepo) -> None:
    """A store that has read nothing finds an entry by id; an id no conversation holds is a KeyError (a LookupError)."""
    store = SessionTreeConversationStore(repo)
    loaded = run(saved(store, cid(), ("one", "1")))
    entries = run(store.load_entries(loaded.conversation_id))
    cold = SessionTreeConversationStore(repo)
    assert run(cold.read_entry(entries[-1].id)) == entries[-1]
    with pytest.raises(KeyError):
        run(cold.read_entry("no-such-entry"))
    assert run(cold.read_history(entries[-1].id)) == entries


def test_store_takes_a_repository_url_and_closes_only_what_it_opened(tmp_path: Path) -> None:
    """repo may be a URL for open_repo (close() closes it); a repository passed in stays open; anything else is a TypeError."""
    store = SessionTreeConversationStore(f"sqlite:///{tmp_path / 'convs.db'}")
    run(saved(store, "by-url", ("one", "1")))
    store.close()
    with pytest.raises((SessionError, ConnectionPoolClosedError)):  # the pool is closed
        store.repo.open("by-url")
    repo = open_repo(str(tmp_path / "convs"))
    SessionTreeConversationStore(repo).close()
    run(saved(SessionTreeConversationStore(repo), "kept-open", ("one", "1")))
    assert (tmp_path / "convs" / "kept-open.jsonl").is_file()
    with pytest.raises(TypeError):
        SessionTreeConversationStore(42)  # type: ignore[arg-type]


def test_a_tool_turn_keeps_its_parts(store: SessionTreeConversationStore) -> None:
    """A tool call and its return are stored and loaded equal (their mapping is tested in test_pydantic_ai.py)."""
    messages = [ModelRequest.user_text_prompt("add"), ModelResponse(parts=[ToolCallPart("add", {"a": 1}, tool_call_id="t")]),
                ModelRequest(parts=[ToolReturnPart("add", 1, tool_call_id="t")]), ModelResponse(parts=[TextPart("1")])]
    conversation = Conversation(conversation_id=cid(), messages=messages)
    run(store.save(conversation))
    assert run(store.load(conversation.conversation_id)).messages == messages


# -- against the reference store, as a property ----------------------------------------------------

_ops = st.lists(
    st.tuples(st.just("turn"), st.integers(0, 9), st.text(max_size=3))
    | st.tuples(st.just("branch"), st.integers(0, 20), st.just(""))
    | st.tuples(st.just("switch"), st.integers(0, 5), st.just(""))
    | st.tuples(st.just("rewrite"), st.integers(0, 20), st.text(max_size=3))
    | st.tuples(st.just("fork"), st.integers(0, 20), st.just("")),
    max_size=8,
)


async def _apply(store: ConversationStore, op: tuple[str, int, str], messages: list[Any]) -> None:
    """One app action on conversation "c" (the same messages, the same choices, whatever the store)."""
    kind, number, _ = op
    loaded = await store.load("c")
    if kind == "turn":
        conversation = loaded or Conversation(conversation_id="c")
        conversation.messages.extend(messages)
        await store.save(conversation)
    elif loaded is None:
        return
    elif kind == "branch":
        await store.branch("c", at=number % (len(loaded.messages) + 1), expected_revision=loaded.revision)
    elif kind == "switch":
        branches = (await store.read_record("c")).branches  # type: ignore[union-attr]
        if branches:
            await store.branch("c", from_entry=branches[number % len(branches)], expected_revision=loaded.revision)
    elif kind == "rewrite" and loaded.messages:
        kept = loaded.messages[: number % len(loaded.messages)]
        await store.save(Conversation(conversation_id="c", revision=loaded.revision, messages=kept + messages))
    elif kind == "fork":
        await store.fork("c", at=number % (len(loaded.messages) + 1), new_conversation_id=f"f{number}-{len(loaded.messages)}")


async def _seen(store: ConversationStore) -> list[Any]:
    """What an app can see: each conversation's messages, and the messages of each branch it left, in order."""
    out = []
    for record in sorted(await store.list_conversations(), key=lambda r: r.conversation_id):
        loaded = await store.load(record.conversation_id)
        left = [[e.message for e in await store.read_history(tip)] for tip in record.branches]
        out.append((record.conversation_id, loaded.messages if loaded else None, left, record.forked_from))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
def test_the_store_behaves_as_the_reference_store(ops: list[tuple[str, int, str]]) -> None:
    """Any run of saves, branches, switches, rewrites and forks leaves the same conversations as InMemoryConversationStore."""
    ours, reference = SessionTreeConversationStore(open_repo("memory:")), InMemoryConversationStore()

    async def both() -> None:
        for op in ops:
            messages = turn(f"q{op[1]}{op[2]}", "a") if op[0] in ("turn", "rewrite") else []
            for store in (ours, reference):
                try:
                    await _apply(store, op, messages)
                except ConversationConflict:
                    pass  # a fork id used twice: both stores refuse it
            assert await _seen(ours) == await _seen(reference)

    run(both())


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_file_reads_of_known_conversations_run_inline_and_the_rest_in_a_worker_thread(backend: str, tmp_path: Path) -> None:
    """On files, a save of a conversation the store has read runs on the event loop's thread; a first read, a listing
    and every database call run in a worker thread, so the loop never waits for them."""
    repo = open_repo(str(tmp_path / "s") if backend == "jsonl" else f"sqlite:///{tmp_path / 's.db'}")
    threads: list[tuple[str, bool]] = []
    opened = repo.open

    def open_and_note(session_id: str, **kwargs: Any) -> Any:
        threads.append((session_id, threading.current_thread() is threading.main_thread()))
        return opened(session_id, **kwargs)

    repo.open = open_and_note  # type: ignore[method-assign]
    run(saved(SessionTreeConversationStore(repo), "known", ("one", "1")))
    store = SessionTreeConversationStore(repo)

    async def calls() -> None:
        loaded = await store.load("known")  # first read: the whole log
        loaded.messages.extend(turn("two", "2"))
        await store.save(loaded)  # read_record and write_record of a known conversation
        await store.list_conversations()

    threads.clear()
    run(calls())
    inline = backend == "jsonl"
    assert threads == [("known", False), ("known", inline), ("known", inline), ("known", False)]
    repo.close()
