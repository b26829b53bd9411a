"""One Session shared by several threads, on every backend: appends are serialised, the
hash chain stays unbroken, nothing acknowledged is lost, and a later writer keeps chaining
(issue 15, item 1; docs/reliability.md)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sessiontree_pg as pg
import sessiontree_testkit as kit

from sessiontree import JsonlSessionStorage, Session, open_repo, verify
from sessiontree.domain.errors import SessionError

THREADS = 4
APPENDS = 40


def _jsonl(tmp_path: Path) -> tuple[Session, Callable[[], Session]]:
    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path, cwd="/t"))
    return session, lambda: Session(JsonlSessionStorage.open(path))


def _repo(url: str) -> Callable[[Path], tuple[Session, Callable[[], Session]]]:
    def make(tmp_path: Path) -> tuple[Session, Callable[[], Session]]:
        repo = open_repo(url.format(tmp=tmp_path))
        session = repo.create(cwd="/t")
        return session, lambda: repo.open(session.id)

    return make


def _postgres(tmp_path: Path) -> tuple[Session, Callable[[], Session]]:
    pg.require_postgres()
    schema = "threads_" + tmp_path.name.replace("-", "_")[-20:]
    return _repo(pg.url(schema))(tmp_path)


BACKENDS: dict[str, Callable[[Path], tuple[Session, Callable[[], Session]]]] = {
    "jsonl": _jsonl,
    "memory": _repo("memory:"),
    "sqlite": _repo("sqlite:{tmp}/s.db"),
    "postgres": _postgres,
}


def _hammer(session: Session, calls: list[Callable[[Session, int], Any]]) -> list[str]:
    """Run ``calls`` from THREADS threads at once on ``session``; the ids they were given."""
    acked: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def work(number: int) -> None:
        start.wait()
        try:
            for i in range(APPENDS):
                result = calls[(number + i) % len(calls)](session, number * 1000 + i)
                if result is not None:
                    acked.append(result)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return acked


def _message(session: Session, n: int) -> str:
    return session.append_message(kit.user(f"thread message {n}"))


def _label(session: Session, n: int) -> str:
    return session.append_label_change(session.get_entries()[0].id, f"label {n}")


def _move(session: Session, n: int) -> str | None:
    leaf = session.leaf_id
    return session.move_to(leaf, {"summary": f"moved {n}"}) if leaf else None


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_session_shared_by_threads_keeps_its_chain_and_every_append(backend: str, tmp_path: Path) -> None:
    """Threads appending through one Session: every id lands once, the log verifies hash-chained,
    and a fresh writer afterwards still chains (the log was never extended unchained)."""
    if backend == "postgres":
        pg.require_postgres()
    session, reopen = BACKENDS[backend](tmp_path)
    session.append_message(kit.user("first"))
    acked = _hammer(session, [_message, _label, _move, _message])
    present = [e.id for e in session.get_entries()]
    assert len(present) == len(set(present))
    assert set(acked) <= set(present)
    report = verify(session)
    assert report.ok and report.chained, report.problems
    session.close()  # its writer is done (a JSONL file has one writer at a time)
    again = reopen()
    assert [e.id for e in again.get_entries()] == present
    again.append_message(kit.user("after the threads"))
    report = verify(again)
    assert report.ok and report.chained, report.problems
    assert report.lines == len(present) + 2


def test_a_line_not_visible_yet_is_a_conflict_not_an_unchained_log(tmp_path: Path, monkeypatch: Any) -> None:
    """The race behind item 1, made deterministic: a storage looks for the line before its
    append, another writer adds that line just after the look. The append must fail as a
    conflict; before the fix it was written without a chain, and so was every later line."""
    path = tmp_path / "s.jsonl"
    other = Session(JsonlSessionStorage.create(path, cwd="/t"))
    other.append_message(kit.user("one"))
    mine = Session(JsonlSessionStorage.open(path))
    other.append_message(kit.user("two"))  # version 3: mine has not seen it
    mine.storage.chain_head.set(0, None)  # as if it had not looked yet
    storage = mine.storage
    real = storage.read_lines

    def late(count: Any = None, **kwargs: Any) -> Any:
        found = real(count, **kwargs)
        return found[:2] if count == 3 else found  # line 3 "not visible yet"

    monkeypatch.setattr(storage, "read_lines", late)
    with pytest.raises(SessionError) as caught:
        mine.storage.save([_event(mine, version=4)])
    assert caught.value.code == "conflict"
    monkeypatch.undo()
    report = verify(path)
    assert report.ok and report.chained and report.lines == 3


def test_a_chained_log_is_never_extended_unchained(tmp_path: Path) -> None:
    """A chained file whose last line lost its digest (damage) is refused for appends, with
    ``corrupt``, instead of being continued without a chain."""
    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path, cwd="/t"))
    session.append_message(kit.user("one"))
    lines = path.read_bytes().splitlines()
    lines[-1] = lines[-1][: lines[-1].rindex(b',"chain"')] + b"}"
    path.write_bytes(b"\n".join(lines) + b"\n")
    damaged = Session(JsonlSessionStorage.open(path))
    with pytest.raises(SessionError) as caught:
        damaged.append_message(kit.user("two"))
    assert caught.value.code == "corrupt"
    assert len(path.read_bytes().splitlines()) == 2


def _event(session: Session, *, version: int) -> Any:
    from sessiontree.domain.events import MessageAppended

    return MessageAppended(
        originator_id=session.id,
        originator_version=version,
        timestamp="2026-11-29T11:30:00.000Z",
        id="abcdef01",
        parent_id=None,
        message=kit.user("after a line I did not see"),
    )
