"""A folder of pruned sessions' archives as a read-only store: ``open_repo("archive:DIR")`` lists, opens and verifies
them like any repository, and refuses every write (creating, copying into, deleting, pruning).

Listing decompresses each archive once and keeps its summary while the file is unchanged (same size, modification
time and inode), so a second listing costs a ``stat`` per archive.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NoReturn

from sessiontree.content.blob_stores import FOLDER, FolderBlobs, check_threshold
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted
from sessiontree.retention.archive import ARCHIVE_SUFFIX, ArchiveSessionStorage, archive_name, read_archive
from sessiontree.storage.index import Summary, fold_lines
from sessiontree.storage.jsonl_repo import same_place
from sessiontree.storage.storage import SessionStorage
from sessiontree.storage.store import SessionInfo, SessionStore, check_session_id


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
