"""``repo.list()`` in pages and with filters, the same on every backend (memory, JSONL, SQLite, PostgreSQL)."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import sessiontree_testkit as kit

from sessiontree import SessionError
from sessiontree.storage.listing import ListQuery, decode_cursor, select, sort_key
from sessiontree.storage.store import SessionInfo


def fill(repo: Any) -> list[Any]:
    """Seven sessions, oldest first: cwds /a and /b, some named, the fourth touched last."""
    made = [repo.create(cwd="/a" if n % 2 else "/b", name=["Deploy prod", "deploy staging", None][n % 3]) for n in range(7)]
    made[3].append_message(kit.user("touched last"))
    return made


def ids(rows: Any) -> list[str]:
    return [r.id for r in rows]


def test_pages_cover_the_listing_once_in_order(make_repo: Any) -> None:
    repo = make_repo()
    made = fill(repo)
    everything = repo.list()
    assert ids(everything)[0] == made[3].id and everything.cursor is None
    pages, cursor = [], None
    while True:
        page = repo.list(limit=3, cursor=cursor)
        pages.append(ids(page))
        cursor = page.cursor
        if cursor is None:
            break
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [i for p in pages for i in p] == ids(everything)
    assert repo.list(limit=7).cursor is None  # exactly the rest: no empty page after it


def test_filters_by_cwd_name_and_since(make_repo: Any) -> None:
    repo = make_repo()
    made = fill(repo)
    everything = repo.list()
    assert ids(repo.list(cwd="/a")) == [i.id for i in everything if i.cwd == "/a"]
    assert set(ids(repo.list(name="DEPLOY"))) == {m.id for n, m in enumerate(made) if n % 3 != 2}
    assert ids(repo.list(name="prod", cwd="/b")) == [i.id for i in everything if i.cwd == "/b" and i.name == "Deploy prod"]
    since = everything[2].modified
    assert ids(repo.list(since=since)) == ids(everything[:3])
    later = kit.T0 + timedelta(days=1)
    assert repo.list(since=later) == []
    assert ids(repo.list(since=since, limit=2)) == ids(everything[:2])


def test_bad_arguments_are_clear_errors(make_repo: Any) -> None:
    repo = make_repo()
    for bad in ({"limit": 0}, {"cursor": "nonsense!"}, {"since": "yesterday"}, {"since": datetime(2026, 1, 1)}):
        with pytest.raises(SessionError) as err:
            repo.list(**bad)
        assert err.value.code == "invalid_entry"
    with pytest.raises(TypeError):
        repo.list(limit="5")


def info(n: int, modified: int, cwd: str, name: str | None) -> SessionInfo:
    stamp = (kit.T0 + timedelta(seconds=modified)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return SessionInfo(id=f"s{n}", path="", cwd=cwd, created=kit.T0_ISO, modified=stamp, name=name, message_count=0,
                       first_message=None)


rows = st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["/a", "/b"]), st.sampled_from([None, "Alpha", "beta"])),
                max_size=25).map(lambda xs: [info(n, *x) for n, x in enumerate(xs)])


@given(rows, st.integers(1, 6), st.sampled_from([None, ("/a",)]), st.sampled_from([None, "ALPHA", "et"]))
def test_paging_through_select_is_the_filtered_sorted_listing(infos: list[SessionInfo], limit: int,
                                                              cwds: Any, name: Any) -> None:
    """Following cursors visits exactly the filtered rows, newest first, whatever the ties."""
    query = ListQuery(cwds=cwds, name=name)
    whole = select(infos, query)
    seen: list[SessionInfo] = []
    after = None
    while True:
        part = select(infos, ListQuery(cwds=cwds, name=name, limit=limit, after=after))
        seen += part
        if part.cursor is None:
            break
        after = decode_cursor(part.cursor)
        assert after == sort_key(part[-1])
    assert seen == whole == sorted(whole, key=sort_key, reverse=True)
    assert {i.id for i in whole} == {i.id for i in infos if query.keeps(i)}


def test_a_page_of_a_jsonl_folder_compares_working_directories_as_pi_does(tmp_path: Path) -> None:
    """A header written ``/srv/app/`` is a session started in ``/srv/app``, with a limit too."""
    from sessiontree import open_repo

    repo = open_repo(tmp_path / "r")
    kept = repo.create(cwd="/srv/app/")
    repo.create(cwd="/srv/other")
    assert ids(repo.list(cwd="/srv/app")) == ids(repo.list(cwd="/srv/app", limit=1)) == [kept.id]


def test_a_fork_made_now_lists_first_though_its_entries_keep_older_times(make_repo: Any) -> None:
    """A session's ``modified`` is never before its header's time: a fork of an old branch, made last, is the newest
    session, on every backend (issue 37: `ls` showed it as old); appends after it move it on as usual."""
    repo = make_repo()
    made = fill(repo)
    source = made[3]
    fork = repo.fork(source.id, source.leaf_id, "at")
    rows = repo.list()
    assert ids(rows)[0] == fork.id
    assert rows[0].modified == fork.header.timestamp > source.get_entries()[-1].timestamp
    fork.append_message(kit.user("after the fork"))
    assert repo.list()[0].modified == fork.get_entries()[-1].timestamp
    made[0].append_message(kit.user("touched after the fork"))
    assert ids(repo.list())[:2] == [made[0].id, fork.id]
