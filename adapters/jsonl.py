"""The JSONL session storage: one session per file, header first (SPEC section 4).

``JsonlSessionStorage.create(path, ...)`` makes a new file, ``JsonlSessionStorage.open(path)``
opens one; ``__init__`` touches no file. Opening reads and checks the header only; ``load``
(what ``Session(storage)`` calls) reads the file and checks every line, holding the entries
lazily (``jsonl_scan.py``); ``load_prefix`` reads only the lines a time-travel view needs.
``save`` seals the events' lines into the hash chain and appends them with one write; the
first save takes the file's writer lease (``jsonl_file.py``), so a second writer gets
``conflict`` naming the holder, and a writer whose view is stale gets ``conflict`` too.
"""

from __future__ import annotations

import errno
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from sessiontree.adapters import chain, jsontext
from sessiontree.adapters.codec import Codec, native_codec
from sessiontree.adapters.files import is_whole_line
from sessiontree.adapters.jsonl_file import DURABILITIES, LineFile, StaleFileError, TornLineWarning, WriterBusyError
from sessiontree.adapters.jsonl_loader import LineLoader
from sessiontree.adapters.jsonl_salvage import salvage_log
from sessiontree.adapters.jsonl_scan import corrupt, read_header, scan
from sessiontree.adapters.storage import SessionStorage
from sessiontree.domain import aggregate
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import FORMAT_VERSION, SessionStarted
from sessiontree.domain.ids import new_session_id, now_iso
from sessiontree.domain.log import EntryLog

LINK_REFUSED = "a symbolic link: a repository holds only its own files (open the file it points to directly, or copy it in)"


def _check_durability(durability: Any) -> str:
    if durability not in DURABILITIES:
        raise ValueError(f"durability must be one of {', '.join(DURABILITIES)}, not {durability!r}")
    return durability  # type: ignore[no-any-return]


def _check_wait(wait: Any) -> float:
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0:
        raise ValueError(f"wait must be a number of seconds >= 0, not {wait!r}")
    return float(wait)


def _storage_error(what: str, exc: OSError, path: Path) -> SessionError:
    return SessionError("storage", f"cannot {what}: {exc.strerror or exc}", path=str(path))


class JsonlSessionStorage(SessionStorage):
    """One session in one JSONL file (the embedded default).

    ``durability``: ``"flush"`` (default) hands each append to the OS with one write before
    returning, so it survives a crash of the process; ``"fsync"`` also waits until it is on
    the disk, so it survives a power cut (docs/file-format.md gives the cost).
    ``wait``: the storage that appends first holds the file's writer lease until it closes;
    another writer's append waits up to ``wait`` seconds for it (default 0: refused at once
    with ``conflict``, naming the holder's pid).
    """

    def __init__(self, path: Path, file: LineFile, header: SessionStarted, *, codec: Codec, read_only: bool = False) -> None:
        super().__init__()
        self.path = path
        self.header = header
        self.codec = codec
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

    # -- named constructors ---------------------------------------------------------------

    @classmethod
    def default_codec(cls) -> Codec:
        """The dialect ``create`` writes when no codec is given (a dialect's subclass overrides)."""
        return native_codec()

    @classmethod
    def create(
        cls, path: str | Path, *, cwd: str = "", metadata: Mapping[str, Any] | None = None, session_id: str | None = None,
        parent_session: str | None = None, durability: str = "flush", timestamp: str | None = None, codec: Codec | None = None,
        wait: float = 0.0,
    ) -> JsonlSessionStorage:
        """A new session in a new file at ``path`` (``already_exists`` if there is one)."""
        header = aggregate.start(
            session_id=session_id or new_session_id(), timestamp=timestamp or now_iso(), cwd=cwd,
            parent_session=parent_session, metadata=metadata,
        )
        return cls._create_file(Path(path), header, _check_durability(durability), codec or cls.default_codec(), wait)

    @classmethod
    def create_with_header(
        cls, path: str | Path, header: SessionStarted, *, durability: str = "flush", codec: Codec | None = None,
        wait: float = 0.0,
    ) -> JsonlSessionStorage:
        """A new file whose first line is ``header`` with every field it has (a copied session
        keeps its header), in this file's format version."""
        if not isinstance(header, SessionStarted):
            raise TypeError(f"header must be a SessionStarted event, not {header!r}")
        header = attrs.evolve(header, version=FORMAT_VERSION, extra=dict(header.extra))
        return cls._create_file(Path(path), header, _check_durability(durability), codec or cls.default_codec(), wait)

    @classmethod
    def create_from_lines(
        cls, path: str | Path, lines: Sequence[bytes], *, durability: str = "flush", wait: float = 0.0,
    ) -> JsonlSessionStorage:
        """A new file holding ``lines`` (a whole log, the header first) byte for byte: a
        verified copy keeps its source's bytes, chain digests included."""
        path = Path(path)
        file = cls._new_file(path, _check_durability(durability))
        try:
            file.append_at(1, lines)
        except OSError as exc:
            file.close()
            path.unlink(missing_ok=True)
            raise _storage_error("write the file", exc, path) from exc
        file.close()
        return cls.open(path, durability=durability, wait=wait)

    @staticmethod
    def _new_file(path: Path, durability: str, wait: float = 0.0) -> LineFile:
        try:
            return LineFile.create(path, durability=durability, wait=_check_wait(wait))
        except FileExistsError:
            raise SessionError("already_exists", "a file already exists there", path=str(path)) from None
        except OSError as exc:
            raise _storage_error("create the file", exc, path) from exc

    @classmethod
    def _create_file(
        cls, path: Path, header: SessionStarted, durability: str, codec: Codec, wait: float = 0.0,
    ) -> JsonlSessionStorage:
        codec.encode_event(header)  # refuse what cannot be written before making a file
        storage = cls(path, cls._new_file(path, durability, wait), header, codec=codec)
        try:
            storage.save([header])
        except BaseException:
            storage.close()
            path.unlink(missing_ok=True)
            raise
        storage._file.release_lease()  # writing a header is not writing the session: its first append leases
        return storage

    @classmethod
    def open(
        cls, path: str | Path, *, durability: str = "flush", salvage: bool = False, codec: Codec | None = None,
        follow_links: bool = True, wait: float = 0.0,
    ) -> JsonlSessionStorage:
        """The session in the file at ``path`` (``not_found`` if there is none).

        With ``salvage=True`` the file is opened read-only and every line that cannot be read
        is skipped and reported in ``skipped`` as ``(line number, reason)``.
        ``follow_links=False`` refuses a symbolic link (repositories open their files so).
        """
        path = Path(path)
        _check_durability(durability)
        try:
            file = LineFile.open(path, durability=durability, read_only=salvage, follow=follow_links, wait=_check_wait(wait))
        except FileNotFoundError:
            raise SessionError("not_found", "no session file there", path=str(path)) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP and not follow_links:
                raise SessionError("storage", LINK_REFUSED, path=str(path)) from None
            raise _storage_error("open the file", exc, path) from exc
        try:
            header, chosen = read_header(_first_line(file, path), path, codec)
        except OSError as exc:
            file.close()
            raise _storage_error("read the file", exc, path) from exc
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

    # -- reading --------------------------------------------------------------------------

    def read_lines(self, count: int | None = None, *, strict: bool = False) -> list[bytes]:
        """The whole lines of the file (the first ``count``), as they are on disk; ``strict``
        refuses an over-long line (``corrupt``) and warns of a torn last line."""
        try:
            if count is None:
                parts, tail, size = self._file.read_split(0)
                self._file.observe_lines(0, size, len(parts), tail)
            else:
                data = self._file.read(0, lines=count)
                parts = data.split(b"\n")
                tail, size = parts.pop(), len(data)
        except OSError as exc:
            raise _storage_error("read the file", exc, self.path) from exc
        if strict and size > jsontext.MAX_LINE_BYTES:  # only then can a line be too long
            for number, part in enumerate(parts, 1):
                if len(part) > jsontext.MAX_LINE_BYTES:
                    raise corrupt(self.path, number, f"line of {len(part)} bytes is over the {jsontext.MAX_LINE_BYTES}-byte line limit")
        if tail and is_whole_line(tail):
            parts.append(tail)
        elif tail and strict and count is None:
            self._warn_torn(len(parts) + 1, tail)
        return parts

    def load(self) -> tuple[SessionStarted, EntryLog]:
        """The header and every entry (held lazily), after checking every line of the file."""
        if self._salvaged is not None:
            return self.header, EntryLog.of(self._salvaged)
        lines = self.read_lines(strict=True)
        self.chain_head.observe(len(lines), lines[-1], header=lines[0])
        self._live = self._loader(lines)
        return self.header, self._scan(lines, self._live)

    def load_prefix(self, version: int) -> tuple[SessionStarted, EntryLog]:
        """The header and the entries up to ``version``, reading only that prefix of the file."""
        if self._salvaged is not None:
            return self.header, EntryLog.of(self._salvaged[: max(0, version - 1)])
        lines = self.read_lines(max(1, version), strict=True)[: max(1, version)]
        return self.header, self._scan(lines, self._loader(lines))

    def _loader(self, lines: list[Any]) -> LineLoader:
        return LineLoader(lines, self.path, self.session_id, self.codec, self._file.warnings)

    def _scan(self, lines: list[bytes], loader: LineLoader) -> EntryLog:
        """The checked, lazy log of a file's lines (a dialect with its own rules overrides)."""
        if not lines:
            raise corrupt(self.path, 1, "no session header")
        header, _ = read_header(lines[0], self.path, self.codec)
        if header.originator_id != self.session_id:
            raise corrupt(self.path, 1, f"the header now names session {header.originator_id}, not {self.session_id}")
        return scan(lines, loader)

    def _warn_torn(self, number: int, tail: bytes) -> None:
        if self._file.append_in_flight():  # another writer's unfinished line is not torn
            return
        message = (
            f"{self.path}: ignoring a torn last line (line {number}, {len(tail)} bytes, left by an "
            "interrupted append); it is removed before the next append"
        )
        self._file.warnings.append(message)
        warnings.warn(message, TornLineWarning, stacklevel=4)

    def _salvage(self) -> None:
        _, entries, skipped = salvage_log(self.read_lines(), str(self.path), self.codec)
        self._salvaged, self.skipped = entries, skipped
        if self._file.torn:
            skipped.append((self._file.count + 1, f"torn last line ({len(self._file.torn)} bytes)"))

    # -- writing --------------------------------------------------------------------------

    def _previous_digest(self, version: int) -> bytes | None:
        """The digest line ``version`` chains to: the head this storage holds, else (a storage
        that has not read its file) the one recorded on the line before."""
        head = self.chain_head
        if version == 1:
            return chain.GENESIS if self.codec.dialect.name == "native" and self.chain_new_sessions else None
        if head.version != version - 1:
            lines = self.read_lines(version - 1)
            if len(lines) < version - 1:
                raise self.conflict(version, f"there is no version {version - 1} to follow")
            head.observe(version - 1, lines[version - 2], header=lines[0])
        if head.digest is None and head.chained:
            raise SessionError(
                "corrupt", f"session {self.session_id} is hash-chained but version {version - 1} carries no chain "
                "digest: the log was damaged (run verify); it is not extended unchained", path=str(self.path),
            )
        return head.digest

    def save(self, events: Sequence[Any]) -> None:
        """Append the events' lines (sealed into the chain if the file is chained) with one
        write under the file lock: ``conflict`` if another writer took their versions,
        ``storage`` if the file cannot be written."""
        if self.read_only:
            self.check_writable()
        if not events:
            return
        first = events[0].originator_version
        head = self.chain_head
        digest = head.digest if head.version == first - 1 and head.digest is not None else self._previous_digest(first)
        encode = self.codec.encode_event
        lines = [encode(events[0])] if len(events) == 1 else [encode(event) for event in events]
        if digest is not None:
            lines, digest = chain.seal_lines(lines, digest)
        try:
            self._file.append_at(first, lines)
        except WriterBusyError as exc:
            raise SessionError("conflict", f"session {self.session_id} has another writer: {exc}; close that "
                               "writer, or open this one with wait=SECONDS to wait for it", path=str(self.path)) from None
        except StaleFileError as exc:
            raise SessionError("conflict", f"session {self.session_id} changed since it was read: {exc}; reopen it and retry",
                               path=str(self.path)) from None
        except (OSError, TimeoutError) as exc:
            raise SessionError("storage", f"could not save to session {self.session_id}: could not append to "
                               f"{self.path}: {getattr(exc, 'strerror', None) or exc}", path=str(self.path)) from exc
        self.chain_head.set(first + len(lines) - 1, digest)
        if self._live is not None:
            self._live.written(first, lines, events)


def _first_line(file: LineFile, path: Path) -> bytes:
    """The header line, read no further than the line limit."""
    first = file.read(0, lines=1, limit=jsontext.MAX_LINE_BYTES)
    cut = first.find(b"\n")
    if cut >= 0:
        first = first[:cut]
    if len(first) > jsontext.MAX_LINE_BYTES:
        raise corrupt(path, 1, f"the header line is over the {jsontext.MAX_LINE_BYTES}-byte line limit")
    if cut < 0 and not (first and is_whole_line(first)):
        problem = "the file is empty" if not first else "the header line is incomplete (torn)"
        raise corrupt(path, 1, f"{problem}: no session header")
    return first


__all__ = ["JsonlSessionStorage", "TornLineWarning"]
