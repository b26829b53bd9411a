"""What a session storage is: the port the Session service writes through.

A backend implements two methods: ``save`` appends new events at exactly their versions, atomically, or raises
``SessionError`` (``conflict`` when another writer took them, ``storage`` when the medium failed), and ``read_lines``
gives back every stored line, header first. Every line goes through the storage's pipeline (``pipeline.py``: redact
-> encode -> outline -> seal, then inline -> decode), so a session reads back identically from any backend. The rest
is built here on those two: ``load`` (the header and the entry log), ``append`` (what a Session writes through: the
events go after whatever the log holds at write time, the entries other writers appended meanwhile handed to the
caller's ``rebase`` first, so no writer is refused because another wrote first; ``if_version``: only if the log is
still at that version), time travel and the line a new one chains to. A backend overrides what it does faster:
``recorder.py`` (an eventsourcing recorder: memory, SQLite, PostgreSQL), ``jsonl.py`` (a file).
"""

from __future__ import annotations

import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted, leaf_after
from sessiontree.domain.log import EntryLog
from sessiontree.storage.pipeline import LinePipeline, Redaction
from sessiontree.wire.codec import Codec, native_codec

# Given the caller's events as they are written (redacted), the ids of the entries other writers appended since they were
# made (in order, right after the version the caller knew) and the log's leaf after them, those events made again to
# follow them. Called with the file's lock held (JSONL), so it only renumbers: the entries themselves are decoded and
# returned after the write.
Rebase = Callable[[Sequence[Any], list[str], str | None], Sequence[Any]]

# A database append that finds its version taken catches up and tries again, with a random backoff, for at least
# APPEND_TRIES tries and APPEND_WAIT seconds (as long as a JSONL append waits for the file's lock), then ``conflict``.
APPEND_TRIES = 20
APPEND_WAIT = 10.0
_BACKOFF_CAP = 0.02  # seconds: the longest pause between two tries


class VersionTaken(SessionError):
    """``conflict`` because another writer took the versions an append wanted (an ``append`` catches up and retries)."""


def moved(session_id: str, if_version: int, version: int) -> SessionError:
    """The ``conflict`` of an append whose ``if_version`` is not the log's version."""
    return SessionError(
        "conflict", f"session {session_id} is at version {version}, not {if_version} (if_version): another writer "
        "appended since it was read; nothing was written",
    )


class SessionStorage(ABC):
    """One session's durable log (the port the Session service writes through)."""

    read_only: bool = False
    chain_new_sessions = True  # a new native log is hash-chained from its header (False: not at all)

    def __init__(self, codec: Codec | None = None, blobs: Any = None) -> None:
        self.pipeline = LinePipeline(codec or native_codec(), blobs)  # every line's way in and out (pipeline.py)

    @property
    def codec(self) -> Codec:
        """The dialect's codec (the pipeline's encode and decode step)."""
        return self.pipeline.codec

    @codec.setter
    def codec(self, codec: Codec) -> None:
        self.pipeline.codec = codec

    @property
    def blobs(self) -> Any:
        """Where content kept out of line lives (the pipeline's outline step; None: every line holds its content)."""
        return self.pipeline.blobs

    @blobs.setter
    def blobs(self, store: Any) -> None:
        self.pipeline.blobs = store

    @property
    def chain_head(self) -> Any:
        """The digest of the last line this storage knows (the pipeline's seal step)."""
        return self.pipeline.head

    def decode_stored(self, line: bytes, version: int) -> Any:
        """The event of a stored line (the pipeline's way out)."""
        return self.pipeline.decode(line, self.session_id, version)

    # What a backend must implement is ``save`` and ``read_lines`` (eventsourcing's recorders have two abstract methods
    # too); everything else here is built on them, and a backend overrides what it can do faster (a file's lazy load, a
    # database's select of one version).
    _session_id: str
    _location: str

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def location(self) -> str:
        """Where the log lives (a path, a URL or ``memory:<id>``), for messages and listings."""
        return self._location

    @abstractmethod
    def save(self, events: Sequence[Any]) -> None:
        """Append ``events`` (consecutive versions) atomically, through the pipeline's encode, outline and seal:
        ``conflict`` (:class:`VersionTaken`) when another writer took a version, ``storage`` when the medium failed."""

    @abstractmethod
    def read_lines(self) -> list[bytes]:
        """Every line of the log exactly as stored, the header first (what verify reads)."""

    def load(self) -> tuple[SessionStarted, EntryLog]:
        """The header and the log of every entry, in order: the stored lines through the pipeline's way out."""
        self.pipeline.read_afresh()
        return self._decoded(self.read_lines(), observe=True)

    def _decoded(self, lines: list[bytes], *, observe: bool) -> tuple[SessionStarted, EntryLog]:
        if not lines:
            raise SessionError("not_found", f"session {self.session_id} not found at {self.location}")
        sid, decode = self.session_id, self.decode_stored
        events = []
        for version, line in enumerate(lines, 1):
            try:
                events.append(decode(line, version))
            except SessionError as exc:
                raise SessionError(exc.code, f"session {sid} event {version}: {exc.message}") from None
        header = events[0]
        if not isinstance(header, SessionStarted):
            raise SessionError("corrupt", f"session {sid} does not start with a header")
        if observe:
            self.pipeline.head.observe(len(lines), lines[-1], header=lines[0])
        return header, EntryLog.of(events[1:], f" in session {sid}")

    def append(
        self, events: Sequence[Any], rebase: Rebase | None = None, *, if_version: int | None = None,
        redaction: Redaction | None = None,
    ) -> tuple[list[Any], list[Any]]:
        """Append ``events`` after everything the log holds when it is written; returns the entries other writers
        appended before them (since the caller's version) and the events written (through ``redaction``, a session's
        redactors, else the pipeline's).

        When other writers appended since ``events`` were made (their first version is not the next one), ``rebase``
        makes them again to follow those entries (None: ``conflict``). With ``if_version`` the log must be at that
        version: otherwise ``conflict`` and nothing is written. Here: a database's version constraint refuses a taken
        version, and the append catches up and retries (bounded)."""
        events = self.pipeline.redacted(events, redaction)
        deadline = time.monotonic() + APPEND_WAIT
        attempt = 0
        taken: list[Any] = []
        while attempt < APPEND_TRIES or time.monotonic() < deadline:
            attempt += 1
            try:
                self.save(events)
                return taken, list(events)
            except VersionTaken:
                known = events[0].originator_version - 1
                if rebase is None and if_version is None:
                    raise
                foreign = self.entries_after(known)
                if if_version is not None:
                    raise moved(self.session_id, if_version, known + len(foreign)) from None
                if not foreign:
                    raise
                assert rebase is not None
                taken += foreign
                events = rebase(events, [entry.id for entry in taken], leaf_after(taken[-1]))
            if attempt > 1:  # writers racing for one version: spread them out (exponential, with full jitter)
                time.sleep(random.uniform(0, min(_BACKOFF_CAP, 0.0005 * 2 ** min(attempt, 16))))
        raise SessionError("conflict", f"session {self.session_id}: {attempt} tries in {APPEND_WAIT:g} s all found their "
                           "version taken by another writer; nothing was written, retry")

    def entries_after(self, version: int) -> list[Any]:
        """The entries after ``version`` (what other writers appended since the caller read that far), decoded."""
        header, log = self.load()
        return log.get_many(range(max(0, version - header.originator_version), len(log)))

    def load_prefix(self, version: int) -> tuple[SessionStarted, EntryLog]:
        """The header and the entries up to ``version`` (time travel from storage)."""
        header, log = self.load()
        return header, EntryLog.of(log.get_many(range(min(len(log), max(0, version - 1)))))

    def close(self) -> None:  # noqa: B027 - optional: most hold nothing to release
        """Release resources (files, connections); the default holds none."""

    def check_writable(self) -> None:
        if self.read_only:
            raise SessionError("storage", f"session {self.session_id} at {self.location} is open read-only")

    def previous_digest(self, version: int) -> bytes | None:
        """The digest the line of ``version`` chains to (None: the log is not chained): the pipeline's seal step."""
        return self.pipeline.digest_before(version, self)

    def line_before(self, version: int) -> tuple[bytes, bytes | None]:
        """The stored line of ``version - 1``, and the header line when the chain head needs it
        to tell whether the log is chained; ``conflict`` when there is no such line."""
        lines = self.read_lines()
        if not 2 <= version <= len(lines) + 1:
            raise self.conflict(version, f"there is no version {version - 1} to follow")
        before = lines[version - 2]
        return before, lines[0] if version > 2 and self.pipeline.recorded_digest(before) is None else None

    # Erasure (docs/audit.md): rewriting one stored line, which nothing else does.
    can_replace_lines = False
    why_no_replace = "this storage cannot rewrite a stored line"

    def recorded_digest(self, version: int) -> str | None:
        """The chain digest (hex) that the stored line of ``version`` records; None in an unchained log."""
        return self.pipeline.recorded_digest(self.line_before(version + 1)[0])

    def replace_line(self, version: int, canonical: bytes, digest: str | None) -> None:
        """Store ``canonical`` (sealed with ``digest``, the one the old line recorded) as the line of ``version``."""
        raise SessionError("storage", f"session {self.session_id} at {self.location}: {self.why_no_replace}")

    def stamp(self) -> Any:
        """A cheap token of the stored log that changes whenever it does, as a tuple whose first item changes only when
        the log changed other than by appends (a rewritten line, a file replaced): a reader that keeps the session open
        compares it before trusting what it holds, and reads the log again from the start when that item moved. None:
        this storage cannot tell."""
        return None

    def conflict(self, version: int, why: str = "", *, taken: bool = False) -> SessionError:
        """``conflict``: version ``version`` cannot be written (``taken``: another writer took it, ``VersionTaken``)."""
        return (VersionTaken if taken else SessionError)(
            "conflict",
            f"session {self.session_id} changed since it was read (version {version} is not the next one"
            f"{': ' + why if why else ''}); reopen it and retry",
        )
