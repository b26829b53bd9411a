"""The storage contract: what every backend (``storage_factory``, see conftest.py) must do.

Only behaviour that is not file-specific lives here; torn lines, file modes and line
formats are in ``test_jsonl_storage.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import sessiontree_strategies as strat
import sessiontree_testkit as kit
from hypothesis import HealthCheck, given, settings

from sessiontree import InMemorySessionStorage, Session, SessionError, verify
from sessiontree.domain import events as ev

HEADER = {
    "cwd": "/home/me/project",
    "metadata": {"app": "demo", "nested": {"list": [1, 2.5, None, "x"]}},
    "session_id": kit.SESSION_ID,
    "parent_session": "0194f0c2-7a00-7000-8000-0000000000ff",
    "timestamp": kit.T0_ISO,
}


def build_rich(session: Session) -> dict[str, str]:
    """Appends one entry of every kind (with a bare move and a move with a summary)."""
    ids: dict[str, str] = {}
    ids["u1"] = session.append_message(kit.user("hello"))
    ids["a1"] = session.append_message(kit.assistant("hi", usage=kit.usage(10, 5, 0.01)))
    session.append_thinking_level_change("high")
    session.append_model_change("openai", "gpt-x")
    session.append_active_tools_change(["read", "bash"])
    ids["u2"] = session.append_message(kit.user("second"))
    session.append_label_change(ids["u1"], "start")
    session.append_session_info("the name")
    session.append_custom_entry("note", {"k": [1, 2]})
    session.append_custom_message_entry("hint", "remember this", details={"d": 1}, display=False)
    ids["c1"] = session.append_compaction("summary so far", ids["u2"], 1234, details={"files": ["a"]})
    session.move_to(ids["a1"])  # a bare move: only a leaf record
    ids["b1"] = session.move_to(ids["u1"], {"summary": "left a branch"})  # type: ignore[assignment]
    ids["u3"] = session.append_message(kit.user("on the new branch"))
    session.move_to(ids["a1"])  # the session ends on a bare move
    return ids


def test_new_storage_loads_its_header(storage_factory: Any) -> None:
    """A new session's storage loads the header it was created with and no entries."""
    storage = storage_factory.create(**HEADER)
    header, entries = storage.load()
    assert list(entries) == []
    assert storage.session_id == kit.SESSION_ID == header.originator_id
    assert (header.cwd, header.metadata, header.parent_session) == (
        HEADER["cwd"],
        HEADER["metadata"],
        HEADER["parent_session"],
    )
    assert header.timestamp == kit.T0_ISO and header.version == 3
    assert isinstance(storage.location, str) and storage.location


def test_reopen_gives_the_same_session(storage_factory: Any) -> None:
    """Reopening replays the log: leaf (bare moves too), labels, name, context and stats match."""
    storage = storage_factory.create(**HEADER)
    session = kit.open_session(storage)
    build_rich(session)
    again = Session(storage_factory.reopen(storage))
    assert kit.snapshot(again) == kit.snapshot(session)
    assert again.leaf_id == session.leaf_id and again.get_entry(again.leaf_id).type == "message"
    assert again.get_labels() and again.get_session_name() == "the name"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=strat.operations(max_size=20))
def test_random_work_matches_memory_and_survives_reopen(storage_factory: Any, ops: list[Any]) -> None:
    """Random operations give the same projections here as in memory, before and after reopening."""
    reference = kit.open_session(kit.new_storage())
    session = kit.open_session(storage_factory.create(session_id=kit.SESSION_ID, cwd="/home/me/project", timestamp=kit.T0_ISO))
    for op in ops:
        strat.apply_operation(reference, op)
        strat.apply_operation(session, op)
    expected = kit.snapshot(reference)
    assert kit.snapshot(session) == expected
    assert kit.snapshot(Session(storage_factory.reopen(session.storage))) == expected
    kit.check_invariants(session)


def test_a_stale_writer_takes_the_others_entries_in_and_appends_under_its_own_leaf(storage_factory: Any) -> None:
    """A writer whose view is stale is not refused: the entries another appended meanwhile are taken in at write
    time and its entry goes after them, under its own leaf; ``if_version`` asks for ``conflict`` instead."""
    storage = storage_factory.create(**HEADER)
    first = Session(storage)
    one = first.append_message(kit.user("one"))
    second = Session(storage_factory.reopen(storage))
    two = first.append_message(kit.user("two"))
    read = second.version
    with pytest.raises(SessionError) as caught:
        second.append_message(kit.user("refused"), if_version=read)
    assert caught.value.code == "conflict"
    stale = second.append_message(kit.user("stale"))
    assert second.get_entry(two) is not None and second.entry(stale).parent_id == one and second.leaf_id == stale
    assert first.leaf_id == two
    three = first.append_message(kit.user("three"))
    assert first.entry(three).parent_id == two and first.version == 5
    final = Session(storage_factory.reopen(storage))
    assert [e.message.content[0].text for e in final.get_entries()] == ["one", "two", "stale", "three"]
    assert final.leaf_id == three and verify(final).ok


def test_two_events_saved_together_are_both_kept(storage_factory: Any) -> None:
    """A move with a summary saves two events at once; both are there after reopening."""
    storage = storage_factory.create(**HEADER)
    session = kit.open_session(storage)
    root = session.append_message(kit.user("root"))
    session.append_message(kit.user("child"))
    summary_id = session.move_to(root, {"summary": "back to the root"})
    entries = Session(storage_factory.reopen(storage)).get_entries()
    assert [e.type for e in entries[-2:]] == ["leaf", "branch_summary"]
    assert entries[-1].id == summary_id and entries[-1].parent_id == root


def test_load_prefix_is_time_travel(storage_factory: Any) -> None:
    """``load_prefix(v)`` returns exactly the entries the session had at version ``v``."""
    storage = storage_factory.create(**HEADER)
    session = kit.open_session(storage)
    build_rich(session)
    reader = storage_factory.reopen(storage)
    for version in range(1, session.version + 1):
        header, entries = reader.load_prefix(version)
        assert header.originator_id == kit.SESSION_ID
        assert [e.id for e in entries] == [e.id for e in session.at(version).get_entries()]


def test_unknown_entry_types_and_fields_survive(storage_factory: Any) -> None:
    """Entries of unknown types and unknown fields are kept through save and reopen, untouched."""
    storage = storage_factory.create(**HEADER)
    session = kit.open_session(storage)
    root = session.append_message(kit.user("root"))
    data = {"type": "future_thing", "id": "f0f0f0f0", "parent_id": root, "timestamp": kit.T0_ISO, "xBlob": [1, {"a": None}]}
    unknown = ev.UnknownEntryAppended(
        originator_id=kit.SESSION_ID, originator_version=3, timestamp=kit.T0_ISO, id="f0f0f0f0",
        parent_id=root, type="future_thing", data=data,
    )
    extra = ev.SessionRenamed(
        originator_id=kit.SESSION_ID, originator_version=4, timestamp=kit.T0_ISO, id="e0e0e0e0",
        parent_id="f0f0f0f0", name="n", extra={"xNew": {"deep": [True]}},
    )
    storage.save([unknown, extra])
    session.close()
    again = Session(storage_factory.reopen(storage))
    assert again.get_entries()[1:] == [unknown, extra]
    assert again.leaf_id == "e0e0e0e0"
    again.append_message(kit.user("after"))
    assert Session(storage_factory.reopen(storage)).get_entries()[1:3] == [unknown, extra]


def test_refused_input_appends_nothing(storage_factory: Any) -> None:
    """An append the domain refuses leaves the stored log as it was."""
    storage = storage_factory.create(**HEADER)
    session = kit.open_session(storage)
    session.append_message(kit.user("only"))
    for bad in (
        lambda: session.append_thinking_level_change("ultra"),
        lambda: session.append_label_change("nothere", "x"),
        lambda: session.move_to("nothere"),
    ):
        with pytest.raises(SessionError):
            bad()
    assert len(storage_factory.reopen(storage).load()[1]) == 1


def test_saving_nothing_is_a_no_op(storage_factory: Any) -> None:
    """``save([])`` writes nothing and raises nothing."""
    storage = storage_factory.create(**HEADER)
    storage.save([])
    assert list(storage_factory.reopen(storage).load()[1]) == []


def test_memory_backend_is_the_reference() -> None:
    """The contract's reference backend is the in-memory storage (a sanity check of the fixture)."""
    assert isinstance(kit.new_storage(), InMemorySessionStorage)


def test_two_objects_alternating_1000_appends_keep_every_entry_once_and_their_own_leaves(storage_factory: Any) -> None:
    """Two Session objects on one session, used in turn: never refused; every acknowledged entry is there once, the
    log verifies, and each object's leaf is its own last entry (a fresh open's is the last append's). (200 appends on a
    database server, where each one after the other's finds its version taken and retries: three round trips.)"""
    storage = storage_factory.create(**HEADER)
    objects = [Session(storage), Session(storage_factory.reopen(storage))]
    acked: list[list[str]] = [[], []]
    appends = 200 if storage_factory.backend.name.startswith(("postgres", "sqlite")) else 1000
    for n in range(appends):
        acked[n % 2].append(objects[n % 2].append_message(kit.user(f"{n}")))
    for mine, session in zip(acked, objects):
        assert session.leaf_id == mine[-1] and [e.id for e in session.get_branch()] == mine
    fresh = Session(storage_factory.reopen(storage))
    ids = [e.id for e in fresh.get_entries()]
    assert len(ids) == len(set(ids)) == appends and set(ids) == set(acked[0]) | set(acked[1])
    assert fresh.leaf_id == acked[1][-1] and verify(fresh).ok
