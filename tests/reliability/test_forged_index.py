"""A sidecar index forged and re-sealed (issue 32, item 4; docs/reliability.md): the index is a cache, never a source.
Every entry decoded is checked against what the index said of it (id, type, parent), a pi leaf marker the index names
must be one, and ``verify`` compares the index with the file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import sessiontree_testkit as kit

from sessiontree import JsonlSessionStorage, Session, SessionError, open_repo, verify
from sessiontree.domain.messages import UserMessage
from sessiontree.pi.pi_convert import export_pi
from sessiontree.storage import jsonl_index


def _session(tmp_path: Path) -> tuple[Path, list[str]]:
    """A session of four user messages in a repository (its index beside it), opened once so the index is written."""
    with open_repo(tmp_path / "repo") as repo:
        session = repo.create(cwd="/w")
        for word in ("one", "two", "three", "four"):
            session.append_message(kit.user(word))
        path = tmp_path / "repo" / f"{session.id}.jsonl"
        session.close()
    Session(JsonlSessionStorage.open(path)).close()  # writes the index
    return path, ["one", "two", "three", "four"]


def _forge(path: Path, change: Callable[[jsonl_index.SidecarIndex], Any]) -> None:
    """Change the index, then seal it again as a writer would (its digest recomputed), settled."""
    where = jsonl_index.sidecar_path(path)
    assert where is not None
    index = jsonl_index.read(where)
    assert index is not None, "the open wrote no index"
    change(index)
    index = attrs.evolve(index, written_ns=index.mtime_ns + 10**10)
    assert jsonl_index.write(where, index)


def _said(path: Path) -> list[str]:
    session = Session(JsonlSessionStorage.open(path))
    try:
        return [m.content[0].text for m in session.build_context().messages if isinstance(m, UserMessage)]
    finally:
        session.close()


def _parent(index: jsonl_index.SidecarIndex) -> None:
    index.parents[2] = 0  # "three" hangs under "one": "two" drops out of the context


def _type(index: jsonl_index.SidecarIndex) -> None:
    index.types[3] = "label"  # "four" read as a label entry


@pytest.mark.parametrize("change", [_parent, _type], ids=["parent", "type"])
def test_a_forged_index_never_changes_what_open_returns(tmp_path: Path, change: Any) -> None:
    """The read that meets the forged envelope is ``corrupt`` naming the index, which is removed; the next open reads
    the file as it is; ``verify`` reports the index before that (before: "two" silently dropped out of the context and
    ``show``, and verify passed)."""
    path, words = _session(tmp_path)
    _forge(path, change)
    report = verify(path)
    assert not report.ok and any("sidecar index" in p.message for p in report.problems), report.problems
    with pytest.raises(SessionError) as caught:
        _said(path)
    assert caught.value.code == "corrupt" and "sidecar index" in caught.value.message
    assert _said(path) == words
    assert verify(path).ok


def test_a_forged_pi_leaf_marker_in_the_index_is_not_decoded_as_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index of a pi file (in the cache directory) names a message line a leaf marker: the open scans the file
    instead, and the context is the file's (before: the message was decoded as a leaf move)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    native = tmp_path / "native.jsonl"
    session = Session(JsonlSessionStorage.create(native, cwd="/p"))
    first = session.append_message(kit.user("one"))
    session.append_message(kit.user("two"))
    session.move_to(first)
    session.append_message(kit.user("three"))
    session.close()
    path = tmp_path / "pi" / "s.jsonl"
    path.parent.mkdir()
    export_pi(native, path)
    words = _said(path)
    assert words == ["one", "three"]

    def marker(index: jsonl_index.SidecarIndex) -> None:
        message = index.types.index("message", 1)  # "two"
        index.markers = sorted({*index.markers, message})

    _forge(path, marker)
    assert not verify(path).ok
    assert _said(path) == words
