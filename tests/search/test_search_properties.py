"""Search never disagrees with the log: after any appends, leaf moves, labels, renames and deletions, every backend
returns exactly the entries a brute-force scan of the sessions finds, with the same active-branch flags, and every
backend returns the same set of hits for the same sessions."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sessiontree_pg as pg
import sessiontree_searchkit as sk
import sessiontree_testkit as kit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import ToolCall, open_repo
from sessiontree.domain.ids import counter_ids, fixed_clock

VOCABULARY = ("zebra", "zebras", "Zeb", "quokka", "ünïcode", "naïve", "北京", "x1", "42", "snake_case")
words_ = st.sampled_from(VOCABULARY)
texts = st.lists(words_ | st.text(st.characters(blacklist_categories=("Cs",)), max_size=8), max_size=5).map(" ".join)
_terms = st.tuples(st.sampled_from(("", "-", "")), words_, st.sampled_from(("", "*")))
queries = st.tuples(words_, st.sampled_from(("", "*")), st.lists(_terms, max_size=2)).map(
    lambda q: " ".join([q[0] + q[1], *(f"{neg}{word}{star}" for neg, word, star in q[2])]))

picks = st.integers(min_value=0, max_value=1_000)
operations = st.one_of(
    st.tuples(st.just("new"), texts),
    st.tuples(st.just("user"), picks, texts),
    st.tuples(st.just("assistant"), picks, texts, words_),
    st.tuples(st.just("tool"), picks, texts),
    st.tuples(st.just("move"), picks, picks),
    st.tuples(st.just("label"), picks, picks, texts),
    st.tuples(st.just("name"), picks, texts),
    st.tuples(st.just("compact"), picks, texts),
    st.tuples(st.just("delete"), picks),
    st.tuples(st.just("search"), queries),
)


@contextmanager
def repos(backend: str) -> Iterator[tuple[Any, Any]]:
    """A writer and a reader repository on one fresh store (the same object in memory)."""
    with tempfile.TemporaryDirectory() as place:
        if backend == "memory":
            repo = open_repo("memory:", clock=fixed_clock(kit.T0), id_generator=counter_ids())
            yield repo, repo
            repo.close()
            return
        with contextlib.ExitStack() as stack:
            name = stack.enter_context(pg.temp_schema("search")) if backend == "postgres" else ""
            url = {"jsonl": f"jsonl:{Path(place) / 's'}", "sqlite": f"sqlite:{Path(place) / 's.db'}", "postgres": pg.url(name)}
            writer = stack.enter_context(open_repo(url[backend], clock=fixed_clock(kit.T0), id_generator=counter_ids()))
            reader = stack.enter_context(open_repo(url[backend]))
            yield writer, reader


def apply(repo: Any, op: tuple[Any, ...], sessions: list[str]) -> None:
    kind = op[0]
    if kind == "new":
        session = repo.create(cwd="/w")
        session.append_message(kit.user(op[1]))
        sessions.append(session.id)
        session.close()
        return
    if not sessions or kind == "search":
        return
    sid = sessions[op[1] % len(sessions)]
    if kind == "delete":
        repo.delete(sid)
        sessions.remove(sid)
        return
    session = repo.open(sid)
    try:
        ids = [e.id for e in session.get_entries() if e.type != "leaf"]  # a leaf record is no place to move to
        if kind == "user":
            session.append_message(kit.user(op[2]))
        elif kind == "assistant":
            call = ToolCall(id="c1", name=op[3], arguments={"q": op[2]})
            session.append_message(kit.assistant(op[2], tool_calls=[call]))
        elif kind == "tool":
            session.append_message(kit.tool_result("c1", "bash", op[2]))
        elif kind == "move" and ids:
            session.move_to(ids[op[2] % len(ids)])
        elif kind == "label" and ids:
            session.append_label_change(ids[op[2] % len(ids)], op[3] or None)
        elif kind == "name":
            session.append_session_info(op[2] or None)
        elif kind == "compact":
            session.append_compaction(op[2] or "summary", session.leaf_id, 10)
    finally:
        session.close()


def check(writer: Any, reader: Any, query: str) -> None:
    assert sk.found(reader, query) == sk.brute_force(writer, query), query


def run_script(backend: str, script: list[tuple[Any, ...]], probes: list[str]) -> None:
    with repos(backend) as (writer, reader):
        sessions: list[str] = []
        for op in script:
            apply(writer, op, sessions)
            if op[0] == "search":
                check(writer, reader, op[1])
        for query in probes:
            check(writer, reader, query)


@pytest.mark.parametrize("backend", ["memory", "jsonl", "sqlite"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(operations, max_size=25), probes=st.lists(queries, min_size=1, max_size=3))
def test_search_agrees_with_a_brute_force_scan(backend: str, script: list[tuple[Any, ...]], probes: list[str]) -> None:
    run_script(backend, script, probes)


@pytest.mark.postgres
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(operations, max_size=20), probes=st.lists(queries, min_size=1, max_size=3))
def test_search_on_postgresql_agrees_with_a_brute_force_scan(script: list[tuple[Any, ...]], probes: list[str]) -> None:
    pg.require_postgres()
    run_script("postgres", script, probes)


@pytest.mark.postgres
def test_every_backend_returns_the_same_hits_for_the_same_sessions() -> None:
    """The corpus built in each backend, with the same ids: the same (session, entry, branch flag) for every query."""
    pg.require_postgres()
    results: dict[str, dict[str, Any]] = {}
    for backend in ("memory", "jsonl", "sqlite", "postgres"):
        with repos(backend) as (writer, reader):
            sk.build_corpus(writer)
            results[backend] = {q: sk.found(reader, q) for q in sk.QUERIES}
            assert results[backend] == {q: sk.brute_force(writer, q) for q in sk.QUERIES}
    assert results["memory"]["zebra"]  # the corpus does hold hits
    for backend in ("jsonl", "sqlite", "postgres"):
        assert results[backend] == results["memory"], backend
