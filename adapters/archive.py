"""Archives of pruned sessions: one compressed file per session that opens again, read-only.

An archive ``<session id>.jsonl.gz`` holds the session's log exactly as stored (every byte of every line, chain
digests included, one line each), gzip-compressed, so ``verify`` checks its chain as it checks the live log. A
database session's lines are the same native JSONL lines, so its archive is the same kind of file. Archives are
written to a temporary name, fsynced, linked into place (never over an existing file) and made 0600; signed
checkpoints kept beside a session file go beside its archive (``<archive>.checkpoints``). See docs/repositories.md.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eventsourcing.popo import POPOAggregateRecorder

from sessiontree.adapters.blob_stores import FOLDER, FolderBlobs, folder_for
from sessiontree.adapters.blobs import check_ref, refs
from sessiontree.adapters.checkpoints import SIDECAR_SUFFIX
from sessiontree.adapters.files import GZIP_MAGIC as GZIP_MAGIC  # both live in files.py: a reader need not import this
from sessiontree.adapters.files import fsync_dir, make_private_dirs, open_regular
from sessiontree.adapters.files import is_archive as is_archive
from sessiontree.adapters.jsonl_scan import read_header
from sessiontree.adapters.recorder import RecorderSessionStorage
from sessiontree.domain.errors import SessionError

ARCHIVE_SUFFIX = ".jsonl.gz"
MAX_EXPANDED = 4 << 30  # an archive that expands past this is refused (a decompression bomb, not a session)


def archive_name(session_id: str) -> str:
    return f"{session_id}{ARCHIVE_SUFFIX}"


def expand(data: bytes, path: Any) -> bytes:
    """The log inside an archive's bytes; ``data`` itself when it is not compressed (a plain session file)."""
    if not data.startswith(GZIP_MAGIC):
        return data
    inflater = zlib.decompressobj(wbits=31)  # gzip framing
    try:
        out = inflater.decompress(data, MAX_EXPANDED)
        if inflater.unconsumed_tail:
            raise SessionError("corrupt", f"the archive expands past {MAX_EXPANDED} bytes; it is not read", path=str(path))
        if not inflater.eof:
            raise SessionError("corrupt", "the archive is truncated (its compressed stream does not end)", path=str(path))
    except zlib.error as exc:
        raise SessionError("corrupt", f"the archive cannot be decompressed ({exc})", path=str(path)) from None
    return out


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
        storage = cls(POPOAggregateRecorder(), header.originator_id, location=os.fspath(path), codec=codec)
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
    tmp = folder / f".{target.name}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with open(fd, "wb", closefd=True) as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.link(tmp, target)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    fsync_dir(folder)
