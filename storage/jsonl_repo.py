"""A directory of JSONL session files: the embedded, default store, and its listing index.

Each session is ``<root>/<session id>.jsonl``; other regular ``*.jsonl`` files whose first
line is a session header, directly in the directory or in a sub-folder of it (pi's, for
instance: one sub-folder per working directory), are listed and opened by that header's id.
A symbolic link is never a session of the directory. Creating a session marks the directory
as sessiontree's own unless it holds someone else's sessions (``storage/folders.py``).

Listing reads the directory's index (:class:`DirectoryIndex`): the sessions' summaries in one file (in the folder if
it is sessiontree's own, else in the user's cache directory), brought up to date on ``refresh`` by reading only what
changed: a file that grew from where it stopped, anything else from its first line. Deleting it is always safe.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sessiontree.content.blob_stores import FOLDER, FolderBlobs, check_threshold
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted
from sessiontree.storage import folders, jsonl_index
from sessiontree.storage.files import make_private_dirs, open_regular
from sessiontree.storage.index import Summary, fold_on
from sessiontree.storage.jsonl import LINK_REFUSED, JsonlSessionStorage
from sessiontree.storage.storage import SessionStorage
from sessiontree.storage.store import SessionInfo, SessionStore, check_session_id
from sessiontree.wire.jsontext import DECODE_ERRORS, decode, dumps

INDEX_FILE = ".sessiontree-index.json"
INDEX_FORMAT = 2  # 2: ``modified`` is never before ``created`` (a fork made now lists as new)
MAX_INDEX_BYTES = 256 << 20  # an index past this is read as missing (rebuilt from the logs)


def _logs(root: str, unreadable: list[tuple[str, str]]) -> Iterator[tuple[str, str, os.stat_result]]:
    """The regular, not hidden ``*.jsonl`` files directly in ``root`` and in its not hidden sub-folders (pi keeps one
    per working directory), as (name relative to ``root``, path, ``stat``). Links are never followed. A folder or file
    that cannot be read is added to ``unreadable`` as (path, reason); a missing ``root`` lists nothing."""
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return
    except OSError as exc:
        unreadable.append((root, _reason(exc)))
        return
    yield from _files(entries, "", unreadable)
    for folder in entries:
        if not folder.name.startswith(".") and folder.is_dir(follow_symlinks=False):
            try:
                inside = list(os.scandir(folder.path))
            except OSError as exc:
                unreadable.append((folder.path, _reason(exc)))
                continue
            yield from _files(inside, f"{folder.name}/", unreadable)


def unreadable_logs(root: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """(path, reason) of each session file or folder of ``root`` (as a listing finds them) that cannot be read."""
    unreadable: list[tuple[str, str]] = []
    for _name, path, _st in _logs(os.fspath(root), unreadable):
        try:
            os.close(open_regular(path, follow=False))
        except OSError as exc:
            unreadable.append((path, _reason(exc)))
    return unreadable


def _reason(exc: OSError) -> str:
    return str(exc.strerror or exc)


def _files(
    entries: list[os.DirEntry[str]], prefix: str, unreadable: list[tuple[str, str]],
) -> Iterator[tuple[str, str, os.stat_result]]:
    for entry in entries:
        if not entry.name.endswith(".jsonl") or entry.name.startswith("."):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            unreadable.append((entry.path, _reason(exc)))
            continue
        if stat.S_ISREG(st.st_mode):  # a symlink, a FIFO, a device: never a session here
            yield prefix + entry.name, entry.path, st


def _stamped(st: os.stat_result) -> dict[str, int]:
    """What a record keeps of a file's ``stat`` to tell whether it changed: its size, times and inode (the change time
    moves with a new mode too, so a file that became unreadable, or readable again, is read again)."""
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino, "ctime_ns": st.st_ctime_ns}


def _stamp(record: dict[str, Any]) -> tuple[Any, ...]:
    return (record["size"], record["mtime_ns"], record["ino"], record.get("ctime_ns"))


class DirectoryIndex:
    """Summaries of every ``*.jsonl`` file in ``root`` and its sub-folders, cached in an index file: in the folder
    when it is sessiontree's own, else in the user's cache directory (``storage/folders.py``), so listing never
    writes into a folder of someone else's."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.fspath(root)
        self._files: dict[str, dict[str, Any]] | None = None
        self._kept_at: str | None = None  # where ``_files`` were last read from or written to
        self._summaries: dict[str, Summary] = {}  # decoded once per file version
        self.unreadable: list[tuple[str, str]] = []  # (path, reason) of what the last refresh could not read

    @property
    def path(self) -> str | None:
        """Where the index is kept now (None: nowhere, there is no cache directory)."""
        return self._where()[0]

    def _where(self) -> tuple[str | None, str | None]:
        """The index file, and the real path of ``root`` when that file is in the cache (None: in the folder)."""
        if folders.is_ours(self.root):
            return os.path.join(self.root, INDEX_FILE), None
        return folders.cached_index_path(self.root), os.path.realpath(self.root)

    def _load(self, path: str | None, real_root: str | None) -> dict[str, dict[str, Any]]:
        if path is None:
            return {}
        try:
            fd = open_regular(path, follow=False)
            try:
                data = decode(os.read(fd, MAX_INDEX_BYTES))
            finally:
                os.close(fd)
            # a cached index names its folder: a check against a hash collision
            if (isinstance(data, dict) and data.get("format") == INDEX_FORMAT and isinstance(data.get("files"), dict)
                    and data.get("root") == real_root):
                return data["files"]  # type: ignore[no-any-return]  # parsed JSON, checked to be a dict
        except (OSError, *DECODE_ERRORS):
            pass
        return {}  # missing or unreadable: rebuilt from the logs

    def _save(self, path: str | None, real_root: str | None, files: dict[str, dict[str, Any]]) -> None:
        if path is None or (real_root is not None and not folders.private_parent(path)):
            return  # no cache directory: listing still works, it just keeps nothing
        data: dict[str, Any] = {"format": INDEX_FORMAT, "files": files}
        if real_root is not None:
            data["root"] = real_root
        folders.write_private(path, dumps(data))  # private: it quotes first messages; a read-only folder keeps nothing

    def refresh(self) -> dict[str, Summary]:
        """Bring the index up to date with the directory; ``{file name: summary}`` (names relative to ``root``), shared
        with later calls (read them, do not change them)."""
        path, real_root = self._where()
        if self._files is None:
            files, changed = self._load(path, real_root), path is not None and not os.path.exists(path)
        else:  # the folder may have become ours since (adopted): the index moves in with the next save
            files, changed = self._files, path != self._kept_at
        seen: dict[str, dict[str, Any]] = {}
        unreadable: list[tuple[str, str]] = []
        for name, log, st in _logs(self.root, unreadable):
            record = files.get(name)
            if (record is None or "error" in record  # a file that could not be read is tried again (its mode may change)
                    or _stamp(record) != (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)):
                record = self._scan(log, st, record)
                changed = True
            if "error" in record:
                unreadable.append((log, record["error"]))
            seen[name] = record
        self.unreadable = unreadable
        self._files, self._kept_at = seen, path
        if (changed or set(files) != set(seen)) and os.path.isdir(self.root):
            self._save(path, real_root, seen)
        return self._decoded(seen)

    def _decoded(self, files: dict[str, dict[str, Any]]) -> dict[str, Summary]:
        """The summaries of ``files``, decoded again only where a file changed."""
        summaries = {}
        for name, record in files.items():
            data = record["summary"]
            if data is None:
                continue
            summary = self._summaries.get(name)
            if summary is None or summary.version != data["version"] or summary.modified != data["modified"]:
                summary = Summary.from_dict(data)
            summaries[name] = summary
        self._summaries = summaries
        return dict(summaries)

    def forget(self, name: str) -> None:
        """Drop a file from the index (after deleting it)."""
        if self._files is not None:
            self._files.pop(name, None)
        self._summaries.pop(name, None)

    def _scan(self, path: str, st: os.stat_result, record: dict[str, Any] | None) -> dict[str, Any]:
        """A new or changed file's record: folded on from where ``record`` stopped if the file only grew, else from line 1."""
        summary, offset = None, 0
        if (record is not None and record["summary"] is not None
                and record["ino"] == st.st_ino and 0 < record["offset"] <= st.st_size):
            summary, offset = Summary.from_dict(record["summary"]), record["offset"]
        try:
            fd = open_regular(path, follow=False)
            try:
                if offset and os.pread(fd, 1, offset - 1) != b"\n":  # rewritten, not appended: start over
                    summary, offset = None, 0
                summary, offset = fold_on(fd, summary, offset)
            finally:
                os.close(fd)
        except OSError as exc:
            return {**_stamped(st), "offset": 0, "summary": None,
                    "error": _reason(exc)}
        if summary is None:
            return {**_stamped(st), "offset": 0, "summary": None}
        return {**_stamped(st), "offset": offset, "summary": summary.to_dict()}


class JsonlStore(SessionStore):
    """Sessions as JSONL files in one directory (``durability``: ``"flush"`` or ``"fsync"``;
    ``wait``: how long an append waits for the lock another append holds, see ``JsonlSessionStorage``)."""

    def __init__(self, root: str | os.PathLike[str], *, durability: str = "flush", wait: float | None = None) -> None:
        self.root = Path(root)
        self.durability = durability
        self.wait = wait
        self.index = DirectoryIndex(self.root)
        self._blobs = FolderBlobs(self.root / FOLDER, durability=durability)

    @property
    def blobs(self) -> FolderBlobs:
        return self._blobs

    def set_blob_threshold(self, threshold: Any) -> None:
        self._blobs.threshold = check_threshold(threshold)

    def _own(self, storage: JsonlSessionStorage) -> JsonlSessionStorage:
        """A storage of this folder, writing content out of line into the folder's blob store (native files only)."""
        if storage.blobs is not None:
            storage.blobs = self._blobs
        return storage

    def path_for(self, session_id: str) -> Path:
        """Where a session created here lives (whether or not it exists)."""
        return self.root / f"{check_session_id(session_id)}.jsonl"

    def _find(self, session_id: str) -> Path | None:
        path = self.path_for(session_id)
        if path.is_symlink():
            raise SessionError("storage", f"session {session_id}: {LINK_REFUSED}", path=str(path))
        if path.is_file():
            return path
        held = [self.root / name for name, summary in self.index.refresh().items() if summary.id == session_id]
        if len(held) > 1:  # copies (pi's folders may hold one in two places): which one is meant is not ours to guess
            files = "; ".join(str(p) for p in sorted(held))
            raise SessionError("conflict", f"session {session_id} is held by {len(held)} files: {files}; open one by "
                                           "its path (open_session(path), or the path on the command line)")
        return held[0] if held else None

    def _private_root(self) -> None:
        """Make the directory (0700) if it is missing, and mark it ours: a directory we made, or one holding nothing
        of anyone else's. A foreign one (pi's) gets the session it was asked for, but no mark."""
        if folders.is_ours(self.root):
            return
        try:
            made = not self.root.exists()
            make_private_dirs(self.root)
        except OSError as exc:
            raise SessionError("storage", f"cannot create the directory: {exc.strerror or exc}", path=str(self.root)) from exc
        if made or folders.foreign_reason(self.root) is None:
            folders.claim(self.root)

    def claim(self) -> None:
        """Make the directory ready for new sessions now (made, and marked ours unless it is someone else's), so that
        listing it before the first write already keeps the index in it."""
        self._private_root()

    def store_header(self, header: SessionStarted) -> SessionStorage:
        path = self.path_for(header.originator_id)  # create() refuses an existing file
        self._private_root()
        return self._own(JsonlSessionStorage.create_with_header(path, header, durability=self.durability, wait=self.wait))

    def store_lines(self, session_id: str, lines: Sequence[bytes]) -> SessionStorage:
        self._private_root()
        return self._own(JsonlSessionStorage.create_from_lines(self.path_for(session_id), lines, durability=self.durability,
                                                               wait=self.wait))

    def attach(self, session_id: str) -> SessionStorage:
        path = self._find(session_id)
        if path is None:
            raise SessionError("not_found", f"session {session_id} not found in {self.root}", path=str(self.path_for(session_id)))
        storage = JsonlSessionStorage.open(path, durability=self.durability, follow_links=False, wait=self.wait)
        if storage.session_id != session_id:
            storage.close()
            raise SessionError("corrupt", f"the file holds session {storage.session_id}, not {session_id}", path=str(path))
        if path.parent != self.root and storage.blobs is not None:  # a native file in a sub-folder: its own folder's
            storage.blobs.threshold = self._blobs.threshold
            return storage
        return self._own(storage)

    def remove(self, session_id: str) -> None:
        path = self._find(session_id)
        if path is None:
            return
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise SessionError("storage", f"cannot delete the file: {exc.strerror or exc}", path=str(path)) from exc
        self.index.forget(path.relative_to(self.root).as_posix())
        jsonl_index.remove(path)  # the session's sidecar index (docs/file-format.md)

    def infos(self, cwd: str | None) -> Iterable[SessionInfo]:
        root = os.fspath(self.root)
        wanted = None if cwd is None else same_place(cwd)
        return [
            SessionInfo.from_summary(summary, os.path.join(root, name))
            for name, summary in self.index.refresh().items()
            if wanted is None or summary.cwd == cwd or same_place(summary.cwd) == wanted
        ]

    def parent_reference(self, storage: SessionStorage) -> str:
        return storage.location  # a fork's header names the source file, as pi's does

    def unreadable(self) -> list[tuple[str, str]]:
        return list(self.index.unreadable)


def same_place(cwd: str) -> str:
    """A working directory as pi compares them: an absolute path normalised (``/a/b/`` is ``/a/b``), anything else
    as it is."""
    return os.path.normpath(cwd) if os.path.isabs(cwd) else cwd
