"""The JSONL session storage: one session per file, header first (SPEC section 4).

Opening reads the header only; ``load`` maps the file and checks every line, or trusts a valid sidecar index
(``jsonl_index.py``), holding the entries lazily; ``load_prefix`` reads only what a time-travel view needs. ``save``
seals the lines into the hash chain and appends them with one write, under the file's lock for that append
(``jsonl_file.py``), after taking in the lines other writers appended since.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import msgspec

from sessiontree.audit.line_replace import FileLines
from sessiontree.content import blob_stores
from sessiontree.domain import aggregate
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import FORMAT_VERSION, SessionStarted, leaf_after
from sessiontree.domain.ids import new_session_id, now_iso
from sessiontree.domain.log import EntryLog
from sessiontree.storage.files import is_whole_line
from sessiontree.storage.jsonl_file import (
    AppendingFile,
    StaleFileError,
    TornLineWarning,
    append_error,
    check_durability,
    check_wait,
)
from sessiontree.storage.jsonl_scan import LineLoader, corrupt, read_header, salvage_log, scan
from sessiontree.storage.mapped import RereadingLoader
from sessiontree.storage.pipeline import AS_GIVEN, Redaction
from sessiontree.storage.storage import Rebase, SessionStorage, moved
from sessiontree.wire import jsontext
from sessiontree.wire.codec import Codec, native_codec
from sessiontree.wire.schema import envelope_decoder

LINK_REFUSED = "a symbolic link: a repository holds only its own files (open the file it points to directly, or copy it in)"


def _storage_error(what: str, exc: OSError, path: Path) -> SessionError:
    return SessionError("storage", f"cannot {what}: {exc.strerror or exc}", path=str(path))


class JsonlSessionStorage(FileLines, SessionStorage):
    """One session in one JSONL file (the embedded default).

    ``durability``: ``"flush"`` (default) hands each append to the OS with one write before returning, so it
    survives a crash of the process; ``"fsync"`` also waits until it is on the disk, so it survives a power cut
    (docs/file-format.md gives the cost). Any number of storages, in any processes, append to one file: each append
    takes the file's lock for that append only (docs/repositories.md, *Writers*). ``wait``: how long an append waits
    for the lock another append holds (default None: 10 s; then ``conflict``, naming the holder's pid).
    """

    def __init__(self, path: Path, file: AppendingFile, header: SessionStarted, *, codec: Codec, read_only: bool = False) -> None:
        # content out of line lives in the folder's blob store (a repository gives its own, with its threshold)
        native = codec.dialect.name == "native"
        super().__init__(codec, blob_stores.folder_for(path, durability=file.durability) if native else None)
        self.path = path
        self.header = header
        self.read_only = read_only or not file.writable
        self.skipped: list[tuple[int, str]] = []
        self._file = file
        self._salvaged: list[Any] | None = None
        self._live: LineLoader | None = None  # the loader of the log load() returned, which appends extend

    @property
    def session_id(self) -> str:
        return self.header.originator_id

    @property
    def location(self) -> str:
        return str(self.path)

    @property
    def durability(self) -> str:
        return self._file.durability

    @property
    def warnings(self) -> list[str]:
        """Warnings about the file (a torn last line, a repeated key in a pi line), oldest first."""
        return self._file.warnings

    @property
    def bytes_read(self) -> int:
        """How many bytes of the file this storage has read (time travel reads a prefix)."""
        return self._file.bytes_read

    def close(self) -> None:
        self._file.close()

    @classmethod
    def default_codec(cls) -> Codec:  # what create writes when no codec is given (pi's subclass overrides)
        return native_codec()

    @classmethod
    def create(
        cls, path: str | Path, *, cwd: str = "", metadata: Mapping[str, Any] | None = None, session_id: str | None = None,
        parent_session: str | None = None, durability: str = "flush", timestamp: str | None = None, codec: Codec | None = None,
        wait: float | None = None,
    ) -> JsonlSessionStorage:
        """A new session in a new file at ``path`` (``already_exists`` if there is one)."""
        header = aggregate.start(
            session_id=session_id or new_session_id(), timestamp=timestamp or now_iso(), cwd=cwd,
            parent_session=parent_session, metadata=metadata,
        )
        return cls._create_file(Path(path), header, check_durability(durability), codec or cls.default_codec(), wait)

    @classmethod
    def create_with_header(
        cls, path: str | Path, header: SessionStarted, *, durability: str = "flush", codec: Codec | None = None,
        wait: float | None = None,
    ) -> JsonlSessionStorage:
        """A new file whose first line is ``header`` with every field it has (a copied session keeps its header)."""
        if not isinstance(header, SessionStarted):
            raise TypeError(f"header must be a SessionStarted event, not {header!r}")
        header = attrs.evolve(header, version=FORMAT_VERSION, extra=dict(header.extra))
        return cls._create_file(Path(path), header, check_durability(durability), codec or cls.default_codec(), wait)

    @classmethod
    def create_from_lines(
        cls, path: str | Path, lines: Sequence[bytes], *, durability: str = "flush", wait: float | None = None,
    ) -> JsonlSessionStorage:
        """A new file holding ``lines`` (a whole log, header first) byte for byte, chain digests included."""
        path = Path(path)
        file = cls._new_file(path, check_durability(durability))
        try:
            file.append_at(1, lines)
        except OSError as exc:
            path.unlink(missing_ok=True)
            raise _storage_error("write the file", exc, path) from exc
        finally:
            file.close()
        return cls.open(path, durability=durability, wait=wait)

    @staticmethod
    def _new_file(path: Path, durability: str, wait: float | None = None) -> AppendingFile:
        try:
            return AppendingFile.create(path, durability=durability, wait=check_wait(wait))
        except FileExistsError:
            raise SessionError("already_exists", "a file already exists there", path=str(path)) from None
        except OSError as exc:
            raise _storage_error("create the file", exc, path) from exc

    @classmethod
    def _create_file(
        cls, path: Path, header: SessionStarted, durability: str, codec: Codec, wait: float | None = None,
    ) -> JsonlSessionStorage:
        codec.encode_event(header)  # refuse what cannot be written before making a file
        storage = cls(path, cls._new_file(path, durability, wait), header, codec=codec)
        try:
            storage.save([header])
        except BaseException:
            storage.close()
            path.unlink(missing_ok=True)
            raise
        return storage

    @classmethod
    def open(
        cls, path: str | Path, *, durability: str = "flush", salvage: bool = False, codec: Codec | None = None,
        follow_links: bool = True, wait: float | None = None,
    ) -> JsonlSessionStorage:
        """The session in the file at ``path`` (``not_found`` if there is none). ``salvage=True``
        opens it read-only, skipping every line that cannot be read and reporting it in
        ``skipped`` as ``(line number, reason)``; ``follow_links=False`` refuses a symlink."""
        path = Path(path)
        check_durability(durability)
        try:
            file = AppendingFile.open(path, durability=durability, read_only=salvage, follow=follow_links, wait=check_wait(wait))
        except FileNotFoundError:
            raise SessionError("not_found", "no session file there", path=str(path)) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP and not follow_links:
                raise SessionError("storage", LINK_REFUSED, path=str(path)) from None
            raise _storage_error("open the file", exc, path) from exc
        try:
            header, chosen = read_header(file.header_line(jsontext.MAX_LINE_BYTES), path, codec)
        except ValueError as exc:
            file.close()
            raise corrupt(path, 1, str(exc)) from None
        except OSError as exc:
            file.close()
            raise _storage_error("read the file", exc, path) from exc
        except BaseException:
            file.close()
            raise
        if chosen.dialect.name == "pi":  # pi's files keep pi's dialect (pi/pi_storage.py)
            from sessiontree.pi.pi_storage import PiSessionStorage

            cls = PiSessionStorage if issubclass(PiSessionStorage, cls) else cls
        storage = cls(path, file, header, codec=chosen, read_only=salvage)
        if salvage:
            storage._salvage()
        return storage

    def load(self) -> tuple[SessionStarted, EntryLog]:
        """The header and every entry (held lazily), after checking every line of the file."""
        if self._salvaged is not None:
            return self.header, EntryLog.of(self._salvaged)
        from sessiontree.storage import jsonl_index

        self.pipeline.read_afresh()
        lines, self._live, log = jsonl_index.load(self)
        self.pipeline.head.observe(len(lines), lines[-1], header=lines[0])
        return self.header, log

    @property
    def indexable(self) -> bool:  # is a sidecar index kept for this file (docs/file-format.md)?
        return self._salvaged is None

    def _restore(self, lines: Any, markers: list[int], loader: LineLoader) -> bool:  # decode an index's markers
        return not markers  # only pi's dialect reads some lines as another entry (PiSessionStorage)

    def _extension_ok(self, lines: Any, found: Any, start: int) -> bool:  # may entries from ``start`` extend an index?
        return True

    def load_prefix(self, version: int) -> tuple[SessionStarted, EntryLog]:
        """The header and the entries up to ``version``, reading only that prefix of the file."""
        if self._salvaged is not None:
            return self.header, EntryLog.of(self._salvaged[: max(0, version - 1)])
        lines = self.read_lines(max(1, version), strict=True)[: max(1, version)]
        return self.header, self._scan(lines, self._loader(lines))

    def _loader(self, lines: Any) -> LineLoader:  # a list of lines, or the mapped ones (jsonl_index.py)
        return RereadingLoader(lines, self.path, self.session_id, self.pipeline, self._file.warnings)

    def _scan(self, lines: Any, loader: LineLoader, found: Any = None) -> EntryLog:
        """The checked, lazy log of a file's lines (``found``: their envelopes, checked in bulk), the header checked
        again (a dialect with its own rules overrides ``_entries``)."""
        if not lines:
            raise corrupt(self.path, 1, "no session header")
        header, _ = read_header(lines[0], self.path, self.codec)
        if header.originator_id != self.session_id:
            raise corrupt(self.path, 1, f"the header now names session {header.originator_id}, not {self.session_id}")
        return self._entries(lines, loader, found)

    def _entries(self, lines: Any, loader: LineLoader, found: Any = None) -> EntryLog:
        return scan(lines, loader, found)

    def _salvage(self) -> None:
        _, entries, skipped = salvage_log(self.read_lines(), str(self.path), self.codec, self.blobs)
        self._salvaged, self.skipped = entries, skipped
        if self._file.torn:
            skipped.append((self._file.count + 1, f"torn last line ({len(self._file.torn)} bytes)"))

    def read_lines(self, count: int | None = None, *, strict: bool = False) -> list[bytes]:
        """The file's whole lines (the first ``count``) as on disk; ``strict``: over-long is ``corrupt``, torn is warned of."""
        parts: list[bytes]
        try:
            if count is None:
                parts, tail, size = self._file.read_split(0)
                self._file.observe_lines(0, size, len(parts), tail)
            else:
                data = self._file.read(0, lines=count)
                parts = data.split(b"\n")
                tail, size = parts.pop(), len(data)
        except OSError as exc:
            raise SessionError("storage", f"cannot read the file: {exc.strerror or exc}", path=str(self.path)) from exc
        limit = jsontext.MAX_LINE_BYTES
        if strict and size > limit:  # only then can a line be too long
            for number, part in enumerate(parts, 1):
                if len(part) > limit:
                    raise corrupt(self.path, number, f"line of {len(part)} bytes is over the {limit}-byte line limit")
        if tail and is_whole_line(tail):
            parts.append(tail)
        elif tail and strict and count is None:
            self._file.warn_torn(len(parts) + 1, tail)
        return parts

    def stamp(self) -> tuple[tuple[int, int], int, int] | None:
        """((device, inode), size, mtime) of the file: a rewrite (erasure) replaces the file, so its identity changes."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino), st.st_size, st.st_mtime_ns

    def line_before(self, version: int) -> tuple[bytes, bytes | None]:
        lines = self.read_lines(version - 1)
        if len(lines) < version - 1:
            raise self.conflict(version, f"there is no version {version - 1} to follow")
        return lines[version - 2], lines[0]

    def save(self, events: Sequence[Any]) -> None:
        """Append the events' lines at exactly their versions, with one write: ``conflict`` if another writer took
        them, ``storage`` if the file cannot be written. The events are stored as given, as every backend's ``save``
        stores them: redaction is ``append``'s first step."""
        self.append(events, redaction=AS_GIVEN)

    def append(
        self, events: Sequence[Any], rebase: Rebase | None = None, *, if_version: int | None = None,
        redaction: Redaction | None = None,
    ) -> tuple[list[Any], list[Any]]:
        """Append the events' lines (sealed if the file is chained) with one write under the file's lock, after the
        lines other writers appended since this storage last read (handed to ``rebase`` first, which makes the events
        again to follow them; None: ``conflict``). ``if_version``: ``conflict`` unless the file is at that version."""
        if self.read_only or not events:
            self.check_writable()
            return [], []
        pipeline = self.pipeline  # redact → encode → outline here, seal under the lock
        events = pipeline.redacted(events, redaction)  # a session's redactors, else the pipeline's
        lines = pipeline.encode(events)
        if pipeline.outlines(lines):
            with pipeline.blobs.writing():  # no blob it relies on is collected until the line that refers to it is written
                return self._locked_append(events, pipeline.outline(lines), rebase, if_version)
        return self._locked_append(events, lines, rebase, if_version)

    def _locked_append(
        self, events: Sequence[Any], lines: list[bytes], rebase: Rebase | None, if_version: int | None,
    ) -> tuple[list[Any], list[Any]]:
        for line in lines:  # a line no reader would parse is refused, as the databases refuse it (recorder.stored_event)
            if len(line) > jsontext.MAX_VALUES and (problem := jsontext.unwritable(line)) is not None:
                raise SessionError("invalid_entry", f"the entry's {problem}: no reader would parse it, so it is not stored")
        file = self._file
        known = events[0].originator_version - 1
        foreign: list[bytes] = []
        try:
            file.lock()  # as little as can be under the lock: others' lines are decoded after it
            try:
                new = file.catch_up()
                if file.count != known:
                    if file.count < known:
                        raise StaleFileError(f"version {known + 1} is not the next one ({file.count + 1} is): {self.path} "
                                             f"holds {file.count} lines")
                    if if_version is not None:
                        raise moved(self.session_id, if_version, file.count)
                    if rebase is None:
                        raise StaleFileError(f"version {known + 1} is taken (another writer appended since this one "
                                             "last read the file)")
                    foreign = self._lines_after(known, new)
                    ids, leaf = self._heads(known, foreign)
                    self.pipeline.head.observe(file.count, foreign[-1])
                    old = events
                    events = list(rebase(events, ids, leaf))
                    if [e.parent_id for e in events] != [e.parent_id for e in old]:  # made to follow the log's leaf
                        lines = self.pipeline.lines(events)
                if file.torn:
                    file.repair()
                first = events[0].originator_version
                if first != file.count + 1:
                    raise StaleFileError(f"version {first} is not the next one ({file.count + 1} is)")
                head = self.pipeline.head
                current = head.version == first - 1 > 0 and (head.digest is not None or not head.chained)
                digest = head.digest if current else self.previous_digest(first)
                lines, digest = self.pipeline.seal(lines, digest)
                file.write(lines)
            finally:
                file.unlock()
        except (StaleFileError, OSError) as exc:
            raise append_error(exc, self.session_id, str(self.path)) from (exc if isinstance(exc, OSError) else None)
        self.pipeline.head.set(first + len(lines) - 1, digest)
        taken = self._take_in(known, foreign) if foreign else []
        self._extend_live(first, lines, events)
        return taken, events if isinstance(events, list) else list(events)

    def _lines_after(self, known: int, new: list[bytes]) -> list[bytes]:
        """Lines ``known + 1`` to the file's count (``new``: the last of them, just read)."""
        count = self._file.count
        return new if count - len(new) == known else self.read_lines(count)[known:count]

    def _heads(self, known: int, lines: list[bytes]) -> tuple[list[str], str | None]:
        """The ids of ``lines`` (from line ``known + 1``) and the leaf after them, from their envelopes alone."""
        decode = envelope_decoder(self.codec.dialect.parent_key).decode
        try:
            heads = [decode(line) for line in lines]
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise corrupt(self.path, known + 1 + len(lines), f"another writer's line cannot be read: {exc}") from None
        last = heads[-1]
        leaf = last.id if last.type != "leaf" else leaf_after(self.decode_stored(lines[-1], known + len(lines)))
        return [head.id for head in heads], leaf

    def _take_in(self, known: int, lines: list[bytes]) -> list[Any]:
        """The entries of ``lines`` (lines ``known + 1`` on), decoded; the chain head and the live loader follow them."""
        decode = self.decode_stored
        entries = [decode(line, version) for version, line in enumerate(lines, known + 1)]
        if lines:
            if self.pipeline.head.version <= known + len(lines):
                self.pipeline.head.observe(known + len(lines), lines[-1])
            self._extend_live(known + 1, lines, ())
        return entries

    def entries_after(self, version: int) -> list[Any]:
        """The entries other writers appended after ``version``, read from where this storage last read (no lock:
        a line being written is not complete yet and is read next time)."""
        file = self._file
        try:
            with file.reading():
                file.check_named()
                new = file.catch_up()
                if file.count < version:
                    raise StaleFileError(f"{self.path} holds {file.count} lines, fewer than the {version} read before")
                return self._take_in(version, self._lines_after(version, new)) if file.count > version else []
        except (StaleFileError, OSError) as exc:
            raise append_error(exc, self.session_id, str(self.path)) from (exc if isinstance(exc, OSError) else None)

    def grew(self) -> bool:
        """Has the file grown since this storage last read it (one ``lseek``: what a read checks before it answers)?"""
        return self._file.grew()

    def _extend_live(self, first: int, lines: list[bytes], events: Sequence[Any]) -> None:
        live = self._live
        if live is not None and live.held == first - 2:  # the log keeps no entry for a held line (EntryLoader)
            live.lines.extend(lines)
            live.held += len(lines)
            stand_ins = self.pipeline.codec.stand_ins  # a stand-in's line does not give its event back: the loader keeps it
            if stand_ins and events and (len(events) > 1 or events[0].__class__ in stand_ins):
                for position, appended in enumerate(events, first - 2):
                    if appended.__class__ in stand_ins:
                        live.decoded[position] = appended


__all__ = ["JsonlSessionStorage", "TornLineWarning"]
