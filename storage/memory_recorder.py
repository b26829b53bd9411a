"""Our in-memory recorder: eventsourcing's public ``ApplicationRecorder`` interface over a list, plus what sessions need.

eventsourcing's POPO recorder keeps its lock and tables in private attributes, and sessions need more than its public
methods: delete a stream, replace one stored event (erasure), list the streams, append after a version only while that
version is stored. So the memory and ``popo:`` stores use this recorder, which owns its lock and tables outright.
Stored events form one list in insertion order (the notification log, ids from 1); each stream indexes its versions
into that list. Deleting a stream drops its index, as POPO does: its notifications stay in the log.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    ApplicationRecorder,
    IntegrityError,
    Notification,
    StoredEvent,
    Subscription,
    Tracking,
    TrackingRecorder,
)


class MemoryRecorder(ApplicationRecorder):
    """Stored events in memory, behind one lock (``lock``) that callers may hold across several calls."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.recorded = threading.Condition(self.lock)  # woken by each insert: subscriptions wait on it
        self._events: list[StoredEvent] = []
        self._streams: dict[str, dict[int, int]] = {}  # stream id -> version -> position in _events

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int]:
        """Record the events at once, or none: ``IntegrityError`` if a version is taken or given twice."""
        with self.lock:
            taken = set()
            for s in stored_events:
                key = (str(s.originator_id), s.originator_version)
                if key in taken or s.originator_version in self._streams.get(key[0], {}):
                    raise IntegrityError(f"Stored event already recorded: {s}")
                taken.add(key)
            ids = []
            for s in stored_events:
                self._events.append(s)
                self._streams.setdefault(str(s.originator_id), {})[s.originator_version] = len(self._events) - 1
                ids.append(len(self._events))
            self.recorded.notify_all()
            return ids

    def insert_following(self, stored_events: Sequence[StoredEvent]) -> Sequence[int]:
        """As ``insert_events``, but only while the version before the first is stored (``IntegrityError`` otherwise):
        an append to a stream deleted meanwhile stores nothing."""
        with self.lock:
            first = stored_events[0]
            if first.originator_version - 1 not in self._streams.get(str(first.originator_id), {}):
                raise IntegrityError(f"version {first.originator_version - 1} of {first.originator_id} is not stored")
            return self.insert_events(stored_events)

    def select_events(
        self, originator_id: UUID | str, *, gt: int | None = None, lte: int | None = None, desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        with self.lock:
            index = self._streams.get(str(originator_id), {})
            versions = sorted(index, reverse=desc)  # inserted in order already; sorting keeps that a non-assumption
            out = []
            for v in versions:
                if (gt is not None and v <= gt) or (lte is not None and v > lte):
                    continue
                out.append(self._events[index[v]])
                if limit is not None and len(out) >= limit:
                    break
            return out

    def select_notifications(
        self, start: int | None, limit: int, stop: int | None = None, topics: Sequence[str] = (), *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        with self.lock:
            first = 1 if start is None else max(start if inclusive_of_start else start + 1, 1)
            last = len(self._events) if stop is None else min(stop, len(self._events))
            out = []
            for nid in range(first, last + 1):
                s = self._events[nid - 1]
                if topics and s.topic not in topics:
                    continue
                out.append(Notification(id=nid, originator_id=s.originator_id, originator_version=s.originator_version,
                                        topic=s.topic, state=s.state))
                if len(out) >= limit:
                    break
            return out

    def max_notification_id(self) -> int | None:
        with self.lock:
            return len(self._events) or None

    def subscribe(self, gt: int | None = None, topics: Sequence[str] = ()) -> Subscription[ApplicationRecorder]:
        """The notifications after ``gt`` (those of ``topics`` only, if given), then each new one as it is recorded,
        until the subscription is stopped (eventsourcing's ``Subscription``: a context manager and an iterator)."""
        return MemorySubscription(self, gt, topics)

    def delete_stream(self, originator_id: str) -> None:
        """Forget a stream: nothing reads its events again (their notifications stay in the log)."""
        with self.lock:
            self._streams.pop(originator_id, None)

    def replace_event(self, originator_id: str, version: int, state: bytes) -> None:
        """Replace the state of one stored event (erasure); ``LookupError`` when there is none."""
        with self.lock:
            position = self._streams.get(originator_id, {}).get(version)
            if position is None:
                raise LookupError(f"session {originator_id} has no version {version}")
            old = self._events[position]
            self._events[position] = StoredEvent(old.originator_id, old.originator_version, old.topic, state)

    def stream_versions(self) -> dict[str, int]:
        """Every stream holding events, with its highest version."""
        with self.lock:
            return {sid: max(index) for sid, index in self._streams.items() if index}

    def stream_ids(self) -> list[str]:
        """Every stream holding events."""
        return list(self.stream_versions())

    def stored_states(self) -> Iterator[bytes]:
        """The state of every stored event a stream still reads (a snapshot taken under the lock)."""
        with self.lock:
            states = [bytes(self._events[i].state) for index in self._streams.values() for i in index.values()]
        return iter(states)


class MemoryTrackingRecorder(TrackingRecorder):
    """eventsourcing's ``TrackingRecorder`` in memory, with a lock of its own (``lock``) for subclasses' views."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._tracking: dict[str, int] = {}

    def check_tracking(self, tracking: Tracking) -> None:
        """``IntegrityError`` unless ``tracking`` is past the last one recorded for its application."""
        last = self._tracking.get(tracking.application_name)
        if last is not None and last >= tracking.notification_id:
            raise IntegrityError(f"Tracking notification ID {tracking.notification_id} "
                                 f"not greater than current max tracking ID {last}")

    def insert_tracking(self, tracking: Tracking) -> None:
        with self.lock:
            self.check_tracking(tracking)
            self._tracking[tracking.application_name] = tracking.notification_id

    def max_tracking_id(self, application_name: str) -> int | None:
        with self.lock:
            return self._tracking.get(application_name)


class MemorySubscription(Subscription[ApplicationRecorder]):
    """A subscription to a :class:`MemoryRecorder`: iterating waits for the next notification (no thread of its own)."""

    def __init__(self, recorder: MemoryRecorder, gt: int | None = None, topics: Sequence[str] = ()) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        self.recorder, self.after, self.topics, self.stopped = recorder, gt or 0, tuple(topics), False

    def stop(self) -> None:
        super().stop()
        with self.recorder.recorded:
            self.stopped = True
            self.recorder.recorded.notify_all()

    def __next__(self) -> Notification:
        with self.recorder.recorded:
            while not self.stopped:
                found = self.recorder.select_notifications(self.after, 1, topics=self.topics, inclusive_of_start=False)
                if found:
                    self.after = found[0].id
                    return found[0]
                self.recorder.recorded.wait()
            raise StopIteration
