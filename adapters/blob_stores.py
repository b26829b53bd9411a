"""Where out-of-line content lives (``blobs.py``): a folder beside JSONL sessions, a table in a database, a dict in
memory. Every store keeps a blob under its SHA-256 digest, once, and never changes one: ``put`` of a digest it holds
writes nothing.

``threshold`` (bytes, default 64 KiB) is the longest text kept inline; None keeps everything inline (images too).
"""

from __future__ import annotations

import fcntl
import os
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sessiontree.adapters.blobs import DEFAULT_THRESHOLD, check_ref, fetch
from sessiontree.adapters.files import make_private_dirs
from sessiontree.domain.errors import SessionError

FOLDER = ".blobs"  # in a JSONL repository's folder (a dot: listings and pi's layout checks skip it)


ENV_THRESHOLD = "SESSIONTREE_BLOB_THRESHOLD"  # the default's default: bytes, or "none" (everything inline)


class _Default:
    def __repr__(self) -> str:
        return f"the default (${ENV_THRESHOLD}, else {DEFAULT_THRESHOLD} bytes)"


DEFAULT: Any = _Default()


def check_threshold(threshold: Any) -> int | None:
    """A blob threshold as given (``DEFAULT``: what ``$SESSIONTREE_BLOB_THRESHOLD`` says, else 64 KiB)."""
    if threshold is DEFAULT:
        text = os.environ.get(ENV_THRESHOLD, "").strip()
        if not text:
            return DEFAULT_THRESHOLD
        if text.lower() == "none":
            return None
        if not text.isdigit():
            raise ValueError(f"${ENV_THRESHOLD} must be a number of bytes or 'none', not {text!r}")
        return int(text)
    if threshold is None:
        return None
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise ValueError(f"blob_threshold must be a number of bytes (an int >= 0) or None, not {threshold!r}")
    return threshold


class BlobStore:
    """The port: ``put``, ``get`` (None when missing), ``delete``, ``digests``; ``location`` names it in messages."""

    location = ""

    def __init__(self, threshold: Any = DEFAULT) -> None:
        self.threshold = check_threshold(threshold)

    def put(self, digest: str, data: bytes) -> None:
        raise NotImplementedError

    def get(self, digest: str) -> bytes | None:
        raise NotImplementedError

    def delete(self, digest: str) -> None:
        raise NotImplementedError

    def digests(self) -> Iterator[str]:
        raise NotImplementedError

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
        """Put the blobs named by ``digests`` into ``other`` (a copied session carries its content)."""
        for digest in digests:
            data = self.get(digest)
            if data is not None:
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
    def _locked(self, mode: int) -> Iterator[None]:
        """The folder's lock file, shared by writers and exclusive while blobs are collected (across processes)."""
        try:
            make_private_dirs(self.folder)
            fd = os.open(self.folder / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
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
        path = self.path(digest)
        try:
            if os.lstat(path).st_size == len(data):
                return  # held already (a damaged one of another size is written again)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self._error("read", exc) from exc
        try:
            make_private_dirs(path.parent)
            temp = path.with_name(f".{digest[2:10]}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
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
            if self.fsync:
                _sync_folder(path.parent)
        except OSError as exc:
            try:
                os.unlink(temp)
            except (OSError, UnboundLocalError):
                pass
            raise self._error("write", exc) from exc

    def get(self, digest: str) -> bytes | None:
        try:
            fd = os.open(self.path(digest), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._error("read", exc) from exc
        with open(fd, "rb") as handle:
            return handle.read()

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


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
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

    def get(self, digest: str) -> bytes | None:
        return self._blobs.get(digest)

    def delete(self, digest: str) -> None:
        with self._lock:
            self._blobs.pop(digest, None)

    def digests(self) -> Iterator[str]:
        yield from sorted(self._blobs)

    def collecting(self) -> Any:
        return self._lock


class BlobCheck:
    """What verify reads out-of-line content with: each blob once, checked against its digest (a missing or altered
    one is a problem of every line that refers to it, ``line``), given back as an empty string for the line's
    structure check (the entry itself stays in the tree)."""

    def __init__(self, store: BlobStore | None, report: Any) -> None:
        self.store = store
        self.report = report
        self.line = 0
        self.seen: dict[str, str | None] = {}  # digest: the problem, or None when it matched

    def __call__(self, ref: dict[str, Any]) -> str:
        problem = check_ref(ref)
        if problem is None:
            digest = ref["sha256"]
            if digest not in self.seen:
                self.seen[digest] = self._problem(ref)
                self.report.blobs += self.seen[digest] is None
            problem = self.seen[digest]
        if problem is not None:
            self.report.problem(self.line, problem)
        return ""

    def _problem(self, ref: dict[str, Any]) -> str | None:
        if self.store is None:
            return f"content {ref['sha256'][:12]} is out of line, and this log has no content store to read it from"
        try:
            fetch(self.store, ref)
        except SessionError as exc:
            return exc.message
        return None
