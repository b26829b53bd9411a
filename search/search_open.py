"""The search of a store: which index it keeps, where, and how it learns what changed.

| store | index | catching up |
|---|---|---|
| JSONL folder | an SQLite FTS5 file beside the sessions (ours) or in the cache directory (pi's) | file sizes and offsets |
| SQLite database | FTS5 tables in the same database | per-session versions |
| PostgreSQL | a ``tsvector`` column with a GIN index, in the same schema | per-session versions |
| memory, POPO | an SQLite FTS5 database in memory | per-session versions |
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from sessiontree.domain.errors import SessionError
from sessiontree.search.search_jsonl import JsonlSearch
from sessiontree.search.search_recorder import RecorderSearch, session_versions
from sessiontree.search.search_sqlite import SqliteSearchIndex
from sessiontree.search.search_state import Filters, Hit

if TYPE_CHECKING:  # the stores are imported when one is searched: the command line's search of a folder needs none
    from sessiontree.storage.store import SessionStore


class StoreSearch:
    """What a repository searches with: ``search(filters)`` catches the index up, then asks it."""

    def __init__(self, store: SessionStore) -> None:
        self._impl = _open(store)

    def search(self, filters: Filters) -> list[Hit]:
        hits: list[Hit] = self._impl.search(filters)
        return hits

    def catch_up(self) -> None:
        """Bring the index up to date with the store now (an erasure does, so the erased text leaves it at once)."""
        self._impl.refresh()

    def close(self) -> None:
        self._impl.close()


def _open(store: SessionStore) -> Any:
    from sessiontree.storage.database import DatabaseStore
    from sessiontree.storage.jsonl_repo import JsonlStore
    from sessiontree.storage.store import MemoryStore

    if isinstance(store, JsonlStore):
        return JsonlSearch(store.root)
    if isinstance(store, MemoryStore):
        return RecorderSearch(SqliteSearchIndex(":memory:"), store.recorder, partial(session_versions, store.recorder,
                                                                                  "eventsourcing.popo"))
    if isinstance(store, DatabaseStore):
        versions = partial(session_versions, store.recorder, store.module)
        if store.module == "eventsourcing.sqlite":
            path = store.env.get("SQLITE_DBNAME", "")
            own = path in ("", ":memory:") or path.startswith("file:")
            if own:
                return RecorderSearch(SqliteSearchIndex(":memory:"), store.recorder, versions)
            index = SqliteSearchIndex(path, own=False)  # beside the sessions: any commit to them moves its data_version
            return RecorderSearch(index, store.recorder, versions, index.data_version)
        if store.module == "eventsourcing.postgres":
            from sessiontree.search.search_postgres import PostgresSearchIndex

            return RecorderSearch(PostgresSearchIndex(store.env), store.recorder, versions)
        return RecorderSearch(SqliteSearchIndex(":memory:"), store.recorder, versions)
    raise SessionError("storage", f"searching a {type(store).__name__} is not supported")
