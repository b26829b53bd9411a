"""Our in-memory recorder (storage/memory_recorder.py): eventsourcing's own recorder test cases, and what sessions need
beyond them (delete, replace, list, insert only after a stored version)."""

from __future__ import annotations

import threading

import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent
from eventsourcing.tests.persistence import (
    ApplicationRecorderTestCase,
    TrackingRecorderTestCase,
)
from hypothesis import given
from hypothesis import strategies as st

from sessiontree import UserMessage
from sessiontree.repository import open_repo
from sessiontree.storage.database_index import MemorySessionIndexView
from sessiontree.storage.memory_recorder import MemoryRecorder, MemoryTrackingRecorder


class TestAsApplicationRecorder(ApplicationRecorderTestCase[MemoryRecorder]):
    def create_recorder(self) -> MemoryRecorder:
        return MemoryRecorder()


class TestAsTrackingRecorder(TrackingRecorderTestCase):
    def create_recorder(self) -> MemoryTrackingRecorder:
        return MemoryTrackingRecorder()


class TestListingViewAsTrackingRecorder(TrackingRecorderTestCase):
    def create_recorder(self) -> MemorySessionIndexView:
        return MemorySessionIndexView()


def event(sid: str, version: int, state: bytes = b"{}") -> StoredEvent:
    return StoredEvent(sid, version, "t", state)


def test_delete_stream_hides_it_and_keeps_the_notification_log():
    recorder = MemoryRecorder()
    recorder.insert_events([event("a", 1), event("a", 2), event("b", 1)])
    recorder.delete_stream("a")
    recorder.delete_stream("missing")  # nothing to delete: no error
    assert recorder.select_events("a") == []
    assert recorder.stream_ids() == ["b"]
    assert recorder.max_notification_id() == 3
    recorder.insert_events([event("a", 1, b"again")])  # the id is free again
    assert [bytes(e.state) for e in recorder.select_events("a")] == [b"again"]


def test_insert_following_refuses_after_a_missing_version_and_stores_nothing():
    recorder = MemoryRecorder()
    recorder.insert_events([event("a", 1)])
    recorder.insert_following([event("a", 2), event("a", 3)])
    recorder.delete_stream("a")
    with pytest.raises(IntegrityError):
        recorder.insert_following([event("a", 4)])
    with pytest.raises(IntegrityError):
        recorder.insert_following([event("b", 2)])
    assert recorder.select_events("a") == [] and recorder.stream_ids() == []


def test_replace_event_rewrites_one_state_and_refuses_a_missing_one():
    recorder = MemoryRecorder()
    recorder.insert_events([event("a", 1, b"one"), event("a", 2, b"two")])
    recorder.replace_event("a", 2, b"erased")
    assert [bytes(e.state) for e in recorder.select_events("a")] == [b"one", b"erased"]
    assert [bytes(n.state) for n in recorder.select_notifications(None, 10)] == [b"one", b"erased"]
    assert sorted(recorder.stored_states()) == [b"erased", b"one"]
    with pytest.raises(LookupError):
        recorder.replace_event("a", 3, b"x")
    with pytest.raises(LookupError):
        recorder.replace_event("b", 1, b"x")


def test_a_refused_batch_stores_none_of_its_events():
    recorder = MemoryRecorder()
    recorder.insert_events([event("a", 1)])
    with pytest.raises(IntegrityError):
        recorder.insert_events([event("b", 1), event("a", 1)])
    with pytest.raises(IntegrityError):
        recorder.insert_events([event("c", 1), event("c", 1)])
    assert recorder.stream_versions() == {"a": 1}
    assert recorder.max_notification_id() == 1


def test_the_lock_is_the_recorders_own_and_holds_off_writers():
    """A caller holding ``lock`` (a prune checking a session's length, then deleting it) keeps appends out meanwhile."""
    recorder = MemoryRecorder()
    recorder.insert_events([event("a", 1)])
    done, outcome = threading.Event(), []

    def append() -> None:
        try:
            recorder.insert_following([event("a", 2)])
            outcome.append("stored")
        except IntegrityError:
            outcome.append("refused")
        done.set()

    with recorder.lock:
        writer = threading.Thread(target=append)
        writer.start()
        assert not done.wait(0.2)
        recorder.delete_stream("a")
    writer.join()
    assert outcome == ["refused"] and recorder.select_events("a") == []


def test_a_subscription_gives_what_is_recorded_then_waits_for_more_until_stopped():
    recorder = MemoryRecorder()
    recorder.insert_events([event("a", 1), StoredEvent("b", 1, "other", b"{}"), event("a", 2)])
    with recorder.subscribe(gt=1, topics=["t"]) as subscription:
        assert next(subscription).id == 3  # after 1, of topic "t" only
        later = threading.Timer(0.05, lambda: recorder.insert_events([event("c", 1)]))
        later.start()
        nxt = next(subscription)  # waits for the insert made meanwhile by another thread
        assert (nxt.id, nxt.originator_id, nxt.topic) == (4, "c", "t")
        threading.Timer(0.05, subscription.stop).start()
        with pytest.raises(StopIteration):  # stopped while it waited
            next(subscription)


@given(versions=st.integers(0, 12), gt=st.none() | st.integers(-1, 13), lte=st.none() | st.integers(-1, 13),
       desc=st.booleans(), limit=st.none() | st.integers(1, 13))
def test_select_events_filters_like_a_list(versions, gt, lte, desc, limit):
    recorder = MemoryRecorder()
    recorder.insert_events([event("a", v) for v in range(1, versions + 1)])
    recorder.insert_events([event("b", 1)])
    want = [v for v in range(1, versions + 1) if (gt is None or v > gt) and (lte is None or v <= lte)]
    want = (want[::-1] if desc else want)[:limit]
    assert [e.originator_version for e in recorder.select_events("a", gt=gt, lte=lte, desc=desc, limit=limit)] == want


@pytest.mark.parametrize("url", ["memory:", "popo:"])
def test_the_in_memory_repositories_record_through_it(url):
    repo = open_repo(url)
    session = repo.create(cwd="/w")
    session.append_message(UserMessage("hi"))
    recorder = repo.store.recorder
    assert isinstance(recorder, MemoryRecorder)
    assert len(recorder.select_events(session.id)) == 2
