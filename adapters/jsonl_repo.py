"""A directory of JSONL session files: the embedded, default repository.

Each session is ``<root>/<session id>.jsonl`` (:class:`JsonlSessionStorage`). Other
``*.jsonl`` files in the directory whose first line is a session header (pi's
``<timestamp>_<id>.jsonl`` files, for instance) are listed and opened by their header id
too. Session ids are checked before they reach a path: no separators, no ``..``, no NUL.

``list()`` reads a cross-session index (``.sessiontree-index.json``, a cache of
:class:`~sessiontree.adapters.index.DirectoryIndex`) and only the parts of the logs it has
not seen, so listing stays cheap as sessions pile up. The directory is created on the
first ``create``; listing a directory that does not exist gives an empty list.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiontree.adapters.index import DirectoryIndex
from sessiontree.adapters.jsonl import _LINK_REFUSED, JsonlSessionStorage
from sessiontree.adapters.jsonl_file import make_private_dirs
from sessiontree.adapters.repo import SessionInfo, SessionRepo, check_session_id
from sessiontree.adapters.storage import SessionStorage
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted

if TYPE_CHECKING:
    from sessiontree.session import Session


class JsonlSessionRepo(SessionRepo):
    """Sessions as JSONL files in one directory (``durability``: ``"flush"`` or ``"fsync"``)."""

    def __init__(self, root: str | os.PathLike[str], *, durability: str = "flush", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.root = Path(root)
        self.durability = durability
        self.index = DirectoryIndex(self.root)

    def __repr__(self) -> str:
        return f"JsonlSessionRepo({str(self.root)!r})"

    def path_for(self, session_id: str) -> Path:
        """Where a session created here lives (whether or not it exists)."""
        return self.root / f"{check_session_id(session_id)}.jsonl"

    def _find(self, session_id: str) -> Path | None:
        path = self.path_for(session_id)
        if path.is_symlink():
            raise SessionError("storage", f"session {session_id}: {_LINK_REFUSED}", path=str(path))
        if path.is_file():
            return path
        for name, summary in self.index.refresh().items():
            if summary.id == session_id:
                return self.root / name
        return None

    def _store_header(self, header: SessionStarted) -> SessionStorage:
        path = self.path_for(header.originator_id)  # create() refuses an existing file
        try:
            make_private_dirs(self.root)
        except OSError as exc:
            raise SessionError("storage", f"cannot create the directory: {exc.strerror or exc}", path=str(self.root)) from exc
        return JsonlSessionStorage.create_with_header(path, header, durability=self.durability)

    def _store_lines(self, session_id: str, lines: Sequence[bytes]) -> SessionStorage:
        path = self.path_for(session_id)
        try:
            make_private_dirs(self.root)
        except OSError as exc:
            raise SessionError("storage", f"cannot create the directory: {exc.strerror or exc}", path=str(self.root)) from exc
        return JsonlSessionStorage.create_from_lines(path, lines, durability=self.durability)

    def _attach(self, session_id: str) -> SessionStorage:
        path = self._find(session_id)
        if path is None:
            raise SessionError("not_found", f"session {session_id} not found in {self.root}", path=str(self.path_for(session_id)))
        storage = JsonlSessionStorage.open(path, durability=self.durability, follow_links=False)
        if storage.session_id != session_id:
            storage.close()
            raise SessionError(
                "corrupt", f"the file holds session {storage.session_id}, not {session_id}", path=str(path)
            )
        return storage

    def _remove(self, session_id: str) -> None:
        path = self._find(session_id)
        if path is None:
            return
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise SessionError("storage", f"cannot delete the file: {exc.strerror or exc}", path=str(path)) from exc
        self.index.forget(path.name)

    def _infos(self, cwd: str | None) -> Iterable[SessionInfo]:
        root = os.fspath(self.root)
        join = os.path.join
        return [
            SessionInfo.from_summary(summary, join(root, name))
            for name, summary in self.index.refresh().items()
            if cwd is None or summary.cwd == cwd
        ]

    def _parent_reference(self, session: Session) -> str:
        return session.storage.location  # a fork's header names the source file, as pi's does
