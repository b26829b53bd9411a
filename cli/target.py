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
from contextlib import ExitStack, closing, contextmanager
from importlib import import_module
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from sessiontree.cli.output import CliError, warn
from sessiontree.domain.errors import SessionError
from sessiontree.storage.files import make_private_dirs
from sessiontree.storage.folders import claim

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
    if "://" in url or url.startswith(("memory:", "archive:")):
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
    if database is not None and not create:
        _check_sqlite(database, url)
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
        claim(directory)  # made by us: ours to write into (docs/repositories.md)
    open_repo = feature("sessiontree.repository", "open_repo", "opening a repository by URL")
    return open_repo(url)


def _check_sqlite(database: str, url: str) -> None:
    """A read opens only a database sessiontree made: eventsourcing would add its tables to any other (read-only here)."""
    import sqlite3

    if not os.path.isfile(database):
        raise SessionError("not_found", f"no SQLite session database at {database} (run `sessiontree demo --repo {url}`)")
    try:
        with closing(sqlite3.connect(f"file:{quote(os.path.abspath(database))}?mode=ro", uri=True)) as db:
            ours = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'stored_events'").fetchone()
    except sqlite3.Error as exc:
        raise SessionError("storage", f"{database} cannot be read as a SQLite database: {exc}") from None
    if ours is None:
        raise SessionError("not_found", f"{database} holds no sessiontree sessions (it is not a sessiontree database); "
                                        "sessiontree does not add its tables to it by reading")


def looks_like_path(ref: str) -> bool:
    return os.sep in ref or "/" in ref or ref.endswith(".jsonl") or os.path.isfile(ref)


def open_file(path: str, **kwargs: Any) -> Any:
    """A ``Session`` on a JSONL session file (native or pi dialect); ``salvage=True`` reads past bad lines and says on
    stderr which were skipped."""
    if not os.path.exists(path):
        raise SessionError("not_found", f"no such session file: {path}")
    if os.path.isdir(path):
        raise directory_error(path)
    storage_class = feature("sessiontree.storage.jsonl", "JsonlSessionStorage", "reading JSONL session files")
    from sessiontree.session import Session
    from sessiontree.storage.files import is_archive

    if is_archive(path):  # a pruned session's archive: read-only, whole or refused (salvage reads no archive)
        from sessiontree.retention.archive import ArchiveSessionStorage

        return Session(ArchiveSessionStorage.open(path))
    storage = storage_class.open(path, **kwargs)
    report_skipped(path, getattr(storage, "skipped", ()))
    return Session(storage)


def directory_error(path: str) -> SessionError:
    return SessionError("not_found", f"{path} is a directory: pass it as --repo, not as a session")


@contextmanager
def directory_hint(ref: str | None) -> Iterator[None]:
    """A session named by a bare word that is no session but a directory here (`show old`) says so."""
    try:
        yield
    except SessionError as exc:
        if ref is not None and exc.code == "not_found" and os.path.isdir(ref):
            raise directory_error(ref) from None
        raise


def report_skipped(path: str, skipped: Any, shown: int = 20) -> None:
    """Each unreadable line on stderr; the lines skipped only because they descend from one are counted, not listed."""
    bad = [(line, reason) for line, reason in skipped if "unknown parent" not in reason]
    for line, reason in bad[:shown]:
        warn(f"{path}:{line}: skipped: {reason}")
    if len(bad) > shown:
        warn(f"{path}: {len(bad) - shown} more unreadable lines skipped")
    if len(skipped) > len(bad):
        warn(f"{path}: {len(skipped) - len(bad)} later lines skipped too: they descend from a skipped line")


def listing(repo: Any, **query: Any) -> Any:
    """``repo.list(**query)``, saying on stderr what it could not read (and so left out)."""
    rows = repo.list(**query)
    for path, reason in getattr(rows, "unreadable", ()):
        warn(f"{path}: cannot read it ({reason}): its sessions are left out")
    return rows


def resolve_info(repo: Any, ref: str | None, url: str) -> Any:
    """The listing row of the session ``ref`` names in ``repo`` (newest when ``ref`` is None): an id, a unique id
    prefix or a name. A ref that names several is ``ambiguous``, with every candidate listed."""
    if ref is not None and not ref.strip():
        raise CliError("an empty session name names no session")
    infos = listing(repo)
    unread = len(getattr(infos, "unreadable", ()))
    also = f"; {unread} file(s) or folder(s) could not be read, as said above" if unread else ""
    if ref is None:
        if not infos:
            make = "" if unread else " (run `sessiontree demo` to make one)"
            raise SessionError("not_found", f"no sessions in {url}{make}{also}")
        return infos[0]
    # a prefix and a name count alike: one that fits two sessions two ways is ambiguous, not the first way's
    matches = [i for i in infos if i.id == ref] or [i for i in infos if i.id.startswith(ref) or i.name == ref]
    if not matches:
        raise SessionError("not_found", f"no session {ref!r} in {url} (no id, id prefix or name matches{also})")
    if len(matches) > 1:
        listed = "; ".join(f"{i.id}" + (f" {i.name!r}" if i.name else "") + f" ({i.path})" for i in matches)
        raise CliError(f"{ref!r} names {len(matches)} sessions in {url}: {listed}", code="ambiguous")
    return matches[0]


def resolve_id(repo: Any, ref: str | None, url: str) -> str:
    """The id of the session ``ref`` names in ``repo`` (see :func:`resolve_info`)."""
    if ref is not None and _exists(repo, ref):
        return ref
    return resolve_info(repo, ref, url).id  # type: ignore[no-any-return]  # a SessionInfo's id is a str


def _exists(repo: Any, ref: str) -> bool:
    try:
        return bool(repo.exists(ref))
    except SessionError as exc:
        if exc.code == "invalid_entry":  # not a valid id at all: try it as a prefix or name
            return False
        raise


MIN_PREFIX = 4  # as git: shorter prefixes match too much to be what anyone meant


def resolve_entry(session: Any, ref: str) -> str:
    """The id of the entry ``ref`` names: an id, a unique id prefix of four or more characters, or a label. Several
    matches are ``ambiguous``, listed; none is ``not_found``."""
    if session.has_entry(ref):
        return ref
    labels = session.get_labels()
    matches = [i for i, label in labels.items() if label == ref]  # a label and a prefix count alike
    if len(ref) >= MIN_PREFIX:
        matches += [h.id for h in session.iter_heads() if h.id.startswith(ref) and h.type != "leaf" and h.id not in matches]
    if len(matches) == 1:
        return str(matches[0])
    if not matches:
        short = f" (an id prefix needs {MIN_PREFIX} or more characters)" if len(ref) < MIN_PREFIX else ""
        raise SessionError("not_found", f"no entry {ref!r} in session {session.id}: no id, id prefix or label matches{short}")
    listed = "; ".join(f"{i}" + (f" [{labels[i]}]" if i in labels else "") for i in matches[:20])
    more = f"; and {len(matches) - 20} more" if len(matches) > 20 else ""
    raise CliError(f"{ref!r} names {len(matches)} entries of session {session.id}: {listed}{more}", code="ambiguous")


def resolve_entries(session: Any, args: Any, names: tuple[str, ...] = ("entry", "leaf")) -> None:
    """Replace each entry reference among ``args``' ``names`` by the id it names (``move root`` stays: its keyword)."""
    for name in names:
        ref = getattr(args, name, None)
        if isinstance(ref, str) and not (ref == "root" and getattr(args, "command", None) == "move"):
            setattr(args, name, resolve_entry(session, ref))


@contextmanager
def session_for(option_repo: str | None, ref: str | None, args: Any = None) -> Iterator[Any]:
    """The session named by ``ref`` (a file path, an id, a prefix or a name), closed afterwards. With ``args``, its
    ``--salvage`` is honoured and its entry references (``entry``, ``leaf``) are resolved to ids."""
    salvage = bool(getattr(args, "salvage", False))
    with ExitStack() as stack:
        if ref is not None and looks_like_path(ref):
            session = open_file(ref, salvage=True) if salvage else open_file(ref)
        else:
            with directory_hint(ref):
                repo = open_repository(option_repo)
                stack.callback(repo.close)  # after the session: a database session needs its repository's connections
                session = _open_in(repo, ref, repo_url(option_repo), salvage)
        stack.callback(session.close)
        if args is not None:
            resolve_entries(session, args)
        yield session


def _open_in(repo: Any, ref: str | None, url: str, salvage: bool) -> Any:
    if not salvage:
        return repo.open(resolve_id(repo, ref, url))
    info = resolve_info(repo, ref, url)
    if os.path.isfile(info.path):  # a file: salvaged in place, read-only
        return open_file(info.path, salvage=True)
    session = repo.open(info.id, salvage=True)
    report_skipped(info.path, session.storage.skipped)
    return session
