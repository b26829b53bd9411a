"""One way in: ``open_store(url)`` picks the store a URL names (``open_repo`` wraps it).

``memory:``, ``jsonl:`` URLs and plain directories, ``sqlite:`` (paths as in SQLAlchemy),
``postgresql://`` (``?schema=`` and eventsourcing's settings by name), ``popo:`` and ``archive:`` (a folder
of pruned sessions' archives, read-only);
docs/repositories.md has the table. A password never appears in locations or messages.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, unquote, urlsplit

from sessiontree.domain.errors import SessionError
from sessiontree.storage.store import MemoryStore, SessionStore

_SCHEMES = ("memory", "popo", "jsonl", "sqlite", "postgresql", "postgres", "archive")


def open_store(url: str | os.PathLike[str], *, durability: str = "flush") -> SessionStore:
    """The session store ``url`` names (see the module documentation)."""
    if isinstance(url, os.PathLike):
        return _jsonl(os.fspath(url), durability)
    if not isinstance(url, str) or not url:
        raise TypeError(f"a repository URL must be a non-empty str or path, not {url!r}")
    scheme, sep, rest = url.partition(":")
    if not sep or scheme.lower() not in _SCHEMES or (len(scheme) == 1 and os.name == "nt"):
        if "://" in url:
            raise SessionError("storage", f"unknown repository URL scheme in {url!r} (use one of {', '.join(_SCHEMES)})")
        return _jsonl(url, durability)
    scheme = scheme.lower()
    if scheme == "memory":
        return MemoryStore()
    if scheme == "jsonl":
        return _jsonl(_path_after(rest, url), durability)
    if scheme == "archive":  # a folder of pruned sessions' archives, read-only (retention/archive.py)
        return _archives(_path_after(rest, url))
    from sessiontree.storage.database import DatabaseStore

    if scheme == "popo":
        return DatabaseStore.popo()
    if scheme == "sqlite":
        return DatabaseStore.sqlite(_path_after(rest, url, sqlalchemy=True))
    return _postgres(url)


def _path_after(rest: str, url: str, *, sqlalchemy: bool = False) -> str:
    """The path of a ``jsonl:`` URL (read as in ``file:`` URLs) or, with ``sqlalchemy``, of a
    ``sqlite:`` URL (read as SQLAlchemy does); both take a bare path too (``sqlite:a.db``)."""
    if rest.startswith("//"):
        rest = rest[2:]
        if not rest.startswith("/"):
            raise SessionError("storage", f"{url!r}: a host is not allowed here; write {url.split(':')[0]}:///path")
        if sqlalchemy:
            rest = rest[1:]
    path = unquote(rest)
    if not path:
        raise SessionError("storage", f"{url!r} names no path")
    return path


def _jsonl(path: str, durability: str) -> SessionStore:
    from sessiontree.storage.jsonl_repo import JsonlStore

    return JsonlStore(path, durability=durability)


def _archives(path: str) -> SessionStore:
    from sessiontree.retention.archive import ArchiveStore

    if not os.path.isdir(path):
        raise SessionError("not_found", f"no folder of archives at {path}")
    return ArchiveStore(path)


def _postgres(url: str) -> SessionStore:
    from sessiontree.storage.database import DatabaseStore

    parts = urlsplit(url)
    dbname = unquote(parts.path.lstrip("/"))
    if not dbname:
        raise SessionError("storage", f"{_safe(url)}: name the database (postgresql://user@host:port/dbname)")
    try:
        port = parts.port or 5432
    except ValueError:
        raise SessionError("storage", f"{_safe(url)}: the port is not a number") from None
    schema, settings = _query(url, parts.query)
    user = unquote(parts.username) if parts.username else "postgres"
    password = unquote(parts.password) if parts.password is not None else None
    host = parts.hostname or "127.0.0.1"
    return DatabaseStore.postgres(dbname, host=host, port=port, user=user, password=password, schema=schema, settings=settings)


def _query(url: str, query: str) -> tuple[str | None, dict[str, str]]:
    """The ``schema`` a PostgreSQL URL's query names, and its eventsourcing settings by full name."""
    schema = None
    settings: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key.lower() == "schema":
            schema = value
            continue
        name = key.upper()
        if name.endswith("_TOPIC"):  # eventsourcing imports what a *_TOPIC setting names
            raise SessionError(
                "storage",
                f"{_safe(url)}: the setting {key!r} names code to import, which a URL may not do "
                "(set it in code or in the environment)",
            )
        if not name.startswith("POSTGRES_") and name not in ("ORIGINATOR_ID_TYPE", "CREATE_TABLE", "SINGLE_ROW_TRACKING"):
            name = "POSTGRES_" + name
        settings[name] = value
    return schema, settings


def _safe(url: str) -> str:
    """The URL without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return parts._replace(netloc=netloc).geturl()
