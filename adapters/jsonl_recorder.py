"""An eventsourcing persistence module whose stored events are lines of JSONL files.

One file per originator (aggregate), ``<directory>/<originator id>.jsonl``. A stored
event's ``state`` *is* its line when it is a session line (``SessionMapper`` makes the
SPEC 2.2 line and the topic ``sessiontree:<type>``): the line is written verbatim, its
version is its line number (the header, line 1, is version 1) and its topic is read back
from the line's leading ``"type"`` through :func:`topic_of` (``sessiontree:`` + type; no
name read from a file is ever imported). Any other stored event (another app's events, the
library's own recorder test cases) is written as a *generic line*::

    {"type":"stored_event","originator_version":1,"topic":"topic1","state":"state1"}

with ``state_b64`` instead of ``state`` when the bytes are not UTF-8. A file that starts
with a generic line numbers its lines from that line's ``originator_version``.

Concurrency is eventsourcing's: a version that is taken (or not the next one) raises
``IntegrityError``. Appends are serialised across processes by ``flock`` (see
:mod:`sessiontree.adapters.jsonl_file`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    DataError,
    InfrastructureFactory,
    IntegrityError,
    OperationalError,
    ProcessRecorder,
    StoredEvent,
    TrackingRecorder,
)
from eventsourcing.popo import POPOTrackingRecorder

from sessiontree.adapters.jsonl_file import LineFile, StaleFileError, is_whole_line
from sessiontree.adapters.storage import TOPIC_PREFIX

GENERIC_TYPE = "stored_event"
_TYPE_PREFIX = b'{"type":"'
_PREFIX_LEN = len(TOPIC_PREFIX)
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,200}")


def line_type(line: bytes) -> str:
    """The ``type`` of a line: read from its leading bytes, else by parsing it (ValueError)."""
    if line.startswith(_TYPE_PREFIX):
        end = line.find(b'"', 9)
        if end > 0 and b"\\" not in line[9:end]:
            return line[9:end].decode("utf-8")
    obj = orjson.loads(line)
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ValueError("line has no string 'type'")
    return obj["type"]  # type: ignore[no-any-return]


def topic_of(entry_type: str) -> str:
    """The topic of a session line of type ``entry_type`` (the only type-to-topic rule)."""
    return TOPIC_PREFIX + entry_type


_LINE_HEADS: dict[str, bytes] = {}


def _line_head(topic: str) -> bytes:
    """How the session line of ``topic`` begins (b"" if the topic has no session line)."""
    head = b""
    if topic.startswith(TOPIC_PREFIX) and "\\" not in topic:
        head = b'{"type":"%s"' % topic[_PREFIX_LEN:].encode("utf-8")
    if len(_LINE_HEADS) < 1024:  # topics are a few entry types; never grow without bound
        _LINE_HEADS[topic] = head
    return head


def encode_stored(stored: StoredEvent, *, verbatim: bool = True) -> bytes:
    """The line for a stored event: its state itself if it is the session line of its topic.

    ``verbatim=False`` forces a generic line (which states its version): a file whose
    first event is not version 1 starts with one, so line numbers give versions again.
    """
    state = stored.state
    topic = stored.topic
    if verbatim:
        head = _LINE_HEADS.get(topic)
        if head is None:
            head = _line_head(topic)
        if head and state.startswith(head) and state.endswith(b"}") and b"\n" not in state:
            return state
    out: dict[str, Any] = {
        "type": GENERIC_TYPE,
        "originator_version": stored.originator_version,
        "topic": stored.topic,
    }
    try:
        out["state"] = state.decode("utf-8")
    except UnicodeDecodeError:
        out["state_b64"] = base64.b64encode(state).decode("ascii")
    return orjson.dumps(out)


def decode_stored(line: bytes, originator_id: UUID | str, version: int) -> StoredEvent:
    """The stored event a line holds (``version`` is the one its line number gives)."""
    kind = line_type(line)
    if kind == GENERIC_TYPE:
        obj = orjson.loads(line)
        if "topic" in obj and ("state" in obj or "state_b64" in obj):
            if obj.get("originator_version") != version:
                raise ValueError(f"generic line says version {obj.get('originator_version')}, its place {version}")
            state = obj["state"].encode("utf-8") if "state" in obj else base64.b64decode(obj["state_b64"])
            return StoredEvent(originator_id, version, obj["topic"], state)
    return StoredEvent(originator_id, version, topic_of(kind), line)


def first_version(line: bytes) -> int:
    """The version of a file's first line: 1, or what a generic first line says."""
    if line.startswith(b'{"type":"' + GENERIC_TYPE.encode() + b'"'):
        version = orjson.loads(line).get("originator_version")
        if isinstance(version, int):
            return version
    return 1


class JsonlAggregateRecorder(AggregateRecorder):
    """Stored events as JSONL lines, one file per originator under ``directory``.

    ``files`` pre-binds originators to already opened :class:`LineFile` objects (a storage
    of one session at any path does this); other originators live in ``directory``.
    """

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        durability: str = "flush",
        files: dict[str, LineFile] | None = None,
        lock_timeout: float = 30.0,
    ) -> None:
        self.directory = Path(directory) if directory is not None else None
        self.durability = durability
        self.lock_timeout = lock_timeout
        self._files: dict[str, LineFile] = dict(files or {})
        self._bases: dict[str, int] = {}

    # -- files ----------------------------------------------------------------------------

    def path_for(self, originator_id: UUID | str) -> Path:
        name = str(originator_id)
        if self.directory is None or not _SAFE_NAME.fullmatch(name):
            raise DataError(f"no file for originator {name!r} (not a safe file name, or no directory)")
        return self.directory / f"{name}.jsonl"

    def file(self, originator_id: UUID | str, *, create: bool = False) -> LineFile | None:
        """The open file of an originator (None if it has none and ``create`` is false)."""
        key = str(originator_id)
        found = self._files.get(key)
        if found is not None:
            return found
        path = self.path_for(originator_id)
        try:
            if create:
                try:
                    found = LineFile.create(path, durability=self.durability)
                except FileExistsError:
                    found = LineFile.open(path, durability=self.durability)
            else:
                found = LineFile.open(path, durability=self.durability)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise OperationalError(f"cannot open {path}: {exc.strerror or exc}") from exc
        self._files[key] = found
        return found

    def _base(self, key: str, f: LineFile) -> int:
        base = self._bases.get(key)
        if base is None:
            head = f.read(0, lines=1)
            if not head.endswith(b"\n"):
                return 1  # no complete line yet: the first insert decides
            base = self._bases[key] = first_version(head[:-1])
        return base

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()

    # -- writing --------------------------------------------------------------------------

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        self._insert(stored_events)
        return None

    def _insert(self, stored_events: Sequence[StoredEvent]) -> list[tuple[LineFile, int, int]]:
        """Append the events; return (file, first version, count) per originator written."""
        if not stored_events:
            return []
        key = str(stored_events[0].originator_id)
        if len(stored_events) == 1 or all(str(s.originator_id) == key for s in stored_events):
            return [self._insert_one(key, stored_events)]  # every session append
        groups: dict[str, list[StoredEvent]] = {}
        for stored in stored_events:
            groups.setdefault(str(stored.originator_id), []).append(stored)
        work = [(key, self.file(key, create=True), events) for key, events in groups.items()]
        if len(work) > 1:
            work.sort(key=lambda item: str(item[1].path))  # type: ignore[union-attr]
        locked: list[LineFile] = []
        try:
            for _, f, _ in work:
                assert f is not None
                self._lock(f)
                locked.append(f)
            plan = [(key, f, events, self._check(key, f, events)) for key, f, events in work]
            return [
                self._write(key, f, events[0].originator_version, lines)  # type: ignore[arg-type]
                for key, f, events, lines in plan
            ]
        finally:
            for f in reversed(locked):
                f.unlock()

    def _insert_one(self, key: str, events: Sequence[StoredEvent]) -> tuple[LineFile, int, int]:
        """:meth:`_insert` for the events of one originator (the common case, kept lean)."""
        f = self._files.get(key) or self.file(key, create=True)
        assert f is not None
        self._lock(f)
        try:
            return self._write(key, f, events[0].originator_version, self._check(key, f, events))
        finally:
            f.unlock()

    def _lock(self, f: LineFile) -> None:
        """Take ``f``'s write lock (OperationalError if it is read-only or the lock times out)."""
        if not f.writable:
            raise OperationalError(f"{f.path} is not writable")
        try:
            f.lock(self.lock_timeout)
        except (TimeoutError, OSError) as exc:
            raise OperationalError(str(exc)) from exc

    def _write(self, key: str, f: LineFile, first: int, lines: Sequence[bytes]) -> tuple[LineFile, int, int]:
        """Append checked ``lines``, versions from ``first`` (lock held); (file, first version, count)."""
        try:
            f.append(lines)
        except OSError as exc:
            raise OperationalError(f"could not append to {f.path}: {exc.strerror or exc}") from exc
        if f.count == len(lines):
            self._bases[key] = first
        return f, first, len(lines)

    def append_lines(self, originator_id: UUID | str, first_version: int, lines: Sequence[bytes]) -> None:
        """Append session lines as versions ``first_version``, ``first_version + 1``, ...

        What :meth:`insert_events` does for stored events whose states are session lines
        (``encode_stored`` would write each verbatim), for a storage that holds the lines
        already: the same lock, catch-up and version check, without a ``StoredEvent`` per
        line. Every line must be a session line (``{"type":"..."`` first, one JSON object,
        no newline); the first line of a file must be version 1.

        This runs on every append: it first tries the common case in one step
        (:meth:`LineFile.try_append`, compiled), which declines whenever the general path
        below is needed.
        """
        key = originator_id if originator_id.__class__ is str else str(originator_id)
        f = self._files.get(key) or self.file(key, create=True)  # type: ignore[arg-type]
        assert f is not None
        count = f.count
        # a session file starts with version 1
        expected = (self._bases.get(key) or self._base(key, f)) + count if count else 1
        if first_version == expected and f.writable:
            # The common case, when this process has seen the file's end: the steps below
            # in one call (LineFile.try_append); it declines when anything needs them.
            try:
                done = f.try_append(lines, count)  # declines if another thread appended meanwhile
            except OSError as exc:
                raise OperationalError(f"could not append to {f.path}: {exc.strerror or exc}") from exc
            if done:
                if not count:
                    self._bases[key] = first_version
                return
        self._lock(f)
        try:
            self._catch_up(f)
            expected = self._next_version(key, f, 1)  # a session file starts with version 1
            if first_version != expected:
                raise self._version_error(f, first_version, expected, 0)
            self._write(key, f, first_version, lines)
        finally:
            f.unlock()

    def _catch_up(self, f: LineFile) -> None:
        """Under the lock: take in lines other writers appended, cut a torn tail."""
        try:
            f.sync()
            if f.torn:
                f.repair()
        except StaleFileError as exc:
            raise IntegrityError(str(exc)) from None
        except OSError as exc:
            raise OperationalError(f"could not read {f.path}: {exc.strerror or exc}") from exc

    def _next_version(self, key: str, f: LineFile, first: int) -> int:
        """The version the next line of ``f`` gets (``first`` for an empty file: the first
        insert decides, for a file of stored events; a session file starts at 1)."""
        if not f.count:
            return first
        base = self._bases.get(key)
        if base is None:
            base = self._base(key, f)
        return base + f.count

    @staticmethod
    def _version_error(f: LineFile, version: int, expected: int, offset: int) -> IntegrityError:
        taken = version < expected
        return IntegrityError(
            f"{f.path}: version {version} "
            + (
                f"is taken (the file holds {f.count} events; another writer appended "
                "since this one last read it)"
                if taken and offset == 0
                else f"is not the next one ({expected} is)"
            )
        )

    def _check(self, key: str, f: LineFile | None, events: Sequence[StoredEvent]) -> list[bytes]:
        """Under the lock: catch up, repair a torn tail, check versions; the lines to write."""
        assert f is not None
        self._catch_up(f)
        expected = self._next_version(key, f, events[0].originator_version)
        for offset, stored in enumerate(events):
            if stored.originator_version != expected + offset:
                raise self._version_error(f, stored.originator_version, expected + offset, offset)
        lines = [encode_stored(s) for s in events]
        if not f.count and events[0].originator_version != 1:
            lines[0] = encode_stored(events[0], verbatim=False)
        return lines

    # -- reading --------------------------------------------------------------------------

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        key = str(originator_id)
        f = self.file(originator_id)
        if f is None:
            return []
        try:
            base = self._base(key, f)
            if lte is not None and lte < base:
                return []
            data = f.read(0, lines=None if lte is None else lte - base + 1)
        except OSError as exc:
            raise OperationalError(f"could not read {f.path}: {exc.strerror or exc}") from exc
        lines = data.split(b"\n")
        tail = lines.pop()  # b"" after the last newline, or a torn line: never an event
        if tail and is_whole_line(tail):  # a whole last line that only lacks its newline
            lines.append(tail)
        out: list[StoredEvent] = []
        for index, line in enumerate(lines):
            version = base + index
            if (gt is not None and version <= gt) or (lte is not None and version > lte):
                continue
            try:
                out.append(decode_stored(line, originator_id, version))
            except (ValueError, KeyError, TypeError) as exc:
                raise DataError(f"{f.path}:{index + 1}: unreadable line ({exc})") from None
        if desc:
            out.reverse()
        return out[:limit] if limit is not None else out


class JsonlFactory(InfrastructureFactory[TrackingRecorder]):
    """``PERSISTENCE_MODULE=sessiontree.adapters.jsonl_recorder``.

    Environment: ``JSONL_DIRECTORY`` (required; events in it, snapshots in its
    ``snapshots/`` folder) and ``JSONL_DURABILITY`` (``flush``, the default, or ``fsync``).
    Files have no global order and cannot share a transaction with a view, so there is no
    application or process recorder; tracking (for views) is kept in memory.
    """

    JSONL_DIRECTORY = "JSONL_DIRECTORY"
    JSONL_DURABILITY = "JSONL_DURABILITY"

    def _directory(self, purpose: str) -> Path:
        root = self.env.get(self.JSONL_DIRECTORY)
        if not root:
            raise OperationalError(f"{self.JSONL_DIRECTORY} is not set")
        return Path(root) if purpose == "events" else Path(root) / purpose

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        return JsonlAggregateRecorder(
            self._directory(purpose), durability=self.env.get(self.JSONL_DURABILITY, "flush") or "flush"
        )

    def application_recorder(self) -> ApplicationRecorder:
        raise NotImplementedError("the JSONL module has no application sequence (no notification log)")

    def tracking_recorder(self, tracking_recorder_class: type[TrackingRecorder] | None = None) -> TrackingRecorder:
        return (tracking_recorder_class or POPOTrackingRecorder)()

    def process_recorder(self) -> ProcessRecorder:
        raise NotImplementedError("the JSONL module cannot record events and tracking atomically")
