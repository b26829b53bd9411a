"""SQLite and PostgreSQL backends for the storage contract (``tests/support/sessiontree_fixtures.py``).

Each ``create`` gets its own store (an SQLite file in its folder, or a fresh PostgreSQL
schema), so sessions with the same id in one test never collide; ``reopen`` opens a
second repository on the same store, as another process would; ``close`` closes every
repository a test opened and drops its schemas.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import sessiontree_pg as pg

from sessiontree import DatabaseSessionRepo, open_repo
from sessiontree.domain import aggregate
from sessiontree.domain.ids import new_session_id, now_iso
from sessiontree.storage.storage import SessionStorage

_REPOS: dict[str, list[DatabaseSessionRepo]] = defaultdict(list)  # url -> repos opened on it
_URLS: dict[Path, list[tuple[str, str | None]]] = defaultdict(list)  # test folder -> (url, schema)
_OPEN: list[DatabaseSessionRepo] = []  # oldest first

MAX_OPEN = 8  # property tests create a store per example; older ones are done with


def _store(repo: DatabaseSessionRepo, header: dict[str, Any]) -> SessionStorage:
    started = aggregate.start(
        session_id=header.get("session_id") or new_session_id(),
        timestamp=header.get("timestamp") or now_iso(),
        cwd=header.get("cwd", ""),
        parent_session=header.get("parent_session"),
        metadata=header.get("metadata"),
    )
    return repo.store.store_header(started)


_HOW: dict[str, str] = {}  # a repository's own url -> the URL it was opened with


def _open(url: str) -> DatabaseSessionRepo:
    repo = open_repo(url)
    assert isinstance(repo, DatabaseSessionRepo)
    _HOW[repo.url] = url
    _REPOS[repo.url].append(repo)
    _OPEN.append(repo)
    while len(_OPEN) > MAX_OPEN:
        _OPEN.pop(0).close()  # closing twice is harmless
    return repo


def sqlite_create(place: Path, **header: Any) -> SessionStorage:
    repo = _open(f"sqlite:{place / 'sessions.db'}")
    _URLS[place.parent].append((repo.url, None))
    return _store(repo, header)


def postgres_create(place: Path, **header: Any) -> SessionStorage:
    pg.require_postgres()
    schema = f"contract_{new_session_id().replace('-', '')[-16:]}"
    repo = _open(pg.url(schema) + "&pool_size=1&max_overflow=1")
    _URLS[place.parent].append((repo.url, schema))
    return _store(repo, header)


def reopen(storage: SessionStorage) -> SessionStorage:
    own = storage.location.rsplit("#", 1)[0]
    return _open(_HOW[own]).store.attach(storage.session_id)


def close(root: Path) -> None:
    for url, schema in _URLS.pop(root, []):
        _HOW.pop(url, None)
        for repo in _REPOS.pop(url, []):
            repo.close()
            if repo in _OPEN:
                _OPEN.remove(repo)
        if schema is not None:
            pg.drop_schema(schema)
