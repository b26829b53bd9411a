"""Running sessiontree's synchronous calls from the frameworks' async methods.

A JSONL or in-memory append takes microseconds (a write to the page cache, no round trip), so it runs inline on the
event loop. A database call is a round trip to a server or to SQLite's file lock, which can take milliseconds or wait
for another writer: it runs in a worker thread (``asyncio.to_thread``), never on the loop. Each integration object
serialises its own calls with an ``asyncio.Lock``, so a session is touched by one thread at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from sessiontree.repository import DatabaseSessionRepo, SessionRepo, open_repo

T = TypeVar("T")


def as_repo(repo: SessionRepo | str) -> SessionRepo:
    """A repository object as it is, or the one a URL names (``open_repo``)."""
    if isinstance(repo, SessionRepo):
        return repo
    if isinstance(repo, str):
        return open_repo(repo)
    raise TypeError(f"repo must be a SessionRepo or a repository URL, not {repo!r}")


async def call(repo: SessionRepo, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)``: inline for files and memory, in a worker thread for a database."""
    if isinstance(repo, DatabaseSessionRepo):
        return await asyncio.to_thread(function, *args, **kwargs)
    return function(*args, **kwargs)
