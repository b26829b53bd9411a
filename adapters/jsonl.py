"""The JSONL session storage: one session per file, header first (SPEC section 4).

``JsonlSessionStorage.create(path, ...)`` makes a new file, ``JsonlSessionStorage.open(path)``
opens one; ``__init__`` touches no file. Opening reads and checks the header only;
``load`` (what ``Session(storage)`` calls) reads the file in one go and checks every line
(see :mod:`sessiontree.adapters.jsonl_scan`); ``load_prefix`` reads only the lines a
time-travel view needs. Writes go through the storage's eventsourcing recorder, the
:class:`~sessiontree.adapters.jsonl_recorder.JsonlAggregateRecorder`: the storage hands it
the lines (``append_lines``, the lean form of ``insert_events`` for lines that are already
session lines), so a stale writer gets eventsourcing's ``IntegrityError``, raised here as
``conflict``.
"""

from __future__ import annotations

import errno
import fcntl
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from eventsourcing.persistence import IntegrityError, PersistenceError

from sessiontree.adapters import codec as codec_module
from sessiontree.adapters.codec import Codec, native_codec
from sessiontree.adapters.jsonl_file import DURABILITIES, LineFile, TornLineWarning, is_whole_line
from sessiontree.adapters.jsonl_recorder import JsonlAggregateRecorder
from sessiontree.adapters.jsonl_salvage import salvage_entries
from sessiontree.adapters.jsonl_scan import JsonlEntry, ScanContext, corrupt, read_header, scan_entries
from sessiontree.adapters.storage import RecorderSessionStorage, SessionMapper
from sessiontree.domain.aggregate import SessionAggregate
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import FORMAT_VERSION, SessionStarted
from sessiontree.domain.ids import new_session_id, now_iso


_LINK_REFUSED = (
    "a symbolic link: a repository holds only its own files (open the file it points to "
    "directly, or copy it in)"
)


def _check_durability(durability: Any) -> str:
    if durability not in DURABILITIES:
        raise ValueError(f"durability must be one of {', '.join(DURABILITIES)}, not {durability!r}")
    return durability  # type: ignore[no-any-return]


class JsonlSessionStorage(RecorderSessionStorage):
    """One session in one JSONL file (the embedded default).

    ``durability``: ``"flush"`` (default) hands each append to the OS with one write
    before returning, so it survives a crash of the process; ``"fsync"`` also waits until
    it is on the disk, so it survives a power cut (see docs/file-format.md for the cost).
    """

    def __init__(
        self,
        path: Path,
        file: LineFile,
        header: SessionStarted,
        *,
        codec: Codec,
        read_only: bool = False,
    ) -> None:
        recorder = JsonlAggregateRecorder(files={header.originator_id: file}, durability=file.durability)
        super().__init__(recorder, header.originator_id, location=str(path), mapper=SessionMapper(codec))
        self.path = path
        self.header = header
        self.codec = codec
        self.read_only = read_only or not file.writable
        self.skipped: list[tuple[int, str]] = []
        self._file = file
        self._salvaged: list[Any] | None = None

    # -- named constructors ---------------------------------------------------------------

    @classmethod
    def default_codec(cls) -> Codec:
        """The dialect ``create`` writes when no codec is given (a dialect's subclass overrides)."""
        return native_codec()

    @classmethod
    def create(
        cls,
        path: str | Path,
        *,
        cwd: str = "",
        metadata: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        parent_session: str | None = None,
        durability: str = "flush",
        timestamp: str | None = None,
        codec: Codec | None = None,
    ) -> JsonlSessionStorage:
        """A new session in a new file at ``path`` (``already_exists`` if there is one)."""
        path = Path(path)
        _check_durability(durability)
        codec = codec or cls.default_codec()
        agg = SessionAggregate.create(
            session_id=session_id or new_session_id(),
            timestamp=timestamp or now_iso(),
            cwd=cwd,
            parent_session=parent_session,
            metadata=metadata,
        )
        return cls._create_file(path, agg.collect_events()[0], durability, codec)

    @classmethod
    def create_with_header(
        cls, path: str | Path, header: SessionStarted, *, durability: str = "flush", codec: Codec | None = None
    ) -> JsonlSessionStorage:
        """A new file whose first line is ``header`` as it is, unknown fields included (a
        session copied from another storage keeps every field of its header). A header read
        from another dialect or an older version is written in this file's format version."""
        if not isinstance(header, SessionStarted):
            raise TypeError(f"header must be a SessionStarted event, not {header!r}")
        path = Path(path)
        _check_durability(durability)
        codec = codec or cls.default_codec()
        header = attrs.evolve(header, version=FORMAT_VERSION, extra=dict(header.extra))
        return cls._create_file(path, header, durability, codec)

    @classmethod
    def create_from_lines(cls, path: str | Path, lines: Sequence[bytes], *, durability: str = "flush") -> JsonlSessionStorage:
        """A new file holding ``lines`` (a whole log, the header first) byte for byte: a
        verified copy keeps its source's bytes, chain digests included."""
        path = Path(path)
        _check_durability(durability)
        try:
            file = LineFile.create(path, durability=durability)
        except FileExistsError:
            raise SessionError("already_exists", "a file already exists there", path=str(path)) from None
        except OSError as exc:
            raise SessionError("storage", f"cannot create the file: {exc.strerror or exc}", path=str(path)) from exc
        try:
            file.lock()
            try:
                file.append(lines)
            finally:
                file.unlock()
        except BaseException as exc:
            file.close()
            path.unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise SessionError("storage", f"cannot write the file: {exc.strerror or exc}", path=str(path)) from exc
            raise
        file.close()
        return cls.open(path, durability=durability)

    @classmethod
    def _create_file(cls, path: Path, header: SessionStarted, durability: str, codec: Codec) -> JsonlSessionStorage:
        events = [header]
        codec.encode_event(header)  # refuse what cannot be written before making a file
        try:
            file = LineFile.create(path, durability=durability)
        except FileExistsError:
            raise SessionError("already_exists", "a file already exists there", path=str(path)) from None
        except OSError as exc:
            raise SessionError("storage", f"cannot create the file: {exc.strerror or exc}", path=str(path)) from exc
        storage = cls(path, file, events[0], codec=codec)
        try:
            storage.save(events)
        except BaseException:
            storage.close()
            path.unlink(missing_ok=True)
            raise
        return storage

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        durability: str = "flush",
        salvage: bool = False,
        codec: Codec | None = None,
        follow_links: bool = True,
    ) -> JsonlSessionStorage:
        """The session in the file at ``path`` (``not_found`` if there is none).

        With ``salvage=True`` the file is opened read-only and every line that cannot be
        read is skipped and reported in ``skipped`` as ``(line number, reason)``.
        ``follow_links=False`` refuses a symbolic link (repositories open their files so).
        """
        path = Path(path)
        _check_durability(durability)
        try:
            file = LineFile.open(path, durability=durability, read_only=salvage, follow=follow_links)
        except FileNotFoundError:
            raise SessionError("not_found", "no session file there", path=str(path)) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP and not follow_links:
                raise SessionError("storage", _LINK_REFUSED, path=str(path)) from None
            raise SessionError("storage", f"cannot open the file: {exc.strerror or exc}", path=str(path)) from exc
        try:
            first = file.read(0, lines=1, limit=codec_module.MAX_LINE_BYTES)
            cut = first.find(b"\n")
            if cut >= 0:
                first = first[:cut]
            if len(first) > codec_module.MAX_LINE_BYTES:
                raise corrupt(path, 1, f"the header line is over the {codec_module.MAX_LINE_BYTES}-byte line limit")
            if cut < 0 and not (first and is_whole_line(first)):
                problem = "the file is empty" if not first else "the header line is incomplete (torn)"
                raise corrupt(path, 1, f"{problem}: no session header")
            header, chosen = read_header(first, path, codec)
        except OSError as exc:
            file.close()
            raise SessionError("storage", f"cannot read the file: {exc.strerror or exc}", path=str(path)) from exc
        except BaseException:
            file.close()
            raise
        if chosen.dialect.name == "pi":  # pi's files keep pi's dialect (adapters/pi_storage.py)
            from sessiontree.adapters.pi_storage import PiSessionStorage

            cls = PiSessionStorage if issubclass(PiSessionStorage, cls) else cls
        storage = cls(path, file, header, codec=chosen, read_only=salvage)
        if salvage:
            storage._salvage()
        return storage

    # -- attributes -----------------------------------------------------------------------

    @property
    def durability(self) -> str:
        return self._file.durability

    @property
    def warnings(self) -> list[str]:
        """Warnings about the file (a torn last line ignored or repaired), oldest first."""
        return self._file.warnings

    @property
    def bytes_read(self) -> int:
        """How many bytes of the file this storage has read (time travel reads a prefix)."""
        return self._file.bytes_read

    def close(self) -> None:
        self.recorder.close()  # type: ignore[attr-defined]

    # -- reading --------------------------------------------------------------------------

    def _context(self) -> ScanContext:
        return ScanContext(self.path, self.header.originator_id, self.codec, self._file.warnings)

    def _read_lines(self, lines: int | None = None, *, strict: bool = True) -> tuple[list[bytes], bytes]:
        try:
            if lines is None:
                parts, tail, size = self._file.read_split(0)
            else:
                data = self._file.read(0, lines=lines)
                parts = data.split(b"\n")
                tail = parts.pop()
                size = len(data)
                del data
        except OSError as exc:
            raise SessionError("storage", f"cannot read the file: {exc.strerror or exc}", path=str(self.path)) from exc
        if strict and size > codec_module.MAX_LINE_BYTES:  # only then can a line be too long
            self._check_lengths(parts)
        if lines is None:
            self._file.observe_lines(0, size, len(parts), tail)
        if tail and is_whole_line(tail):
            parts.append(tail)
            tail = b""
        return parts, tail

    def read_lines(self) -> list[bytes]:
        """Every whole line of the file as it is on disk (a torn last line left out)."""
        lines, _ = self._read_lines(strict=False)
        return lines

    def _check_lengths(self, parts: list[bytes]) -> None:
        """Refuse absurdly long lines (``corrupt``, naming the line) before parsing any."""
        limit = codec_module.MAX_LINE_BYTES
        if not parts or max(map(len, parts)) <= limit:
            return
        for index, part in enumerate(parts):
            if len(part) > limit:
                raise corrupt(self.path, index + 1, f"line of {len(part)} bytes is over the {limit}-byte line limit")

    def _check_header(self, first: bytes) -> None:
        header, _ = read_header(first, self.path, self.codec)
        if header.originator_id != self.header.originator_id:
            raise corrupt(self.path, 1, f"the header now names session {header.originator_id}, not {self.session_id}")

    def load(self) -> tuple[SessionStarted, Sequence[Any]]:
        """The header and every entry (lazy), after checking every line of the file."""
        if self._salvaged is not None:
            return self.header, list(self._salvaged)
        lines, tail = self._read_lines()
        if not lines:
            raise corrupt(self.path, 1, "no session header")
        self._check_header(lines[0])
        entries = self._scan(lines)
        self.chain_head.observe(len(lines), lines[-1], header=lines[0])  # a file without a chain stays unchained
        if tail:
            self._warn_torn(len(lines) + 1, tail)
        return self.header, entries

    def load_prefix(self, version: int) -> tuple[SessionStarted, Sequence[Any]]:
        """The header and the entries up to ``version``, reading only that prefix of the file."""
        if self._salvaged is not None:
            return self.header, self._salvaged[: max(0, version - 1)]
        lines, _ = self._read_lines(lines=max(1, version))
        self._check_header(lines[0])
        return self.header, self._scan(lines[: max(1, version)])

    def _scan(self, lines: list[bytes]) -> list[Any]:
        """Lazy entries for the lines after the header (a dialect with its own rules overrides)."""
        return scan_entries(lines, self._context())

    def _warn_torn(self, lineno: int, tail: bytes) -> None:
        try:  # an append in flight holds the lock: its unfinished line is not torn
            fcntl.flock(self._file.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        fcntl.flock(self._file.fd, fcntl.LOCK_UN)
        message = (
            f"{self.path}: ignoring a torn last line (line {lineno}, {len(tail)} bytes, left by an "
            "interrupted append); it is removed before the next append"
        )
        self._file.warnings.append(message)
        warnings.warn(message, TornLineWarning, stacklevel=3)

    def _salvage(self) -> None:
        lines, tail = self._read_lines(strict=False)
        entries, skipped = salvage_entries(lines, self._context())
        if tail:
            skipped.append((len(lines) + 1, f"torn last line ({len(tail)} bytes)"))
        self._salvaged = entries
        self.skipped = skipped

    # -- writing --------------------------------------------------------------------------

    def save(self, events: Sequence[Any]) -> None:
        """Append the events' lines (sealed into the chain if the file is chained) with one
        write under the file lock: ``conflict`` if another writer took their versions,
        ``storage`` if the file cannot be written.

        The recorder's :meth:`~JsonlAggregateRecorder.append_lines` takes the lines as they
        are: a ``StoredEvent`` per line (what ``insert_events`` takes) would be unwrapped
        again at once, and this runs on every append.
        """
        self.check_writable()
        if not events:
            return
        lines, digest = self.to_lines(events)
        try:
            self.recorder.append_lines(self._session_id, events[0].originator_version, lines)  # type: ignore[attr-defined]
        except IntegrityError as exc:
            raise self._conflict(exc, events) from None
        except PersistenceError as exc:
            raise self._save_failed(exc) from exc
        self.chain_head.set(events[-1].originator_version, digest)  # self.saved(events, digest), inline

    def _conflict(self, exc: IntegrityError, events: Sequence[Any]) -> SessionError:
        return SessionError(
            "conflict",
            f"session {self.session_id} changed since it was read: "
            f"{str(exc).removeprefix(f'{self.path}: ')}; reopen it and retry",
            path=str(self.path),
        )

    def _save_failed(self, exc: Exception) -> SessionError:
        return SessionError("storage", f"could not save to session {self.session_id}: {exc}", path=str(self.path))


__all__ = ["JsonlEntry", "JsonlSessionStorage", "TornLineWarning"]
