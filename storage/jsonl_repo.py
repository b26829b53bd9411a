"""A directory of JSONL session files: the embedded, default store.

Each session is ``<root>/<session id>.jsonl``; other regular ``*.jsonl`` files whose first
line is a session header, directly in the directory or in a sub-folder of it (pi's, for
instance: one sub-folder per working directory), are listed and opened by that header's id.
A symbolic link is never a session of the directory. Listing reads the directory's index.
Creating a session marks the directory as sessiontree's own unless it holds someone else's
sessions (``storage/folders.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sessiontree.content.blob_stores import FOLDER, FolderBlobs, check_threshold
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted
from sessiontree.storage import folders, jsonl_index
from sessiontree.storage.files import make_private_dirs
from sessiontree.storage.index import DirectoryIndex
from sessiontree.storage.jsonl import LINK_REFUSED, JsonlSessionStorage
from sessiontree.storage.storage import SessionStorage
from sessiontree.storage.store import SessionInfo, SessionStore, check_session_id


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
