"""Where out-of-line content lives (``blobs.py``): a folder beside JSONL sessions, a table in a database, a dict in
memory. Every store keeps a blob under its SHA-256 digest, once, and never changes one: ``put`` of a digest it holds
writes nothing.

``threshold`` (bytes, default 64 KiB) is the longest text kept inline; None keeps everything inline (images too).

``collect`` deletes content no line refers to any more (after an erasure, and after pruning the sessions that held it).
Whether a blob is still referred to is asked of every log that shares its store: the native session files of the
folder, or every stored event of the database. The digest is looked for in the stored bytes as a reference lays it out
(``"sha256":"<hex>"``); text cannot fake it (its quotes are escaped), and another producer's field of that name keeps
the blob, which errs on the side of keeping content. A folder's blobs are deleted while its lock is held for
collecting, so no writer can put one to use meanwhile; in a database a writer stores its blobs in the transaction of
its line, and in memory puts them again once its line is stored; there the check and the deletion are one step.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sessiontree.content.blobs import DEFAULT_THRESHOLD, check_ref, refs
from sessiontree.domain.errors import SessionError
from sessiontree.storage import leftovers
from sessiontree.storage.files import make_private_dirs, open_regular, write_atomic

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
            self._sweep()
            for digest in dict.fromkeys(digests):
                if not referenced(digest):
                    self.delete(digest)
                    gone.append(digest)
        return gone

    def _sweep(self) -> list[Path]:
        """Remove what dead writers left (a folder's temporary files); held while collecting."""
        return []

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
    refers to it is written. Every level below the repository's folder (``.blobs``, ``sha256``, ``<2 hex>``, the
    file) is opened through its parent's descriptor without following a link: a link at any of them is a
    ``SessionError('storage')`` naming it, so no content is written, read or deleted outside the repository."""

    def __init__(self, folder: str | os.PathLike[str], *, durability: str = "flush", threshold: Any = DEFAULT):
        super().__init__(threshold)
        self.folder = Path(folder)
        self.location = str(self.folder)
        self.fsync = durability == "fsync"

    def path(self, digest: str) -> Path:
        return self.folder / "sha256" / digest[:2] / digest[2:]

    def _open_folder(self, *names: str, create: bool) -> int | None:
        """A descriptor on ``<folder>/<names...>``, every level from ``.blobs`` down opened without following a link
        (made 0700 where missing, with ``create``); None where one is missing (without ``create``)."""
        try:
            if create:
                make_private_dirs(self.folder.parent)
            fd = os.open(self.folder.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._error("open", exc) from exc
        where = self.folder.parent
        try:
            for name in (self.folder.name, *names):
                where = where / name
                parent, fd = fd, -1  # closed by the step
                fd = self._step(parent, name, where, create)
                if fd < 0:
                    return None
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        return fd

    def _step(self, parent: int, name: str, where: Path, create: bool) -> int:
        """The folder ``name`` in ``parent`` (closed here), opened without following a link; -1 if it is missing."""
        try:
            made = False
            while True:
                try:
                    return _fchmod_if(os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                              dir_fd=parent), made)
                except FileNotFoundError:
                    if not create:
                        return -1
                try:
                    os.mkdir(name, 0o700, dir_fd=parent)
                    made = True
                    if self.fsync:
                        os.fsync(parent)
                except FileExistsError:
                    pass  # made meanwhile by another writer
        except OSError as exc:
            raise self._not_ours(parent, name, where, exc) from None
        finally:
            os.close(parent)

    def _not_ours(self, parent: int, name: str, where: Path, exc: OSError) -> SessionError:
        """The error for a level that could not be opened: a link or something else than a folder named as such."""
        try:
            mode = os.lstat(name, dir_fd=parent).st_mode
        except OSError:
            mode = 0
        inside = where.relative_to(self.folder.parent)
        if stat.S_ISLNK(mode):
            return SessionError("storage", f"{inside} is a symbolic link: a repository's blob folder holds only its own "
                                "folders and files, never a link out of it; remove the link", path=str(where))
        if mode and not stat.S_ISDIR(mode):
            return SessionError("storage", f"{inside} is not a folder: the blob folder cannot be used; remove it",
                                path=str(where))
        return self._error("open", exc)

    @contextmanager
    def _within(self, digest: str, *, create: bool) -> Iterator[int | None]:
        """The descriptor of the folder that holds ``digest`` (None: missing, without ``create``)."""
        fd = self._open_folder("sha256", digest[:2], create=create)
        try:
            yield fd
        finally:
            if fd is not None:
                os.close(fd)

    @contextmanager
    def _locked(self, mode: int, *, create: bool = True) -> Iterator[None]:
        """The folder's lock file, shared by writers and exclusive while blobs are collected (across processes);
        ``create=False``: only if the file is there (else nothing is locked). Opened through the folder's descriptor,
        never through a link."""
        folder = self._open_folder(create=create)
        if folder is None:  # no folder yet (and none made): nothing to lock
            yield
            return
        try:
            flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_CREAT if create else 0)
            fd = os.open("lock", flags, 0o600, dir_fd=folder)
        except FileNotFoundError:
            yield
            return
        except OSError as exc:
            raise self._error("lock", exc) from exc
        finally:
            os.close(folder)
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

    def _put(self, digest: str, data: bytes) -> None:
        name = digest[2:]
        with self._within(digest, create=True) as folder:
            assert folder is not None
            # what dead writers left in this folder (it holds content a crash cut off), once it is surely theirs
            leftovers.remove(leftovers.stale(leftovers.blob_temps_in(self.path(digest).parent), STALE_AFTER))
            try:
                held = os.lstat(name, dir_fd=folder)
                # held already (a damaged one, of any size, is written again: these bytes are the content's own)
                if stat.S_ISREG(held.st_mode) and held.st_size == len(data) and self._holds(digest, data):
                    if self.fsync:  # perhaps written by a writer that does not sync: on the disk now
                        _sync_file(name, folder)
                    return
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise self._error("read", exc) from exc
            temp = f".{digest[2:10]}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
            try:  # fsync: the folder too, for the file's name (the folders made for it were synced as made)
                write_atomic(name, data, temp=temp, dir_fd=folder, fsync=self.fsync)
            except OSError as exc:
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
        with self._within(digest, create=False) as folder:
            if folder is None:
                return None
            try:  # never a link, and never blocking on a FIFO put in its place
                fd = os.open(digest[2:], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
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
        with self._within(digest, create=False) as folder:
            if folder is None:
                return
            try:
                os.unlink(digest[2:], dir_fd=folder)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise self._error("delete", exc) from exc

    def digests(self) -> Iterator[str]:
        root = self._open_folder("sha256", create=False)
        if root is None:
            return
        try:
            with os.scandir(root) as found:
                parts = sorted(e.name for e in found if len(e.name) == 2 and e.is_dir(follow_symlinks=False))
        finally:
            os.close(root)
        for part in parts:
            folder = self._open_folder("sha256", part, create=False)
            if folder is None:
                continue
            try:
                with os.scandir(folder) as found:
                    names = sorted(e.name for e in found if len(e.name) == 62 and not e.name.startswith("."))
            finally:
                os.close(folder)
            yield from (part + name for name in names)

    def links(self) -> list[SessionError]:
        """What makes the folder unusable: a link (or a file) in place of ``.blobs``, ``sha256`` or a ``<2 hex>``
        folder, each as the error a put there would raise (``verify`` reports them)."""
        try:
            root = self._open_folder("sha256", create=False)
        except SessionError as exc:
            return [exc]
        if root is None:
            return []
        try:
            with os.scandir(root) as found:
                parts = sorted(e.name for e in found if not e.is_dir(follow_symlinks=False))
        finally:
            os.close(root)
        out = []
        for part in parts:
            try:
                folder = self._open_folder("sha256", part, create=False)
            except SessionError as exc:
                out.append(exc)
            else:
                if folder is not None:
                    os.close(folder)
        return out

    def _error(self, what: str, exc: OSError) -> SessionError:
        return SessionError("storage", f"cannot {what} content in the blob folder: {exc.strerror or exc}",
                            path=str(self.folder))


def _fchmod_if(fd: int, made: bool) -> int:
    if made:  # the umask may have taken bits away
        os.fchmod(fd, 0o700)
    return fd


def _sync_file(name: str, folder: int) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
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


CHUNK = 4 << 20


def digests_of(lines: Iterable[bytes]) -> list[str]:
    """The digests of the blobs these stored lines refer to."""
    return list(dict.fromkeys(ref["sha256"] for line in lines for ref in refs(line) if check_ref(ref) is None))


def needle(digest: str) -> bytes:
    """What a line that refers to the blob holds, as our writer lays it out (a digest merely quoted, as a redaction
    record lists the blobs it deletes, is not a reference)."""
    return b'"sha256":"' + digest.encode("ascii") + b'"'


def scope_of(store: Any) -> Any:
    """What shares a repository's blob store: its folder (JSONL), or its recorder."""
    root = getattr(store, "root", None)
    return root if root is not None else getattr(store, "recorder", None)


def collect(blobs: Any, scope: Any, digests: Iterable[str]) -> list[str]:
    """Delete the blobs among ``digests`` that no log in ``scope`` (a folder of session files, or a recorder) refers
    to; the ones deleted."""
    wanted = list(digests)
    if blobs is None or scope is None or not wanted:
        return []
    if isinstance(scope, (str, os.PathLike)):
        return list(blobs.collect(wanted, lambda digest: _in_folder(Path(scope), needle(digest))))
    return list(blobs.collect(wanted, lambda digest: _in_recorder(scope, digest)))


def _in_folder(folder: Path, needle: bytes) -> bool:
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".jsonl") and e.is_file(follow_symlinks=False))
    except OSError:
        return True  # the folder cannot be read: nothing is deleted
    for name in names:
        try:
            fd = open_regular(folder / name, follow=False)
        except FileNotFoundError:
            continue
        except OSError:
            return True
        try:
            size = os.fstat(fd).st_size
            if size and _holds(fd, size, needle):
                return True
        finally:
            os.close(fd)
    return False


def _holds(fd: int, size: int, needle: bytes) -> bool:
    """Does the file hold ``needle``? Read in chunks that overlap by the needle's length (not mapped: a file cut short
    by its writer meanwhile must not kill this process)."""
    offset, tail = 0, b""
    while offset < size:
        chunk = os.pread(fd, CHUNK, offset)
        if not chunk:
            return False
        if needle in tail + chunk:
            return True
        tail, offset = chunk[-len(needle):], offset + len(chunk)
    return False


def _in_recorder(recorder: Any, digest: str) -> bool:
    from sessiontree.storage.memory_recorder import MemoryRecorder  # here: it loads eventsourcing, which a reader never needs

    found = needle(digest)
    if isinstance(recorder, MemoryRecorder):  # memory, popo: the events its sessions read (a deleted one's not)
        return any(found in state for state in recorder.stored_states())
    return True  # a database's own store asks it (``blob_tables.TableBlobs.collect``); anything else keeps its blobs
