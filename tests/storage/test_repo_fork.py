"""Session repositories on every backend: fork, and copy between repositories (the rest: test_repo.py). The
``repo`` and ``make_repo`` fixtures are in this folder's conftest.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import sessiontree_testkit as kit
from sessiontree_testkit import conversation
from sessiontree_testkit import repo_lines as lines

from sessiontree import SessionError
from sessiontree.domain.ids import fixed_clock
from sessiontree.repository import SessionRepo, open_repo

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

    from sessiontree.audit.chain import seal_lines
    from sessiontree.audit.chain import strip as strip_chain

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
