"""A PostgreSQL connection dropped in the middle of an append, through a cutting TCP proxy:
the append either succeeds exactly once or fails with a clear ``storage`` error, and an
acknowledgement lost after the commit is not mistaken for a conflict."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sessiontree_faults as faults
import sessiontree_testkit as kit

from sessiontree import SessionError, open_repo, verify

pytestmark = pytest.mark.postgres


@pytest.fixture
def through_proxy() -> Iterator[tuple[Any, str, str]]:
    """(proxy, URL through the proxy, direct URL) for a fresh schema; one pooled connection."""
    import sessiontree_pg as pg
    import sessiontree_tcp_proxy as tcp

    pg.require_postgres()
    proxy = tcp.Proxy(pg.HOST, pg.PORT)
    schema = f"drop_{uuid.uuid4().hex[:12]}"
    options = f"?schema={schema}&pool_size=1&max_overflow=0"
    try:
        yield proxy, f"postgresql://{pg.USER}@127.0.0.1:{proxy.port}/{pg.DBNAME}{options}", pg.url(schema)
    finally:
        proxy.close()
        pg.drop_schema(schema)


def stored_once(direct_url: str, session: Any) -> list[str]:
    """The session's entries as another connection sees them: each id once, the log verifying."""
    other = open_repo(direct_url)
    try:
        again = other.open(session.id)
        ids = [e.id for e in again.get_entries()]
        assert len(ids) == len(set(ids)) and verify(again).ok
        assert again.get_entries() == session.get_entries()  # memory and database agree
        return ids
    finally:
        other.close()


# An append is one statement in autocommit (the insert and the listing row): the cut lands right
# after the server got it (it commits; the answer is lost) or right before it is sent. Its text is
# sent once (prepared), so the marker is the message the append carries.
@pytest.mark.parametrize(
    "cut",
    [("after", b"during the drop"), ("before", b"during the drop")],
    ids=["ack lost after the commit", "dropped before the insert"],
)
def test_a_dropped_connection_during_an_append(through_proxy: tuple[Any, str, str], cut: tuple[str, bytes]) -> None:
    """eventsourcing reconnects and retries; the entry is stored exactly once and the session goes on."""
    proxy, url, direct = through_proxy
    repo = open_repo(url)
    session = repo.create(cwd="/p")
    session.append_message(kit.user("before the drop"))
    when, marker = cut
    (proxy.cut_after if when == "after" else proxy.cut_before)(marker)
    entry_id = session.append_message(kit.user("during the drop"))
    assert proxy.cuts == 1  # the connection really was cut
    ids = stored_once(direct, session)
    assert ids.count(entry_id) == 1
    session.append_message(kit.user("after the drop"))
    assert len(stored_once(direct, session)) == 3
    repo.close()
    faults.record("pg_drop", case=f"cut {when} {marker.decode()}", outcome="append succeeded once", duplicates=0, lost=0)


@pytest.mark.slow  # eventsourcing tries ten times, a second each here
def test_an_unreachable_server_is_a_clear_error_and_a_retry_works(through_proxy: tuple[Any, str, str]) -> None:
    """With the server gone for good the append fails as ``storage`` (after eventsourcing's own
    retries); nothing was stored; once it is back the same append succeeds, once."""
    proxy, url, direct = through_proxy
    repo = open_repo(url + "&connect_timeout=1")  # how long each of eventsourcing's tries waits
    session = repo.create(cwd="/p")
    session.append_message(kit.user("before the outage"))
    proxy.drop_all(refuse=True)
    with pytest.raises(SessionError) as caught:
        session.append_message(kit.user("during the outage"))
    assert caught.value.code == "storage" and session.id in caught.value.message
    assert len(stored_once(direct, session)) == 1
    proxy.refuse = False
    session.append_message(kit.user("during the outage"))
    texts = [e.message.content[0].text for e in session.get_entries()]  # type: ignore[attr-defined]
    assert texts == ["before the outage", "during the outage"] and len(stored_once(direct, session)) == 2
    repo.close()
    faults.record("pg_drop", case="server unreachable", outcome=f"SessionError {caught.value.code}: {caught.value.message}",
                  duplicates=0, lost=0)
