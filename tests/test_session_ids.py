"""The Session's entry ids: the default generator, an app's generator and its checks, the
redraw on a collision (SPEC 2.2), and ``entry_id=`` bypassing the generator."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sessiontree import InMemorySessionStorage, JsonlSessionStorage, Session, SessionError, UserMessage
from sessiontree.domain.ids import fixed_clock

T0 = datetime(2026, 11, 29, 11, 30, tzinfo=UTC)


class Ids:
    """An id generator that hands out ``ids`` in turn and counts its calls."""

    def __init__(self, ids: Iterable[object]) -> None:
        self._ids = iter(ids)
        self.calls = 0

    def __call__(self) -> object:
        self.calls += 1
        return next(self._ids)


def always(value: object) -> Callable[[], object]:
    def generate() -> object:
        generate.calls += 1  # type: ignore[attr-defined]
        return value

    generate.calls = 0  # type: ignore[attr-defined]
    return generate


def never() -> object:
    raise AssertionError("the id generator was called")


def memory() -> InMemorySessionStorage:
    return InMemorySessionStorage(cwd="/w")


def open_session(storage: object, ids: Callable[[], object] | None = None) -> Session:
    return Session(storage, clock=fixed_clock(T0), id_generator=ids)  # type: ignore[arg-type]


def hi(n: int = 0) -> UserMessage:
    return UserMessage(content=f"hi {n}", timestamp=n)


def stored_ids(session: Session) -> list[str]:
    """The entry ids a fresh read of the storage finds (what was really written)."""
    _header, log = session.storage.load()
    return [log.id_of(p) for p in range(len(log))]


# -- the default generator ---------------------------------------------------------------------


def test_default_ids_are_8_lowercase_hex_and_distinct():
    """Without ``id_generator`` every id is 8 lowercase hex characters, none repeated (over
    several refills of the generator's random buffer)."""
    session = Session(memory())
    ids = [session.append_message(hi(n)) for n in range(2000)]
    assert all(re.fullmatch(r"[0-9a-f]{8}", i) for i in ids), [i for i in ids if not re.fullmatch(r"[0-9a-f]{8}", i)]
    assert len(set(ids)) == len(ids)
    assert [e.id for e in session.get_entries()] == ids


def test_default_ids_are_not_a_sequence_every_session_repeats():
    """Two sessions draw different ids (random, not a counter): 50 each, none in common
    (a chance of about 6e-7 that this fails by luck)."""
    one, two = Session(memory()), Session(memory())
    first = {one.append_message(hi(n)) for n in range(50)}
    second = {two.append_message(hi(n)) for n in range(50)}
    assert not first & second


def test_default_ids_of_a_move_with_a_summary():
    """Both entries of a move with a summary get default ids, distinct from each other."""
    session = Session(memory())
    first = session.append_message(hi())
    summary_id = session.move_to(first, {"summary": "left"})
    moved, summarized = session.get_entries()[-2:]
    assert summarized.id == summary_id and moved.type == "leaf"
    assert moved.id != summarized.id
    assert all(re.fullmatch(r"[0-9a-f]{8}", e.id) for e in (moved, summarized))


# -- an id already in the session is drawn again ---------------------------------------------------


def test_an_id_in_use_is_drawn_again_on_append():
    """The generator's second "aaaaaaaa" is in the session: it is asked again."""
    ids = Ids(["aaaaaaaa", "aaaaaaaa", "bbbbbbbb"])
    session = open_session(memory(), ids)
    assert session.append_message(hi(1)) == "aaaaaaaa"
    assert session.append_message(hi(2)) == "bbbbbbbb"
    assert ids.calls == 3
    assert stored_ids(session) == ["aaaaaaaa", "bbbbbbbb"]
    assert session.get_entry("bbbbbbbb").message == hi(2)
    assert session.get_entry("bbbbbbbb").parent_id == "aaaaaaaa"


@pytest.mark.parametrize("append", ["thinking", "model", "label", "custom"])
def test_every_append_command_draws_again(append):
    """The redraw is not particular to messages: every append goes through it."""
    ids = Ids(["aaaaaaaa", "aaaaaaaa", "aaaaaaaa", "cccccccc"])
    session = open_session(memory(), ids)
    session.append_message(hi())
    new = {
        "thinking": lambda: session.append_thinking_level_change("high"),
        "model": lambda: session.append_model_change("openai", "gpt"),
        "label": lambda: session.append_label_change("aaaaaaaa", "good"),
        "custom": lambda: session.append_custom_entry("note", {"n": 1}),
    }[append]()
    assert new == "cccccccc"
    assert stored_ids(session) == ["aaaaaaaa", "cccccccc"]


def test_ids_in_use_are_drawn_again_for_both_entries_of_a_move_with_a_summary():
    """move_to with a summary needs two ids; each used one is drawn again."""
    ids = Ids(["aaaaaaaa", "aaaaaaaa", "bbbbbbbb", "aaaaaaaa", "cccccccc"])
    session = open_session(memory(), ids)
    first = session.append_message(hi())
    assert session.move_to(first, {"summary": "left", "details": {"n": 1}}) == "cccccccc"
    assert ids.calls == 5
    assert stored_ids(session) == ["aaaaaaaa", "bbbbbbbb", "cccccccc"]
    moved, summarized = session.get_entries()[-2:]
    assert (moved.type, moved.id, moved.target_id) == ("leaf", "bbbbbbbb", "aaaaaaaa")
    assert (summarized.type, summarized.id, summarized.parent_id) == ("branch_summary", "cccccccc", "aaaaaaaa")
    assert session.leaf_id == "cccccccc"


def test_a_move_without_a_summary_draws_again():
    """A plain move (one leaf entry) draws again too."""
    ids = Ids(["aaaaaaaa", "aaaaaaaa", "bbbbbbbb"])
    session = open_session(memory(), ids)
    session.append_message(hi())
    assert session.move_to(None) is None
    assert stored_ids(session) == ["aaaaaaaa", "bbbbbbbb"]


def test_a_move_with_a_summary_does_not_give_both_entries_one_id():
    """The generator returns one new id twice in a row: the summary's id should be drawn
    again (it is in use, by the leaf entry of the same move), as any id in use is."""
    ids = Ids(["aaaaaaaa", "bbbbbbbb", "bbbbbbbb", "cccccccc"])
    session = open_session(memory(), ids)
    first = session.append_message(hi())
    try:
        assert session.move_to(first, {"summary": "left"}) == "cccccccc"
    finally:
        assert session.version in (2, 4)  # refused whole or written whole, never half


def test_the_redraw_in_a_jsonl_session_is_what_the_file_holds(tmp_path: Path):
    """With a JSONL file: the redrawn ids are the ones written, and a reopen reads them."""
    path = tmp_path / "s.jsonl"
    ids = Ids(["aaaaaaaa", "aaaaaaaa", "bbbbbbbb", "bbbbbbbb", "aaaaaaaa", "cccccccc", "dddddddd"])
    with open_session(JsonlSessionStorage.create(path), ids) as session:
        session.append_message(hi(1))
        assert session.append_message(hi(2)) == "bbbbbbbb"
        assert session.move_to("aaaaaaaa", {"summary": "left"}) == "dddddddd"
    with Session(JsonlSessionStorage.open(path)) as reopened:
        assert [e.id for e in reopened.get_entries()] == ["aaaaaaaa", "bbbbbbbb", "cccccccc", "dddddddd"]
        assert reopened.get_entry("bbbbbbbb").message == hi(2)
        assert reopened.leaf_id == "dddddddd"


# -- a generator that keeps returning used ids -----------------------------------------------------


def test_a_generator_of_used_ids_only_ends_in_invalid_entry_and_writes_nothing():
    """After the first draw and 100 more, all in use, the append is refused and nothing is written."""
    generate = always("aaaaaaaa")
    session = open_session(memory(), generate)
    session.append_message(hi())
    generate.calls = 0  # type: ignore[attr-defined]
    before = session.version
    with pytest.raises(SessionError) as caught:
        session.append_message(hi(2))
    assert caught.value.code == "invalid_entry"
    assert generate.calls == 101  # type: ignore[attr-defined]  # the first draw, then 100 redraws
    assert session.version == before
    assert stored_ids(session) == ["aaaaaaaa"]
    assert session.leaf_id == "aaaaaaaa"


def test_a_move_with_only_used_ids_ends_in_invalid_entry_and_writes_nothing():
    generate = always("aaaaaaaa")
    session = open_session(memory(), generate)
    session.append_message(hi())
    before = session.version
    with pytest.raises(SessionError) as caught:
        session.move_to(None, {"summary": "left"})
    assert caught.value.code == "invalid_entry"
    assert session.version == before
    assert stored_ids(session) == ["aaaaaaaa"]


def test_a_jsonl_session_with_only_used_ids_writes_nothing(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    with open_session(JsonlSessionStorage.create(path), always("aaaaaaaa")) as session:
        session.append_message(hi())
        size = path.stat().st_size
        with pytest.raises(SessionError) as caught:
            session.append_message(hi(2))
        assert caught.value.code == "invalid_entry"
        assert session.version == 2
    assert path.stat().st_size == size
    with Session(JsonlSessionStorage.open(path)) as reopened:
        assert [e.id for e in reopened.get_entries()] == ["aaaaaaaa"]


# -- a generator that returns what is not an id --------------------------------------------------


@pytest.mark.parametrize("bad", [7, None, "", b"aaaaaaaa"], ids=["int", "None", "empty", "bytes"])
def test_a_generator_returning_a_non_str_or_empty_id_is_a_type_error(bad):
    """A non-str or empty id is the app's bug (TypeError), not a session error; nothing is written."""
    session = open_session(memory(), always(bad))
    for call in (lambda: session.append_message(hi()), lambda: session.move_to(None, {"summary": "s"}),
                 lambda: session.move_to(None)):
        with pytest.raises(TypeError, match="id generator"):
            call()
        assert session.version == 1
        assert stored_ids(session) == []


@pytest.mark.parametrize("bad", [7, None, ""], ids=["int", "None", "empty"])
def test_a_bad_id_on_a_redraw_is_a_type_error_too(bad):
    """The check applies to every draw, the redraws included."""
    session = open_session(memory(), Ids(["aaaaaaaa", "aaaaaaaa", bad]))
    session.append_message(hi())
    with pytest.raises(TypeError, match="id generator"):
        session.append_message(hi(2))
    assert session.version == 2
    assert stored_ids(session) == ["aaaaaaaa"]


def test_a_jsonl_session_with_a_bad_generator_writes_nothing(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    with open_session(JsonlSessionStorage.create(path), always(None)) as session:
        size = path.stat().st_size
        with pytest.raises(TypeError):
            session.append_message(hi())
        assert session.version == 1
    assert path.stat().st_size == size


# -- entry_id= ------------------------------------------------------------------------------


def test_an_explicit_entry_id_bypasses_the_generator():
    """``entry_id=`` is used as given; the generator is never asked."""
    session = open_session(memory(), never)
    assert session.append_message(hi(1), entry_id="mine-1") == "mine-1"
    assert session.append_model_change("openai", "gpt", entry_id="mine-2") == "mine-2"
    assert session.append_message(hi(1), entry_id="mine-1") == "mine-1"  # a retry: the same append, nothing written
    assert stored_ids(session) == ["mine-1", "mine-2"]


def test_an_explicit_entry_id_in_use_is_not_redrawn():
    """An ``entry_id`` already in the session for another append is already_exists: it is the
    caller's choice, so it is neither redrawn nor replaced."""
    generate = always("zzzzzzzz")
    session = open_session(memory(), generate)
    session.append_message(hi(1), entry_id="aaaaaaaa")
    with pytest.raises(SessionError) as caught:
        session.append_message(hi(2), entry_id="aaaaaaaa")
    assert caught.value.code == "already_exists"
    assert generate.calls == 0  # type: ignore[attr-defined]
    assert stored_ids(session) == ["aaaaaaaa"]


def test_an_explicit_entry_id_bypasses_the_generator_in_a_jsonl_session(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    with open_session(JsonlSessionStorage.create(path), never) as session:
        assert session.append_message(hi(), entry_id="mine-1") == "mine-1"
    with Session(JsonlSessionStorage.open(path)) as reopened:
        assert [e.id for e in reopened.get_entries()] == ["mine-1"]
