"""Session repositories on every backend: create, open, list, delete, fork and copy."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import sessiontree_pg as pg
import sessiontree_testkit as kit

from sessiontree import FunctionProjection, SessionError
from sessiontree.adapters.codec import native_codec
from sessiontree.domain.ids import fixed_clock
from sessiontree.repository import (
    SessionRepo,
    open_repo,
)

BACKENDS = ["memory", "jsonl", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def backend(request: Any) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def make_repo(backend: str, tmp_path: Path) -> Iterator[Any]:
    """Opens repositories of the test's backend (all on the same store) and closes them."""
    opened: list[SessionRepo] = []
    schema_cm = pg.temp_schema("repo") if backend == "postgres" else None
    schema = schema_cm.__enter__() if schema_cm is not None else None
    memory: list[SessionRepo] = []

    def make(**kwargs: Any) -> SessionRepo:
        kwargs.setdefault("clock", fixed_clock(kit.T0))
        if backend == "memory":
            if not memory:
                memory.append(open_repo("memory:", **kwargs))
            return memory[0]
        url = {
            "jsonl": f"jsonl:{tmp_path / 'sessions'}",
            "sqlite": f"sqlite:{tmp_path / 'sessions.db'}",
            "postgres": pg.url(schema or ""),
        }[backend]
        repo = open_repo(url, **kwargs)
        opened.append(repo)
        return repo

    try:
        yield make
    finally:
        for repo in opened + memory:
            repo.close()
        if schema_cm is not None:
            schema_cm.__exit__(None, None, None)


@pytest.fixture
def repo(make_repo: Any) -> SessionRepo:
    return make_repo()  # type: ignore[no-any-return]


def lines(session: Any) -> list[bytes]:
    """A session's log as the JSON lines any backend stores."""
    codec = native_codec()
    header, entries = session.storage.load()
    return [codec.encode_event(header)] + [codec.encode_event(e) for e in entries]


def conversation(session: Any) -> dict[str, str]:
    """user -> assistant -> user -> assistant, with a label on the first user message."""
    ids = {}
    ids["u1"] = session.append_message(kit.user("first question"))
    ids["a1"] = session.append_message(kit.assistant("first answer"))
    ids["label"] = session.append_label_change(ids["u1"], "start")
    ids["u2"] = session.append_message(kit.user("second question"))
    ids["a2"] = session.append_message(kit.assistant("second answer"))
    return ids


# -- create, open, list, delete -----------------------------------------------------------


def test_create_then_open_gives_the_same_session(repo: SessionRepo) -> None:
    """A created session, written to, opens with the same header and entries."""
    session = repo.create(cwd="/home/me/project", metadata={"team": "a"})
    conversation(session)
    again = repo.open(session.id)
    assert again.header.cwd == "/home/me/project"
    assert dict(again.header.metadata) == {"team": "a"}
    assert lines(again) == lines(session)
    assert again.leaf_id == session.leaf_id


def test_create_with_a_name_appends_a_session_info_entry(repo: SessionRepo) -> None:
    """create(name=...) records the name as the session's first entry."""
    session = repo.create(cwd="/p", name="refactor")
    assert [e.type for e in session.get_entries()] == ["session_info"]
    assert repo.open(session.id).get_session_name() == "refactor"


def test_opening_an_unknown_session_is_not_found(repo: SessionRepo) -> None:
    """open() of an id nobody created raises not_found."""
    with pytest.raises(SessionError) as info:
        repo.open("0194f0c2-0000-7000-8000-00000000dead")
    assert info.value.code == "not_found"


def test_creating_an_existing_id_is_already_exists(repo: SessionRepo) -> None:
    """A second create with the same session id is refused and changes nothing."""
    session = repo.create(cwd="/p", session_id="fixed-id")
    session.append_message(kit.user("keep me"))
    with pytest.raises(SessionError) as info:
        repo.create(cwd="/q", session_id="fixed-id")
    assert info.value.code == "already_exists"
    assert lines(repo.open("fixed-id")) == lines(session)


def test_list_shows_each_session_summary(repo: SessionRepo) -> None:
    """list() gives id, location, cwd, times, name, message count and first user message."""
    session = repo.create(cwd="/p", name="demo")
    ids = conversation(session)
    session.move_to(ids["u1"])
    session.append_message(kit.assistant("another answer"))
    session.append_session_info("renamed")
    [info] = repo.list()
    assert info.id == session.id
    assert info.cwd == "/p"
    assert info.created == session.header.timestamp
    assert info.modified == session.get_entries()[-1].timestamp
    assert info.name == "renamed"
    assert info.message_count == 5  # every branch counts
    assert info.first_message == "first question"
    assert info.parent_session is None
    assert session.id in info.path


def test_list_is_newest_first_and_filters_by_cwd(repo: SessionRepo) -> None:
    """Sessions come most recently modified first; cwd= keeps those started there."""
    old = repo.create(cwd="/a")
    middle = repo.create(cwd="/b")
    new = repo.create(cwd="/a")
    old.append_message(kit.user("now the newest"))
    assert [i.id for i in repo.list()] == [old.id, new.id, middle.id]
    assert [i.id for i in repo.list(cwd="/a")] == [old.id, new.id]
    assert repo.list(cwd="/nowhere") == []


def test_list_sees_writes_made_through_another_repo_object(make_repo: Any) -> None:
    """Appends made through one repository object show in another's listing."""
    first, second = make_repo(), make_repo()
    session = first.create(cwd="/p")
    assert [i.message_count for i in second.list()] == [0]
    session.append_message(kit.user("hello"))
    session.append_message(kit.assistant("hi"))
    [info] = second.list()
    assert (info.message_count, info.first_message) == (2, "hello")


def test_delete_is_idempotent_and_forgets_the_session(repo: SessionRepo) -> None:
    """delete() removes a session; deleting again (or an unknown id) is not an error."""
    keep = repo.create(cwd="/p")
    gone = repo.create(cwd="/p")
    gone.append_message(kit.user("bye"))
    repo.delete(gone.id)
    repo.delete(gone.id)
    repo.delete("never-existed")
    assert [i.id for i in repo.list()] == [keep.id]
    assert not repo.exists(gone.id)
    with pytest.raises(SessionError) as info:
        repo.open(gone.id)
    assert info.value.code == "not_found"


def test_a_deleted_id_can_be_used_again(repo: SessionRepo) -> None:
    """After delete, a new session may take the same id and is listed afresh."""
    repo.create(cwd="/p", session_id="reused").append_message(kit.user("old"))
    repo.delete("reused")
    fresh = repo.create(cwd="/q", session_id="reused")
    [info] = repo.list()
    assert (info.id, info.cwd, info.message_count) == ("reused", "/q", 0)
    assert fresh.get_entries() == []


@pytest.mark.parametrize("bad", ["../escape", "a/b", "a\\b", "a\x00b", ".", "..", "", ".hidden", "x" * 201])
def test_unsafe_session_ids_are_refused(repo: SessionRepo, bad: str) -> None:
    """Ids with separators, dot-dot, NUL or a leading dot never reach a path or a row."""
    for call in (lambda: repo.open(bad), lambda: repo.create(cwd="/p", session_id=bad), lambda: repo.delete(bad)):
        with pytest.raises(SessionError) as info:
            call()
        assert info.value.code == "invalid_entry"
    assert repo.list() == []


def test_a_stale_writer_gets_conflict_and_appends_nothing(repo: SessionRepo) -> None:
    """Two writers on one session: the one whose view is stale gets conflict."""
    session = repo.create(cwd="/p")
    other = repo.open(session.id)
    session.append_message(kit.user("first writer"))
    with pytest.raises(SessionError) as info:
        other.append_message(kit.user("stale writer"))
    assert info.value.code == "conflict"
    assert lines(repo.open(session.id)) == lines(session)


def test_app_projections_reach_every_session_the_repo_opens(make_repo: Any) -> None:
    """projections= given to the repository are registered on created and opened sessions."""
    counter = FunctionProjection("messages", lambda: 0, lambda n, e: n + 1, types=["message"])
    repo = make_repo(projections=[counter])
    session = repo.create(cwd="/p")
    conversation(session)
    assert session.projection("messages") == 4
    assert repo.open(session.id).projection("messages") == 4


def test_context_options_reach_every_session_the_repo_opens(make_repo: Any) -> None:
    """options= given to the repository are the session-level context options of its sessions."""
    from sessiontree import SessionContextBuildOptions

    drop_first = SessionContextBuildOptions(entry_transforms=[lambda entries: list(entries)[1:]])
    repo = make_repo(options=drop_first)
    session = repo.create(cwd="/p")
    conversation(session)
    assert len(session.build_context().messages) == 3
    assert len(repo.open(session.id).build_context().messages) == 3
    assert len(repo.fork(session.id).build_context().messages) == 3


# -- fork ----------------------------------------------------------------------------------


def test_fork_before_a_user_message_stops_at_its_parent(repo: SessionRepo) -> None:
    """position='before' copies the path to the message's parent, same ids, labels and name."""
    source = repo.create(cwd="/p", name="origin", metadata={"k": 1})
    ids = conversation(source)
    fork = repo.fork(source.id, ids["u2"])
    path = [e for e in fork.get_entries() if e.type != "label"]
    assert [e.id for e in path] == [source.get_entries()[0].id, ids["u1"], ids["a1"]]
    assert fork.get_label(ids["u1"]) == "start"
    assert fork.get_session_name() == "origin"
    assert fork.id != source.id
    assert fork.header.parent_session in (source.id, source.storage.location)
    assert fork.header.cwd == "/p" and dict(fork.header.metadata) == {"k": 1}
    assert fork.build_context().messages == source.build_context(leaf_id=ids["a1"]).messages
    assert fork.id in [i.id for i in repo.list()]
    assert repo.open(fork.id).get_entries() == fork.get_entries()


def test_fork_at_keeps_the_target(repo: SessionRepo) -> None:
    """position='at' copies the path including the target entry."""
    source = repo.create(cwd="/p")
    ids = conversation(source)
    fork = repo.fork(source.id, ids["a2"], position="at")
    assert [e.id for e in fork.get_entries() if e.type == "message"] == [ids["u1"], ids["a1"], ids["u2"], ids["a2"]]
    assert fork.build_context().messages == source.build_context().messages


def test_fork_takes_the_new_id_and_header_metadata(repo: SessionRepo) -> None:
    """fork_id names the fork (an id in use is already_exists, nothing written); metadata replaces the source's."""
    source = repo.create(cwd="/p", metadata={"k": 1})
    ids = conversation(source)
    fork = repo.fork(source.id, ids["a1"], position="at", fork_id="chosen-id", metadata={"k": 2})
    assert fork.id == "chosen-id" and dict(fork.header.metadata) == {"k": 2}
    assert dict(repo.open("chosen-id").header.metadata) == {"k": 2}
    with pytest.raises(SessionError) as taken:
        repo.fork(source.id, ids["a1"], position="at", fork_id=source.id)
    assert taken.value.code == "already_exists"
    assert lines(repo.open(source.id)) == lines(source)
    with pytest.raises(SessionError) as bad:
        repo.fork(source.id, fork_id="../escape")
    assert bad.value.code == "invalid_entry"


@pytest.mark.parametrize("target", ["a1", "label"])
def test_fork_before_anything_but_a_user_message_is_refused(repo: SessionRepo, target: str) -> None:
    """'before' on an assistant message or a label is invalid_fork_target; nothing is created."""
    source = repo.create(cwd="/p")
    ids = conversation(source)
    with pytest.raises(SessionError) as info:
        repo.fork(source.id, ids[target])
    assert info.value.code == "invalid_fork_target"
    assert [i.id for i in repo.list()] == [source.id]


def test_fork_with_an_unknown_position_or_entry_is_refused(repo: SessionRepo) -> None:
    """A position other than before/at, or an unknown entry id, creates nothing."""
    source = repo.create(cwd="/p")
    ids = conversation(source)
    with pytest.raises(SessionError) as info:
        repo.fork(source.id, ids["u1"], position="after")
    assert info.value.code == "invalid_fork_target"
    with pytest.raises(SessionError) as info:
        repo.fork(source.id, "nope", position="at")
    assert info.value.code == "not_found"
    assert len(repo.list()) == 1


def test_fork_without_an_entry_copies_the_current_branch_only(repo: SessionRepo) -> None:
    """No entry_id: the whole current branch, not the abandoned ones."""
    source = repo.create(cwd="/p")
    ids = conversation(source)
    source.move_to(ids["a1"])
    other = source.append_message(kit.user("a different second question"))
    fork = repo.fork(source.id)
    messages = [e.id for e in fork.get_entries() if e.type == "message"]
    assert messages == [ids["u1"], ids["a1"], other]
    assert fork.leaf_id is not None
    assert fork.build_context().messages == source.build_context().messages


def test_forking_before_the_first_message_gives_an_empty_named_session(repo: SessionRepo) -> None:
    """Forking before the very first user message keeps only the name and the parent link."""
    source = repo.create(cwd="/p", name="n")
    ids = conversation(source)
    fork = repo.fork(source.id, ids["u1"])
    assert [e.type for e in fork.get_entries()] == ["session_info"]
    assert fork.get_session_name() == "n"
    assert fork.header.parent_session is not None


def test_fork_copies_the_path_verbatim_and_brings_labels_up_to_date(repo: SessionRepo) -> None:
    """Entries on the path keep ids and parents; labels changed off the path are re-created after it."""
    source = repo.create(cwd="/p")
    ids = conversation(source)  # u2's parent is the label entry
    source.move_to(ids["a1"])
    source.append_label_change(ids["u1"], "renamed off the path")
    source.append_label_change(ids["a1"], "new label")
    source.move_to(ids["a2"])
    off = source.append_label_change(ids["a2"], "not on the fork")
    fork = repo.fork(source.id, ids["u2"], position="at")
    entries = fork.get_entries()
    path = source.get_branch(ids["u2"])
    assert [(e.id, e.parent_id) for e in entries[: len(path)]] == [(e.id, e.parent_id) for e in path]
    assert [e.type for e in entries[len(path):]] == ["label", "label"]
    assert entries[len(path)].parent_id == ids["u2"]
    assert fork.get_labels() == {ids["u1"]: "renamed off the path", ids["a1"]: "new label"}
    assert off not in {e.id for e in entries}
    kit.check_invariants(fork)


def test_a_cleared_label_is_not_carried_into_a_fork(repo: SessionRepo) -> None:
    """A label set then cleared on the path does not reappear in the fork."""
    source = repo.create(cwd="/p")
    ids = conversation(source)
    source.append_label_change(ids["u1"], None)
    fork = repo.fork(source.id)
    assert fork.get_labels() == {}


# -- copy between repositories -------------------------------------------------------------


def test_copy_from_another_backend_keeps_every_line(repo: SessionRepo, tmp_path: Path) -> None:
    """A session copied in and out again has the same id, header and lines."""
    source_repo = open_repo(tmp_path / "source", clock=fixed_clock(kit.T0))
    source = source_repo.create(cwd="/p", name="moving", metadata={"why": "scale"})
    ids = conversation(source)
    source.move_to(ids["a1"], summary={"summary": "went back", "details": {"n": 1}})
    copied = repo.copy_from(source_repo, source.id)
    assert copied.id == source.id
    assert lines(repo.open(source.id)) == lines(source)
    back_repo = open_repo(tmp_path / "back")
    back_repo.copy_from(repo, source.id)
    original = (tmp_path / "source" / f"{source.id}.jsonl").read_bytes()
    assert (tmp_path / "back" / f"{source.id}.jsonl").read_bytes() == original


def test_copy_keeps_the_unknown_fields_of_a_header(repo: SessionRepo, tmp_path: Path) -> None:
    """A header field this library does not know survives a copy into any backend and back
    into a JSONL directory (nothing written by another producer is lost)."""
    import orjson

    from sessiontree.adapters.chain import seal_lines
    from sessiontree.adapters.chain import strip as strip_chain

    source_repo = open_repo(tmp_path / "source", clock=fixed_clock(kit.T0))
    source = source_repo.create(cwd="/p")
    conversation(source)
    source.close()
    path = tmp_path / "source" / f"{source.id}.jsonl"
    raw = [strip_chain(line) for line in path.read_bytes().splitlines()]
    header = orjson.loads(raw[0])
    header["x_origin"] = {"tool": "lab", "n": 2}
    raw[0] = orjson.dumps(header)
    path.write_bytes(b"\n".join(seal_lines(raw)[0]) + b"\n")
    copied = repo.copy_from(source_repo, source.id)
    assert copied.header.extra == {"x_origin": {"tool": "lab", "n": 2}}
    back_repo = open_repo(tmp_path / "back")
    back = back_repo.copy_from(repo, source.id)
    assert back.header.extra == {"x_origin": {"tool": "lab", "n": 2}}
    assert (tmp_path / "back" / f"{source.id}.jsonl").read_bytes() == path.read_bytes()
