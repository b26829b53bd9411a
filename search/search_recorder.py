"""Searching sessions kept by an eventsourcing recorder (memory, POPO, SQLite, PostgreSQL): catching up by versions.

The index remembers each session's version; :func:`session_versions` asks the store for every session's current one,
and only sessions whose version moved are read, from the version after the one indexed. It does not read the
notification log: how the store finds its sessions' versions is this one function's business, so a store that keeps
a per-session summary row answers from it instead. A session whose last indexed entry is no longer there (deleted,
then made again) is read again from its header; a session gone is dropped.
"""

from __future__ import annotations

import threading
from typing import Any

import attrs

from sessiontree.content.blob_tables import blobs_of
from sessiontree.search.search_state import Change, Filters, Hit, SearchIndex, SourceState, checked
from sessiontree.search.search_text import Row, backs, entry_row, erased_id, same_place, with_text, without_erased
from sessiontree.storage.memory_recorder import MemoryRecorder
from sessiontree.wire.jsontext import DECODE_ERRORS, loads
from sessiontree.wire.schema import header_of, line_of

HIDDEN = "~"  # streams that are not sessions (``~deletions``) start with this


def session_versions(recorder: Any, module: str) -> dict[str, int]:
    """Every session's current version in ``recorder`` (ours in memory, or eventsourcing's SQLite or PostgreSQL one)."""
    if isinstance(recorder, MemoryRecorder):  # memory, popo: (memory_recorder.py)
        return {sid: v for sid, v in recorder.stream_versions().items() if not sid.startswith(HIDDEN)}
    listing = getattr(recorder, "listing_table_name", None)  # PostgreSQL's lock-free recorder keeps a row per session
    table = listing or recorder.events_table_name
    select = ("SELECT session_id AS sid, version AS v FROM {0}" if listing else
              "SELECT originator_id AS sid, MAX(originator_version) AS v FROM {0} GROUP BY originator_id")
    if module == "eventsourcing.sqlite":
        sql: Any = select.format(table)
    else:
        from psycopg.sql import SQL, Identifier

        sql = SQL(select.format("{0}.{1}")).format(Identifier(recorder.datastore.schema), Identifier(table))
    with recorder.datastore.transaction(commit=False) as cursor:
        cursor.execute(sql)
        rows = cursor.fetchall()
    return {str(row["sid"]): int(row["v"]) for row in rows if not str(row["sid"]).startswith(HIDDEN)}


def _line(stored: Any) -> Any:
    try:
        return loads(bytes(stored.state))  # never a row of too many values
    except DECODE_ERRORS:
        return None


def read_session(recorder: Any, sid: str, state: SourceState | None) -> Change:
    """What a session whose version moved adds: the events after ``state``'s version, or all of them."""
    reset = state is not None
    if state is not None:
        last = recorder.select_events(sid, gt=state.version - 1, lte=state.version)
        if last and (entry := line_of(_line(last[0]))) is not None and entry.id == state.last_id:
            reset = False
        else:
            state = None
    whole = state is None
    events = recorder.select_events(sid, gt=state.version if state is not None else None)
    rows: list[Row] = []
    erased: set[str] = set()
    for stored in events:
        data = _line(stored)
        if state is None:
            header = header_of(data)
            if stored.originator_version != 1 or header is None or header.type != "session":
                return Change(sid, None, reset=True)
            cwd = header.cwd
            state = SourceState(sid, cwd=same_place(cwd) if isinstance(cwd, str) else "")
            continue
        row = entry_row(stored.originator_version, with_text(data, bytes(stored.state), blobs_of(recorder)))
        if row is not None:
            rows.append(row)
        if (target := erased_id(data)) is not None:
            erased.add(target)
    if state is None:
        return Change(sid, None, reset=True)
    if erased and not whole:  # an erasure: the session is read again, the erased entries without their text
        return attrs.evolve(read_session(recorder, sid, None), reset=True)
    return Change(sid, state.after(rows), without_erased(rows, erased), reset)


class RecorderSearch:
    """Search over the sessions of one recorder, its index caught up before each query. ``versions`` gives every
    session's current version (``session_versions`` or the store's own); ``unchanged``, where the store has one, is a
    cheap token that stays the same while nothing was written (SQLite's ``data_version``), so asking every session's
    version is skipped then."""

    def __init__(self, index: Any, recorder: Any, versions: Any, unchanged: Any = None) -> None:
        self.index: SearchIndex = index
        self._unchanged, self._token = unchanged, None
        self._writing = index.writing
        self.recorder = recorder
        self.versions = versions
        self._states = index.known()
        self._generation = index.generation()
        self._lock = threading.Lock()

    def refresh(self) -> None:
        if self.index.generation() != self._generation:  # another process wrote the index: read its states again
            self._states, self._generation = self.index.known(), self.index.generation()
        token = self._unchanged() if self._unchanged is not None else None
        if token is not None and token == self._token:
            return
        versions = self.versions()
        self._token = token
        current = all(self._states.get(sid, _NONE).version == v for sid, v in versions.items())
        if current and self._states.keys() <= versions.keys():
            return
        with self._writing():
            moved = [sid for sid, v in versions.items() if self._states.get(sid, _NONE).version != v]
            states = self.index.known(moved + list(self._states.keys() - versions.keys()))  # as stored now
            changes = [read_session(self.recorder, sid, states.get(sid)) for sid in moved
                       if sid not in states or states[sid].version != versions[sid]]
            changes += [Change(sid, None) for sid in states.keys() - versions.keys()]
            self.index.apply(changes)
            self._generation = self.index.generation()
        for sid in states.keys() - versions.keys():
            self._states.pop(sid, None)
        self._states.update((c.source, c.state) for c in changes if c.state is not None)
        for change in changes:
            if change.state is None:
                self._states.pop(change.source, None)

    def search(self, filters: Filters) -> list[Hit]:
        with self._lock:
            self.refresh()
            return checked(self.index.query, filters, self._holds)

    def _holds(self, hit: Hit) -> bool:
        """Does the session hold the hit's entry at the version the index says?"""
        found = self.recorder.select_events(hit.session_id, gt=hit.seq - 1, lte=hit.seq)
        return bool(found) and backs(hit, _line(found[0]), bytes(found[0].state), blobs_of(self.recorder))

    def close(self) -> None:
        self.index.close()


_NONE = SourceState("", version=-1)
