"""Archives of pruned sessions: one compressed file per session that opens again, read-only.

An archive ``<session id>.jsonl.gz`` holds the session's log exactly as stored (every byte of every line, chain
digests included, one line each), gzip-compressed, so ``verify`` checks its chain as it checks the live log. A
database session's lines are the same native JSONL lines, so its archive is the same kind of file. Archives are
written to a temporary name, fsynced, linked into place (never over an existing file) and made 0600; signed
checkpoints kept beside a session file go beside its archive (``<archive>.checkpoints``).

A folder of archives opens as a read-only store (``open_repo("archive:DIR")``, :class:`ArchiveStore`): it lists,
opens and verifies them like any repository and refuses every write; listing decompresses each archive once and keeps
its summary while the file is unchanged (same size, modification time and inode). See docs/repositories.md.
"""

from __future__ import annotations

import gzip
import os
import zlib
from array import array
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import msgspec

from sessiontree.audit.chain import strip as strip_chain
from sessiontree.audit.checkpoints import SIDECAR_SUFFIX
from sessiontree.content.blob_stores import FOLDER, FolderBlobs, check_threshold, folder_for
from sessiontree.content.blobs import check_ref, refs
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted
from sessiontree.storage.files import GZIP_MAGIC as GZIP_MAGIC  # both live in files.py: a reader need not import this
from sessiontree.storage.files import is_archive as is_archive
from sessiontree.storage.files import make_private_dirs, open_regular, write_atomic
from sessiontree.storage.index import Summary, fold_lines
from sessiontree.storage.jsonl_repo import same_place
from sessiontree.storage.jsonl_scan import read_header
from sessiontree.storage.memory_recorder import MemoryRecorder
from sessiontree.storage.recorder import RecorderSessionStorage
from sessiontree.storage.storage import SessionStorage
from sessiontree.storage.store import SessionInfo, SessionStore, check_session_id
from sessiontree.wire import jsontext
from sessiontree.wire.pi_names import PARENT_KEY as PI_PARENT_KEY
from sessiontree.wire.schema import NATIVE, envelope_decoder, is_pi_header

ARCHIVE_SUFFIX = ".jsonl.gz"
MAX_EXPANDED = 4 << 30  # an archive that expands past this is refused (a decompression bomb, not a session)
CHUNK = 1 << 20  # bytes expanded at a time (each line is checked as it comes out)


def archive_name(session_id: str) -> str:
    return f"{session_id}{ARCHIVE_SUFFIX}"


def expand(data: bytes, path: Any) -> bytes:
    """The log inside an archive's bytes; ``data`` itself when it is not compressed (a plain session file)."""
    if not data.startswith(GZIP_MAGIC):
        return data
    log, _ = expand_lines(data, path)
    return log


def expand_lines(data: bytes, path: Any) -> tuple[bytes, array[int]]:
    """The log inside an archive's bytes and where each of its lines starts (then where the last ends, after its
    newline; bytes after the last newline are a last line without one). Expanded a chunk at a time, every line
    checked as it comes out (:class:`_Lines`): the first that cannot be a session's stops the expansion (``corrupt``
    naming it), so a decompression bomb costs what its first bad line costs."""
    inflater = zlib.decompressobj(wbits=31)  # gzip framing
    lines = _Lines(path)
    pending = data
    try:
        while not inflater.eof:
            room, before = MAX_EXPANDED - lines.size, len(pending)
            chunk = inflater.decompress(pending, min(CHUNK, room + 1))
            pending = inflater.unconsumed_tail
            if len(chunk) > room:
                raise SessionError("corrupt", f"the archive expands past {MAX_EXPANDED} bytes; it is not read",
                                   path=str(path))
            if not chunk and (not pending or len(pending) == before):  # no input left, or none it can use
                raise SessionError("corrupt", "the archive is truncated (its compressed stream does not end)",
                                   path=str(path))
            lines.take(chunk)
    except zlib.error as exc:
        raise SessionError("corrupt", f"the archive cannot be decompressed ({exc})", path=str(path)) from None
    return lines.done()


class _Lines:
    """The lines of an archive as they are expanded, each checked when its newline arrives: within the line limit, a
    session header first, then entry lines (a JSON object with a string ``type``, and ``id`` and parent where the
    dialect has them) whose ids are unique. Anything else is ``corrupt`` naming the line ("not read further")."""

    def __init__(self, path: Any) -> None:
        self.path = path
        self.chunks: list[bytes] = []
        self.size = 0
        self.offsets = array("q", [0])
        self.ids: set[str] = set()
        self.envelope: Any = None  # the decoder of an entry line's envelope, known from the header
        self.partial: list[bytes] = []  # the bytes of the line not yet ended

    def take(self, chunk: bytes) -> None:
        start = 0
        while (cut := chunk.find(b"\n", start)) >= 0:
            piece = chunk[start:cut]
            line = b"".join((*self.partial, piece)) if self.partial else piece
            self.partial = []
            self._check(line)
            self.offsets.append(self.offsets[-1] + len(line) + 1)
            start = cut + 1
        if start < len(chunk):
            self.partial.append(chunk[start:])
            if sum(map(len, self.partial)) > jsontext.MAX_LINE_BYTES:
                self._refuse(f"line of more than {jsontext.MAX_LINE_BYTES} bytes is over the line limit")
        self.chunks.append(chunk)
        self.size += len(chunk)

    def done(self) -> tuple[bytes, array[int]]:
        if self.partial:  # a last line without a newline: checked as whole lines are
            self._check(b"".join(self.partial))
        log = b"".join(self.chunks)
        self.chunks = []
        return log, self.offsets

    def _check(self, line: bytes) -> None:
        number = len(self.offsets)
        if len(line) > jsontext.MAX_LINE_BYTES:
            self._refuse(f"line of {len(line)} bytes is over the {jsontext.MAX_LINE_BYTES}-byte line limit")
        if number == 1:
            self._header(line)
            return
        try:
            head = self.envelope(line)
        except (msgspec.DecodeError, RecursionError) as exc:
            self._refuse(f"is not an entry line ({exc})")
        entry_id = getattr(head, "id", None)
        if head.type == "session" or entry_id in self.ids:
            self._refuse("is a second header" if head.type == "session" else f"repeats entry id {entry_id!r}")
        if entry_id is not None:
            self.ids.add(entry_id)

    def _header(self, line: bytes) -> None:
        try:
            header = jsontext.parse(strip_chain(line))
        except (ValueError, RecursionError) as exc:
            self._refuse(f"is not a session header ({exc})")
        if not isinstance(header, dict) or header.get("type") != "session":
            self._refuse("is not a session header (type 'session')")
        if not is_pi_header(header):
            self.envelope = envelope_decoder(NATIVE.parent_key).decode
        elif isinstance(header.get("version"), int) and header["version"] >= 3:
            self.envelope = envelope_decoder(PI_PARENT_KEY).decode
        else:  # pi's versions 1 and 2 have no ids: their migration gives them some (pi.py)
            self.envelope = _KIND.decode

    def _refuse(self, why: str) -> NoReturn:
        number = len(self.offsets)
        raise SessionError("corrupt", f"line {number} of the archive {why}: it is damaged, or not a session's log (a "
                           "decompression bomb); it is not read further", path=str(self.path), line=number)


_KIND = msgspec.json.Decoder(msgspec.defstruct("Kind", [("type", str)]))


def read_archive(path: str | os.PathLike[str]) -> list[bytes]:
    """The lines of the archive at ``path`` (``not_found``, ``storage``, ``corrupt``)."""
    try:
        fd = open_regular(path)
        try:
            data = os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise SessionError("not_found", "no archive there", path=str(path)) from None
    except OSError as exc:
        raise SessionError("storage", f"cannot read the archive: {exc.strerror or exc}", path=str(path)) from exc
    text = expand(data, path)
    lines = text.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if not lines:
        raise SessionError("corrupt", "the archive is empty: no session header", path=str(path))
    return lines


class ArchiveSessionStorage(RecorderSessionStorage):
    """A session read from its archive: every query works, appends are refused (``storage``)."""

    read_only = True

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> ArchiveSessionStorage:
        lines = read_archive(path)
        header, codec = read_header(lines[0], path)
        storage = cls(MemoryRecorder(), header.originator_id, location=os.fspath(path), codec=codec)
        if storage.blobs is not None:  # its content out of line went beside it when it was archived
            storage.blobs = folder_for(path)
        storage.write_lines(lines)
        storage.archive_path = Path(path)
        return storage

    archive_path: Path

    def check_writable(self) -> None:
        raise SessionError(
            "storage", f"session {self.session_id} at {self.location} is an archive, read-only: nothing can be appended "
            "to it (import it into a repository to continue it: sessiontree import ARCHIVE)",
        )


def write_archive(directory: str | os.PathLike[str], session_id: str, lines: Sequence[bytes],
                  checkpoints: bytes | None = None, blobs: Any = None) -> Path:
    """Write ``lines`` as the archive of ``session_id`` in ``directory`` (made 0700 if missing), durably, and the
    session's signed checkpoints beside it; the content its lines keep out of line is copied from ``blobs`` into the
    directory's blob folder first. An archive already there with these very lines (a pruning that stopped
    after archiving) is kept as it is; any other file there is ``already_exists``: nothing is overwritten."""
    folder = Path(directory)
    target = folder / archive_name(session_id)
    try:
        make_private_dirs(folder)
        wanted = [ref["sha256"] for line in lines for ref in refs(line) if check_ref(ref) is None]
        if wanted:
            if blobs is None:
                raise SessionError("storage", "the session keeps content out of line, and its blob store was not given")
            blobs.copy_to(FolderBlobs(folder / FOLDER, durability="fsync", threshold=None), wanted)
        log = b"".join(line + b"\n" for line in lines)
        data = gzip.compress(log, mtime=0)
        if expand(data, target) != log:  # what is deleted next must be readable
            raise SessionError("storage", "the compressed archive does not read back as the log", path=str(target))
        _place_once(folder, target, data, lambda: read_archive(target) == list(lines))
        if checkpoints is not None:
            sidecar = Path(f"{target}{SIDECAR_SUFFIX}")
            _place_once(folder, sidecar, checkpoints, lambda: sidecar.read_bytes() == checkpoints)
    except OSError as exc:
        raise SessionError("storage", f"cannot write the archive: {exc.strerror or exc}", path=str(target)) from exc
    return target


def _place_once(folder: Path, target: Path, data: bytes, same: Callable[[], bool]) -> None:
    try:
        _place(folder, target, data)
    except FileExistsError:
        try:
            if same():
                return
        except (OSError, SessionError):
            pass
        raise SessionError("already_exists", f"another file is at {target.name} already; nothing was overwritten",
                           path=str(target)) from None


def _place(folder: Path, target: Path, data: bytes) -> None:
    """``data`` at ``target``, whole and fsynced or not at all (a temporary file, then a link: never overwrites)."""
    write_atomic(target, data, temp=folder / f".{target.name}.{os.getpid()}.tmp", fsync=True, overwrite=False)


class ArchiveStore(SessionStore):
    """The archives ``<id>.jsonl.gz`` directly in ``root``, read-only (see the module documentation)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._seen: dict[str, tuple[tuple[int, int, int], Summary | None]] = {}

    @property
    def blobs(self) -> FolderBlobs:  # the content the archives keep out of line, copied beside them
        return FolderBlobs(self.root / FOLDER, threshold=None)

    def set_blob_threshold(self, threshold: object) -> None:  # nothing is written here
        check_threshold(threshold)

    def _refuse(self, what: str) -> NoReturn:
        raise SessionError("storage", f"{self.root} is a folder of archives, read-only: {what} (import an archive into "
                                      "a repository to continue it)")

    def store_header(self, header: SessionStarted) -> SessionStorage:
        self._refuse("no session can be created in it")

    def store_lines(self, session_id: str, lines: Sequence[bytes]) -> SessionStorage:
        self._refuse("no session can be copied into it")

    def remove(self, session_id: str) -> None:
        self._refuse("its archives are not deleted through sessiontree")

    def attach(self, session_id: str) -> SessionStorage:
        path = self.root / archive_name(check_session_id(session_id))
        if not path.is_file() or path.is_symlink():
            raise SessionError("not_found", f"no archive of session {session_id} in {self.root}", path=str(path))
        storage = ArchiveSessionStorage.open(path)
        if storage.session_id != session_id:
            raise SessionError("corrupt", f"the archive holds session {storage.session_id}, not {session_id}", path=str(path))
        return storage

    def infos(self, cwd: str | None) -> Iterable[SessionInfo]:
        wanted = None if cwd is None else same_place(cwd)
        out = []
        for path in self._archives():
            summary = self._summary(path)
            if summary is not None and (wanted is None or summary.cwd == cwd or same_place(summary.cwd) == wanted):
                out.append(SessionInfo.from_summary(summary, os.fspath(path)))
        return out

    def _archives(self) -> list[Path]:
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            return []
        return [Path(e.path) for e in entries
                if e.name.endswith(ARCHIVE_SUFFIX) and not e.name.startswith(".") and e.is_file(follow_symlinks=False)]

    def _summary(self, path: Path) -> Summary | None:
        """The archive's listing summary (None: it cannot be read; opening it says why)."""
        try:
            st = path.stat(follow_symlinks=False)
        except OSError:
            return None
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        seen = self._seen.get(path.name)
        if seen is not None and seen[0] == key:
            return seen[1]
        try:
            summary = fold_lines(read_archive(path))
        except SessionError:
            summary = None
        if summary is not None and path.name != archive_name(summary.id):
            summary = None  # an archive is found by its id: one under another name cannot be opened by it
        self._seen[path.name] = (key, summary)
        return summary
