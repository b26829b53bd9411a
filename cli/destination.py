"""Where new sessions go (``fork``, ``import``), and a session file as a one-session source.

pi's folders are read-only to sessiontree: a new session never lands in a folder that is not
sessiontree's own (``sessiontree.storage.folders`` says how that is told). It goes to the
named target (``fork --into URL``), else to the first of ``--repo``, ``$SESSIONTREE_REPO`` and
``./.sessions`` that is ours.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from typing import Any

from sessiontree.cli.output import warn
from sessiontree.cli.target import DEFAULT_REPO, ENV_REPO, feature, local_directory, open_repository
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted
from sessiontree.repository import SessionRepo
from sessiontree.storage.folders import foreign_reason
from sessiontree.storage.storage import SessionStorage
from sessiontree.storage.store import SessionInfo, SessionStore


class OneFile(SessionStore):
    """A read-only store holding one opened file: the source of ``copy_from`` and ``fork``."""

    def __init__(self, storage: SessionStorage) -> None:
        self._storage = storage

    def store_header(self, header: SessionStarted) -> SessionStorage:
        raise SessionError("storage", f"{self._storage.location} is a source file, not a repository")

    store_lines = store_header  # type: ignore[assignment]

    def attach(self, session_id: str) -> SessionStorage:
        if session_id != self._storage.session_id:
            held = self._storage.session_id
            raise SessionError("not_found", f"{self._storage.location} holds session {held}, not {session_id}")
        return self._storage

    def remove(self, session_id: str) -> None:
        raise SessionError("storage", f"{self._storage.location} is a source file: nothing is deleted from it")

    def infos(self, cwd: str | None) -> Iterable[SessionInfo]:
        return ()

    def parent_reference(self, storage: SessionStorage) -> str:
        return storage.location  # a fork names the file it came from, as pi does

    @property
    def blobs(self) -> Any:
        return self._storage.blobs

    def close(self) -> None:
        self._storage.close()


def file_source(path: str) -> tuple[SessionRepo, str]:
    """A repository serving only the session file at ``path`` (opened in place, never written), and its id."""
    if not os.path.exists(path):
        raise SessionError("not_found", f"no such session file: {path}")
    if os.path.isdir(path):
        raise SessionError("not_found", f"{path} is a directory: pass it as --repo, not as a session")
    storage_class = feature("sessiontree.storage.jsonl", "JsonlSessionStorage", "reading JSONL session files")
    storage = storage_class.open(path)
    return SessionRepo(OneFile(storage)), storage.session_id


def foreign_folder(url: str) -> str | None:
    """Why the repository ``url`` is a folder sessiontree must not write into (pi's), or None."""
    directory = local_directory(url)
    if directory is None or not os.path.isdir(directory):
        return None  # a database, or a folder still to be made (and so ours)
    return foreign_reason(directory)


def refuse_foreign(url: str, what: str, hint: str = "--repo DIR") -> None:
    reason = foreign_folder(url)
    if reason is not None:
        raise SessionError(
            "storage",
            f"{local_directory(url)} {reason}: it is not sessiontree's, and sessiontree never writes into it; "
            f"name a repository of sessiontree's own for {what} ({hint})",
        )


def new_sessions_url(args: argparse.Namespace, what: str) -> str:
    """The repository new sessions go to: the named target (``--into``), else the first repository of ours among
    ``--repo``, ``$SESSIONTREE_REPO`` and ``.sessions`` (a foreign one skipped, with a warning)."""
    into = getattr(args, "into", None)
    if into:
        refuse_foreign(into, what, "--into DIR")
        return str(into)
    candidates = list(dict.fromkeys(c for c in (args.repo, os.environ.get(ENV_REPO), DEFAULT_REPO) if c))
    skipped: list[str] = []
    for url in candidates:
        reason = foreign_folder(url)
        if reason is None:
            if skipped:
                warn(f"{skipped[0]}; sessiontree never writes into it, so {what} goes to {url}")
            return url
        skipped.append(f"{local_directory(url)} {reason}")
    refuse_foreign(candidates[-1], what, f"${ENV_REPO}=DIR")
    raise AssertionError("unreachable: the last candidate is foreign")  # pragma: no cover


def open_target(url: str) -> Any:
    """The repository new sessions go to, made if missing; a folder is marked sessiontree's own before anything in it
    is listed (so its index is kept in it from the start)."""
    repo = open_repository(url, create=True)
    claim = getattr(repo.store, "claim", None)
    if claim is not None:
        claim()
    return repo


def same_repository(a: str, b: str) -> bool:
    """Do two repository URLs name the same place (the same directory, or the same URL)?"""
    da, db = local_directory(a), local_directory(b)
    if da is not None and db is not None:
        return os.path.realpath(da) == os.path.realpath(db)
    return a == b and not a.startswith("memory:")


__all__ = ["OneFile", "file_source", "foreign_folder", "new_sessions_url", "open_target", "refuse_foreign", "same_repository"]
