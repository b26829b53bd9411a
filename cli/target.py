"""Which repository and which session a command works on.

``--repo URL`` names a repository the way ``open_repo`` reads it (a directory, ``jsonl:///dir``,
``sqlite:///file.db``, ``postgresql://...``, ``memory:``); without it, ``$SESSIONTREE_REPO``,
else ``.sessions/`` in the current directory. A session is named by a JSONL file path, by
its id, by a unique prefix of its id, or by its name; without one, the most recently
modified session of the repository is used.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import import_module
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from sessiontree.adapters.files import make_private_dirs
from sessiontree.cli.output import CliError
from sessiontree.domain.errors import SessionError

DEFAULT_REPO = ".sessions"
ENV_REPO = "SESSIONTREE_REPO"


def feature(module: str, name: str, what: str) -> Any:
    """``module.name``, or a clear error saying ``what`` is unavailable in this build."""
    try:
        return getattr(import_module(module), name)
    except (ImportError, AttributeError):
        raise CliError(f"{what} is not available in this build of sessiontree ({module}.{name} is missing)") from None


def repo_url(option: str | None) -> str:
    return option or os.environ.get(ENV_REPO) or DEFAULT_REPO


def local_directory(url: str) -> str | None:
    """The directory of a JSONL repository URL, or None for other kinds."""
    if url.startswith("jsonl://"):
        return url[len("jsonl://") :] or "."
    if "://" in url or url.startswith("memory:"):
        return None
    return url


def sqlite_file(url: str) -> str | None:
    """The database file of a ``sqlite:`` URL (SQLAlchemy style: ``sqlite:///rel.db``,
    ``sqlite:////abs/file.db``, or ``sqlite:file.db``), else None."""
    if not url.lower().startswith("sqlite:"):
        return None
    rest = url[len("sqlite:") :]
    if rest.startswith("//"):
        rest = rest[3:] if rest.startswith("///") else rest[2:]
    return unquote(rest) or None


def open_repository(option: str | None, *, create: bool = False) -> Any:
    """The repository named by ``--repo`` (a missing local directory or SQLite file is an
    error unless ``create``: reading never makes a new, empty repository)."""
    url = repo_url(option)
    database = sqlite_file(url)
    if database is not None and not create and not os.path.isfile(database):
        raise SessionError("not_found", f"no SQLite session database at {database} (run `sessiontree demo --repo {url}`)")
    directory = local_directory(url)
    if directory is not None and not os.path.isdir(directory):
        if os.path.exists(directory):
            raise SessionError("not_found", f"{directory} is a file, not a session repository (pass it as the session instead)")
        if not create:
            raise SessionError(
                "not_found",
                f"no session repository at {directory} (run `sessiontree demo` to create one, or pass --repo)",
            )
        make_private_dirs(Path(directory))
    open_repo = feature("sessiontree.repository", "open_repo", "opening a repository by URL")
    return open_repo(url)


def looks_like_path(ref: str) -> bool:
    return os.sep in ref or "/" in ref or ref.endswith(".jsonl") or os.path.isfile(ref)


def open_file(path: str, **kwargs: Any) -> Any:
    """A ``Session`` on a JSONL session file (native or pi dialect)."""
    if not os.path.exists(path):
        raise SessionError("not_found", f"no such session file: {path}")
    if os.path.isdir(path):
        raise SessionError("not_found", f"{path} is a directory: pass it as --repo, not as a session")
    storage_class = feature("sessiontree.adapters.jsonl", "JsonlSessionStorage", "reading JSONL session files")
    from sessiontree.session import Session

    return Session(storage_class.open(path, **kwargs))


def resolve_id(repo: Any, ref: str | None, url: str) -> str:
    """The id of the session ``ref`` names in ``repo`` (newest when ``ref`` is None)."""
    if ref is not None and _exists(repo, ref):
        return ref
    infos = repo.list()
    if ref is None:
        if not infos:
            raise SessionError("not_found", f"no sessions in {url} (run `sessiontree demo` to make one)")
        return infos[0].id  # type: ignore[no-any-return]
    matches = [i for i in infos if i.id.startswith(ref)] or [i for i in infos if i.name == ref]
    if not matches:
        raise SessionError("not_found", f"no session {ref!r} in {url} (no id, id prefix or name matches)")
    if len(matches) > 1:
        ids = ", ".join(i.id for i in matches[:4])
        raise SessionError("not_found", f"{ref!r} is ambiguous in {url}: it matches {len(matches)} sessions ({ids}, ...)")
    return matches[0].id  # type: ignore[no-any-return]


def _exists(repo: Any, ref: str) -> bool:
    try:
        return bool(repo.exists(ref))
    except SessionError as exc:
        if exc.code == "invalid_entry":  # not a valid id at all: try it as a prefix or name
            return False
        raise


@contextmanager
def session_for(option_repo: str | None, ref: str | None) -> Iterator[Any]:
    """The session named by ``ref`` (a file path, an id, a prefix or a name), closed afterwards."""
    if ref is not None and looks_like_path(ref):
        session = open_file(ref)
        try:
            yield session
        finally:
            session.close()
        return
    repo = open_repository(option_repo)
    try:
        session = repo.open(resolve_id(repo, ref, repo_url(option_repo)))
        try:
            yield session
        finally:
            session.close()
    finally:
        repo.close()
