"""Session repositories on every backend: create, open, list, delete (fork and copy: test_repo_fork.py). The
``repo`` and ``make_repo`` fixtures are in this folder's conftest.py."""

from __future__ import annotations

from typing import Any

import pytest
import sessiontree_testkit as kit
from sessiontree_testkit import conversation
from sessiontree_testkit import repo_lines as lines

from sessiontree import FunctionProjection, SessionError
from sessiontree.repository import SessionRepo

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


def test_a_stale_writer_appends_after_the_other_and_if_version_refuses(repo: SessionRepo) -> None:
    """Two writers on one session: the one whose view is stale appends after the other's entry (under its own
    leaf); with ``if_version`` it gets ``conflict`` and appends nothing."""
    session = repo.create(cwd="/p")
    other = repo.open(session.id)
    first = session.append_message(kit.user("first writer"))
    with pytest.raises(SessionError) as info:
        other.append_message(kit.user("refused"), if_version=other.version)
    assert info.value.code == "conflict"
    assert lines(repo.open(session.id)) == lines(session)
    stale = other.append_message(kit.user("stale writer"))
    assert other.entry(stale).parent_id is None and other.has_entry(first)
    assert lines(repo.open(session.id)) == lines(other)


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


def test_a_nul_character_in_a_message_and_a_name_is_kept(repo: SessionRepo, backend: str) -> None:
    """A NUL in text is stored and read back exactly on every backend; PostgreSQL's listing (text columns, which
    cannot hold it) shows U+FFFD in its place."""
    session = repo.create(cwd="/p", name="nul\x00name")
    entry = session.append_message(kit.user("before\x00after"))
    assert repo.open(session.id).entry(entry).message == kit.user("before\x00after")
    (info,) = repo.list()
    shown = "\ufffd" if backend.startswith("postgres") else "\x00"
    assert (info.name, info.first_message) == (f"nul{shown}name", f"before{shown}after")
