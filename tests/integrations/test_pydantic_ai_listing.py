"""SessionTreeConversationStore conforms to pydantic-ai's ConversationStore, on every backend: scope, listing, delete
and reading entries, which thread each call runs on, and a property test against pydantic-ai's own reference store
(``InMemoryConversationStore``) over any run of saves, branches, switches, rewrites and forks.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import ConnectionPoolClosedError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import (
    ConversationConflict,
    ConversationStore,
    InMemoryConversationStore,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai_kit import cid, run, saved, turn

from sessiontree import SessionError, open_repo
from sessiontree.integrations.pydantic_ai import SessionTreeConversationStore
from sessiontree.repository import SessionRepo

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
