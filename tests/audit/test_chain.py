"""The hash chain: its byte format, how storages write it and how readers ignore it."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest
import sessiontree_strategies as strat
import sessiontree_testkit as kit
from hypothesis import HealthCheck, given, settings

from sessiontree import InMemorySessionStorage, JsonlSessionRepo, JsonlSessionStorage, Session, SessionError, ToolCall, open_repo
from sessiontree.audit import chain
from sessiontree.content import blobs
from sessiontree.pi.pi_storage import PiSessionStorage
from sessiontree.storage.storage import SessionStorage
from sessiontree.wire.codec import native_codec


def file_lines(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return data[:-1].split(b"\n")


def assert_chained(lines: list[bytes]) -> None:
    """Each line's digest is sha256(previous digest || the line without its chain field)."""
    previous = b""
    for line in lines:
        canonical, digest = chain.split(line)
        assert digest is not None, line
        assert orjson.loads(line)[chain.CHAIN_KEY] == digest.decode()
        expected = hashlib.sha256(previous + canonical).digest()
        assert bytes.fromhex(digest.decode()) == expected
        previous = expected


def conversation(session: Session) -> None:
    first = session.append_message(kit.user("hello"))
    session.append_message(kit.assistant("hi there"))
    session.append_label_change(first, "start")
    session.move_to(first, {"summary": "went back"})
    session.append_session_info("named")


# -- the format -------------------------------------------------------------------------------


def test_seal_appends_the_field_last_and_split_undoes_it() -> None:
    """A sealed line is the canonical line with ``,"chain":"<hex>"`` before its closing brace."""
    canonical = b'{"type":"custom","id":"a","x":[1,{"y":"}"}]}'
    sealed, digest = chain.seal(canonical, b"\x01" * 32)
    assert digest == hashlib.sha256(b"\x01" * 32 + canonical).digest()
    assert sealed == canonical[:-1] + b',"chain":"' + digest.hex().encode() + b'"}'
    assert chain.split(sealed) == (canonical, digest.hex().encode())
    assert chain.strip(sealed) == canonical and chain.recorded(sealed) == digest
    assert orjson.loads(sealed) == {**orjson.loads(canonical), "chain": digest.hex()}


@pytest.mark.parametrize(
    "line",
    [
        b'{"a":1}',
        b'{"a":1,"chain":"abc"}',  # too short
        b'{"a":1,"chain":"' + b"A" * 64 + b'"}',  # not lowercase hex
        b'{"chain":"' + b"a" * 64 + b'","a":1}',  # not the last key
        b'{"a":1,"chain":"' + b"a" * 64 + b'" }',  # not the exact suffix
    ],
)
def test_only_a_well_formed_last_field_counts_as_a_chain(line: bytes) -> None:
    """Lines without the exact suffix are left as they are: their "chain" key is ordinary data."""
    assert chain.split(line) == (line, None)
    assert chain.strip(line) == line and chain.recorded(line) is None


def test_seal_refuses_what_is_not_a_non_empty_object() -> None:
    """Only JSON objects with a key can carry the field (every session line is one)."""
    for bad in (b"{}", b"[1]", b""):
        with pytest.raises(ValueError):
            chain.seal(bad, b"")


# -- writing ----------------------------------------------------------------------------------


def test_a_new_jsonl_session_is_chained_from_its_header(tmp_path: Path) -> None:
    """Every line of a new file, the header first, carries a digest that chains to the one before."""
    storage = JsonlSessionStorage.create(tmp_path / "s.jsonl", cwd="/p")
    conversation(kit.open_session(storage))
    lines = file_lines(tmp_path / "s.jsonl")
    assert len(lines) == 7
    assert_chained(lines)
    assert storage.chain_head.version == 7 and storage.chain_head.digest == chain.recorded(lines[-1])


def test_appends_after_a_reopen_continue_the_chain(tmp_path: Path) -> None:
    """A reopened file's head is its last line's digest; later appends chain to it."""
    conversation(kit.open_session(JsonlSessionStorage.create(tmp_path / "s.jsonl")))
    again = Session(JsonlSessionStorage.open(tmp_path / "s.jsonl"))
    again.append_message(kit.user("more"))
    assert_chained(file_lines(tmp_path / "s.jsonl"))


def test_a_storage_that_never_loaded_reads_the_previous_line_once(tmp_path: Path) -> None:
    """Saving through a storage that was opened but not loaded still chains correctly."""
    session = kit.open_session(JsonlSessionStorage.create(tmp_path / "s.jsonl"))
    session.append_message(kit.user("one"))
    entry = session.get_entries()[-1]
    session.close()
    fresh = JsonlSessionStorage.open(tmp_path / "s.jsonl")
    assert fresh.chain_head.version == 0
    from sessiontree.domain.events import CustomEntryAppended

    fresh.save(
        [
            CustomEntryAppended(
                originator_id=session.id, originator_version=3, timestamp=kit.T0_ISO, id="feed0001",
                parent_id=entry.id, custom_type="note", data=None,
            )
        ]
    )
    assert_chained(file_lines(tmp_path / "s.jsonl"))


def test_memory_and_database_rows_hold_the_chained_lines(tmp_path: Path) -> None:
    """In-memory and SQLite storages store exactly the chained lines a file would hold."""
    memory = kit.open_session(kit.new_storage())
    conversation(memory)
    states = [s.state for s in memory.storage.recorder.select_events(memory.id)]  # type: ignore[attr-defined]
    assert_chained(states)
    repo = open_repo(f"sqlite:///{tmp_path / 's.db'}")
    session = repo.create(cwd="/p")
    conversation(session)
    rows = [s.state for s in session.storage.recorder.select_events(session.id)]  # type: ignore[attr-defined]
    assert_chained(rows)
    repo.close()


def test_an_unchained_file_stays_unchained_when_appended_to(tmp_path: Path) -> None:
    """A file written before chaining (no chain fields) gets no chain fields on later appends."""
    path = tmp_path / "old.jsonl"
    codec = native_codec()
    source = kit.open_session(kit.new_storage())
    source.append_message(kit.user("old"))
    path.write_bytes(
        b"".join(codec.encode_event(e) + b"\n" for e in [source.header, *source.get_entries()])
    )
    session = Session(JsonlSessionStorage.open(path))
    session.append_message(kit.user("new"))
    assert all(chain.split(line)[1] is None for line in file_lines(path))


def test_chaining_can_be_turned_off_for_new_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``chain_new_sessions = False`` writes seed-format lines only."""
    monkeypatch.setattr(SessionStorage, "chain_new_sessions", False)
    conversation(kit.open_session(JsonlSessionStorage.create(tmp_path / "s.jsonl")))
    assert all(chain.split(line)[1] is None for line in file_lines(tmp_path / "s.jsonl"))


def test_pi_files_are_never_chained(tmp_path: Path) -> None:
    """A pi-dialect file gets pi's lines only: pi's format has no chain."""
    session = kit.open_session(PiSessionStorage.create(tmp_path / "pi.jsonl"))
    session.append_message(kit.user("hi"))
    assert all(b'"chain"' not in line for line in file_lines(tmp_path / "pi.jsonl"))


def test_a_refused_append_leaves_the_head_where_it_was_and_a_stale_one_chains_after_the_other(tmp_path: Path) -> None:
    """An ``if_version`` conflict does not move the head; a stale writer's line is sealed after the other writer's
    line, as the file is at write time, so the chain stays unbroken."""
    path = tmp_path / "s.jsonl"
    first = kit.open_session(JsonlSessionStorage.create(path))
    second = Session(JsonlSessionStorage.open(path))
    first.append_message(kit.user("mine"))
    head = second.storage.chain_head.digest  # type: ignore[attr-defined]
    with pytest.raises(SessionError) as caught:
        second.append_message(kit.user("stale"), if_version=second.version)
    assert caught.value.code == "conflict"
    assert second.storage.chain_head.digest == head  # type: ignore[attr-defined]
    second.append_message(kit.user("stale"))
    first.append_message(kit.user("after"))
    assert_chained(file_lines(path))
    assert len(file_lines(path)) == 4


def test_an_entry_with_its_own_chain_field_is_refused() -> None:
    """An entry read from another producer with a top-level "chain" key cannot be sealed."""
    storage = kit.new_storage()
    source = kit.open_session(InMemorySessionStorage())
    source.append_custom_entry("note", None)
    entry = source.get_entries()[0]
    import attrs

    from sessiontree.domain.messages import Extra

    clash = attrs.evolve(entry, originator_id=storage.session_id, extra=Extra({"chain": "theirs"}, frozenset()))
    with pytest.raises(SessionError) as caught:
        storage.save([clash])
    assert caught.value.code == "invalid_entry" and "reserves" in caught.value.message


def test_a_key_named_chain_inside_a_value_is_not_a_clash(tmp_path: Path) -> None:
    """A custom entry's data, a tool call's arguments: a "chain" key nested in a value is
    the app's own and is kept; only a top-level field would clash with the chain's."""
    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path, cwd="/p"))
    session.append_custom_entry("app", {"chain": "my block chain"})
    session.append_message(kit.assistant("x", tool_calls=[ToolCall(id="1", name="n", arguments={"chain": [1]})]))
    lines = file_lines(path)
    assert_chained(lines)
    reopened = Session(JsonlSessionStorage.open(path))
    assert reopened.get_entries()[0].data == {"chain": "my block chain"}
    assert reopened.get_entries() == session.get_entries()


# -- reading ----------------------------------------------------------------------------------


def test_read_entries_do_not_carry_the_chain_field(tmp_path: Path) -> None:
    """Entries and the header read back equal the ones written: the field is not in ``extra``."""
    session = kit.open_session(JsonlSessionStorage.create(tmp_path / "s.jsonl"))
    conversation(session)
    again = Session(JsonlSessionStorage.open(tmp_path / "s.jsonl"))
    assert again.get_entries() == session.get_entries()
    assert again.header == session.header and again.header.extra == {}
    assert all(not e.extra for e in again.get_entries())
    salvaged = JsonlSessionStorage.open(tmp_path / "s.jsonl", salvage=True)
    assert [e.id for e in salvaged.load()[1]] == [e.id for e in session.get_entries()]
    assert all(not e.extra for e in salvaged.load()[1])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=strat.operations(max_size=15))
def test_copies_of_a_session_have_the_same_bytes(tmp_path_factory: Any, ops: list[Any]) -> None:
    """Re-encoding read entries gives the canonical lines, so a copy re-chains to identical bytes."""
    place = tmp_path_factory.mktemp("copy")
    source = JsonlSessionRepo(place / "a")
    session = source.create(cwd="/p", session_id=kit.SESSION_ID)
    for op in ops:
        strat.apply_operation(session, op)
    JsonlSessionRepo(place / "b").copy_from(source, kit.SESSION_ID)
    original = (place / "a" / f"{kit.SESSION_ID}.jsonl").read_bytes()
    assert (place / "b" / f"{kit.SESSION_ID}.jsonl").read_bytes() == original
    codec = native_codec()
    lines = original[:-1].split(b"\n")
    store = source.store.blobs  # content kept out of line is read back before decoding, and put out after encoding
    decoded = [codec.decode_line(blobs.inline(chain.strip(line), store), kit.SESSION_ID, n) for n, line in enumerate(lines, 1)]
    assert [blobs.outline(codec.encode_event(e), store) for e in decoded] == [chain.strip(line) for line in lines]
    assert chain.seal_lines([chain.strip(line) for line in lines])[0] == lines


def test_saving_lines_that_are_already_stored_is_not_a_conflict(tmp_path: Path) -> None:
    """A database insert retried after its commit landed (the same bytes at the same versions)
    succeeds without a duplicate; different lines at a taken version are still a conflict."""
    repo = open_repo(f"sqlite:///{tmp_path / 's.db'}")
    session = repo.create(cwd="/p")
    session.append_message(kit.user("one"))
    storage = session.storage
    entry = session.get_entries()[-1]
    storage.chain_head.set(1, chain.recorded(storage.recorder.select_events(session.id)[0].state))  # type: ignore[attr-defined]
    storage.save([entry])  # exactly what is stored at version 2: no error, nothing added
    assert len(storage.recorder.select_events(session.id)) == 2  # type: ignore[attr-defined]
    import attrs

    with pytest.raises(SessionError) as caught:
        storage.save([attrs.evolve(entry, id="other001")])
    assert caught.value.code == "conflict"
    repo.close()
