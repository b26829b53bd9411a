"""Where out-of-line content lives (``blobs.py``): a folder beside JSONL sessions, a table in a database, a dict in
memory. Every store keeps a blob under its SHA-256 digest, once, and never changes one: ``put`` of a digest it holds
writes nothing.

``threshold`` (bytes, default 64 KiB) is the longest text kept inline; None keeps everything inline (images too).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sessiontree.adapters import leftovers
from sessiontree.adapters.blobs import DEFAULT_THRESHOLD
from sessiontree.adapters.files import fsync_dir, make_private_dirs
from sessiontree.domain.errors import SessionError

STALE_AFTER = 60.0  # seconds a dead writer's temporary file is left before a blob write removes it (leftovers.py)
FOLDER = ".blobs"  # in a JSONL repository's folder (a dot: listings and pi's layout checks skip it)


ENV_THRESHOLD = "SESSIONTREE_BLOB_THRESHOLD"  # the default's default: bytes, or "none" (everything inline)


class _Default:
    def __repr__(self) -> str:
        return f"the default (${ENV_THRESHOLD}, else {DEFAULT_THRESHOLD} bytes)"


DEFAULT: Any = _Default()


def check_threshold(threshold: Any) -> int | None:
    """A blob threshold as given (``DEFAULT``: what ``$SESSIONTREE_BLOB_THRESHOLD`` says, else 64 KiB)."""
    if threshold is DEFAULT:
        text = os.environ.get(ENV_THRESHOLD, "").strip().lower()
        if not text:
            return DEFAULT_THRESHOLD
        if text == "none":
            return None
        number, unit = text.rstrip("kmib"), text.lstrip("0123456789").removesuffix("ib").removesuffix("b")
        if not number.isdigit() or unit not in ("", "k", "m"):
            raise SessionError("storage", f"${ENV_THRESHOLD} must be a size in bytes (64k and 1m are read as KiB and "
                               f"MiB) or 'none', not {text!r}")
        return int(number) << {"": 0, "k": 10, "m": 20}[unit]
    if threshold is None:
        return None
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise ValueError(f"blob_threshold must be a number of bytes (an int >= 0) or None, not {threshold!r}")
    return threshold


class BlobStore(ABC):
    """The port: ``put``, ``get`` (None when missing), ``delete``, ``digests``; ``location`` names it in messages."""

    location = ""

    def __init__(self, threshold: Any = DEFAULT) -> None:
        self.threshold = check_threshold(threshold)

    @abstractmethod
    def put(self, digest: str, data: bytes) -> None:
        """See the class documentation."""

    @abstractmethod
    def get(self, digest: str, size: int | None = None) -> bytes | None:
        """The blob's bytes (None: not held); ``size``: what the caller expects, so that a store need not read much
        more of a blob that is larger (what it returns then fails the caller's check)."""

    @abstractmethod
    def delete(self, digest: str) -> None:
        """See the class documentation."""

    @abstractmethod
    def digests(self) -> Iterator[str]:
        """See the class documentation."""

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Held from putting a line's blobs until the line is written: no blob is collected meanwhile."""
        yield

    @contextmanager
    def collecting(self) -> Iterator[None]:
        """Held while blobs that no line refers to are deleted (see ``collect``)."""
        yield

    def collect(self, digests: Any, referenced: Any) -> list[str]:
        """Delete the blobs among ``digests`` for which ``referenced(digest)`` (asked while no writer can put one
        to use) is false; the ones deleted."""
        gone = []
        with self.collecting():
            for digest in dict.fromkeys(digests):
                if not referenced(digest):
                    self.delete(digest)
                    gone.append(digest)
        return gone

    def copy_to(self, other: BlobStore, digests: Any) -> None:
        """Put the blobs named by ``digests`` into ``other`` (a copied session carries its content); one that is
        missing or altered here is not copied (the copy's verify then names the lines that refer to it)."""
        for digest in digests:
            data = self.get(digest)
            if data is not None and hashlib.sha256(data).hexdigest() == digest:
                other.put(digest, data)


class FolderBlobs(BlobStore):
    """Blobs as files ``<folder>/sha256/<2 hex>/<62 hex>`` (0600, folders 0700), each written to a temporary name and
    renamed, so a reader never sees half of one; with ``durability="fsync"`` each is on the disk before the line that
    refers to it is written."""

    def __init__(self, folder: str | os.PathLike[str], *, durability: str = "flush", threshold: Any = DEFAULT):
        super().__init__(threshold)
        self.folder = Path(folder)
        self.location = str(self.folder)
        self.fsync = durability == "fsync"

    def path(self, digest: str) -> Path:
        return self.folder / "sha256" / digest[:2] / digest[2:]

    @contextmanager
    def _locked(self, mode: int, *, create: bool = True) -> Iterator[None]:
        """The folder's lock file, shared by writers and exclusive while blobs are collected (across processes);
        ``create=False``: only if the file is there (else nothing is locked)."""
        try:
            if not create:
                fd = os.open(self.folder / "lock", os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
            else:
                make_private_dirs(self.folder)
                fd = os.open(self.folder / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            if create:
                raise self._error("lock", FileNotFoundError(2, "the blob folder vanished")) from None
            yield
            return
        except OSError as exc:
            raise self._error("lock", exc) from exc
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            os.close(fd)

    def writing(self) -> Any:
        return self._locked(fcntl.LOCK_SH)

    def collecting(self) -> Any:
        return self._locked(fcntl.LOCK_EX)

    def put(self, digest: str, data: bytes) -> None:
        # shared, when the folder has its lock file: a collection (which removes the temporary files of writers it
        # sees dead) waits for it. Without one (a new folder, an archive's) no collection ran, and the pid check alone
        # keeps a live writer's file; the lock file is not made for it.
        with self._locked(fcntl.LOCK_SH, create=False):
            self._put(digest, data)

    def sweep(self) -> list[Path]:
        """Remove the temporary files of blob writes whose process died (they hold content a crash cut off), under
        the folder's exclusive lock: no write is under way, and a live process's file is kept all the same."""
        if not self.folder.is_dir():
            return []
        with self.collecting():
            return self._sweep()

    def _sweep(self) -> list[Path]:
        return leftovers.remove(leftovers.dead(leftovers.blob_temps(self.folder)))

    def collect(self, digests: Any, referenced: Any) -> list[str]:
        gone = []
        with self.collecting():
            self._sweep()
            for digest in dict.fromkeys(digests):
                if not referenced(digest):
                    self.delete(digest)
                    gone.append(digest)
        return gone

    def _put(self, digest: str, data: bytes) -> None:
        path = self.path(digest)
        try:
            held = os.lstat(path)
            # held already (a damaged one, of any size, is written again: these bytes are the content's own)
            if stat.S_ISREG(held.st_mode) and held.st_size == len(data) and self._holds(digest, data):
                if self.fsync:  # perhaps written by a writer that does not sync: on the disk now
                    _sync_file(path)
                return
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self._error("read", exc) from exc
        try:
            new_folders = [p for p in (self.folder, path.parent.parent, path.parent) if not p.exists()]
            make_private_dirs(path.parent)
            # what dead writers left in this folder (it holds content a crash cut off), once it is surely theirs
            leftovers.remove(leftovers.stale(leftovers.blob_temps_in(path.parent), STALE_AFTER))
            temp = path.with_name(f".{digest[2:10]}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, path)
            if self.fsync:  # the file's name, and the names of the folders made for it, on the disk too
                for folder in dict.fromkeys([path.parent, *(made.parent for made in reversed(new_folders))]):
                    fsync_dir(folder)
        except OSError as exc:
            try:
                os.unlink(temp)
            except (OSError, UnboundLocalError):
                pass
            raise self._error("write", exc) from exc

    def _holds(self, digest: str, data: bytes) -> bool:
        """Is the held blob ``data``? Anything unreadable in its place (swapped for a link or a FIFO meanwhile, not
        readable) is not: it is replaced, atomically, by ``put``."""
        try:
            return self.get(digest, len(data)) == data
        except SessionError:
            return False

    def get(self, digest: str, size: int | None = None) -> bytes | None:
        path = self.path(digest)
        try:  # never a link, and never blocking on a FIFO put in its place
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._error("read", exc) from exc
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SessionError("corrupt", f"content {digest[:12]} in {self.location} is not a regular file",
                                   path=str(path))
            with open(fd, "rb", closefd=False) as handle:
                return handle.read() if size is None else handle.read(size + 1)  # one byte more tells it is longer
        except OSError as exc:
            raise self._error("read", exc) from exc
        finally:
            os.close(fd)

    def delete(self, digest: str) -> None:
        try:
            os.unlink(self.path(digest))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self._error("delete", exc) from exc

    def digests(self) -> Iterator[str]:
        root = self.folder / "sha256"
        try:
            parts = sorted(os.scandir(root), key=lambda e: e.name)
        except FileNotFoundError:
            return
        for part in parts:
            if len(part.name) == 2 and part.is_dir(follow_symlinks=False):
                for entry in sorted(os.scandir(part.path), key=lambda e: e.name):
                    if len(entry.name) == 62 and not entry.name.startswith("."):
                        yield part.name + entry.name

    def _error(self, what: str, exc: OSError) -> SessionError:
        return SessionError("storage", f"cannot {what} content in the blob folder: {exc.strerror or exc}",
                            path=str(self.folder))


def _sync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def folder_for(session_file: str | os.PathLike[str], **kwargs: Any) -> FolderBlobs:
    """The blob folder of a native session file: ``.blobs`` in the folder that holds it (its repository's)."""
    return FolderBlobs(Path(session_file).parent / FOLDER, **kwargs)


class MemoryBlobs(BlobStore):
    """Blobs in a dict (the in-memory repositories)."""

    location = "memory"

    def __init__(self, threshold: Any = DEFAULT) -> None:
        super().__init__(threshold)
        self._blobs: dict[str, bytes] = {}
        self._lock = threading.RLock()  # puts wait while blobs are collected (a writer puts its blobs again after)

    def put(self, digest: str, data: bytes) -> None:
        with self._lock:
            self._blobs.setdefault(digest, bytes(data))

    def get(self, digest: str, size: int | None = None) -> bytes | None:
        return self._blobs.get(digest)

    def delete(self, digest: str) -> None:
        with self._lock:
            self._blobs.pop(digest, None)

    def digests(self) -> Iterator[str]:
        yield from sorted(self._blobs)

    def collecting(self) -> Any:
        return self._lock
