"""Fixtures the feature folders' tests share (each tests/<folder>/conftest.py star-imports them): ``storage_factory``,
parametrised over storage backends, and repositories on every backend.

``STORAGE_BACKENDS`` below is the one place a backend is added: append a
:class:`StorageBackend` (with ``marks`` such as ``pytest.mark.postgres`` when it needs a
server) and every test in ``test_storage_contract.py`` runs against it too.

It also puts ``tests/support`` on ``sys.path`` for the shared test kit (see
``tests/domain/conftest.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

_SUPPORT = str(Path(__file__).resolve().parents[1] / "support")
if _SUPPORT not in sys.path:
    sys.path.insert(0, _SUPPORT)

import sessiontree_pg as pg  # noqa: E402
import sessiontree_testkit as kit  # noqa: E402
from sessiontree_minimal import Lines, MinimalStorage  # noqa: E402

from sessiontree.domain.ids import fixed_clock  # noqa: E402
from sessiontree.repository import SessionRepo, open_repo  # noqa: E402
from sessiontree.storage.jsonl import JsonlSessionStorage  # noqa: E402
from sessiontree.storage.recorder import InMemorySessionStorage  # noqa: E402
from sessiontree.storage.storage import SessionStorage  # noqa: E402


@attrs.frozen
class StorageBackend:
    """How a backend makes a new session's storage and a second storage on the same session.

    ``create(place, **header)`` gets a fresh temporary folder (``place``) and the header
    fields of ``JsonlSessionStorage.create`` (``cwd``, ``metadata``, ``session_id``,
    ``parent_session``, ``timestamp``); ``reopen(storage)`` returns an independent storage
    of the same session, as another process would open it. ``close(place)`` (optional)
    runs after the test.
    """

    name: str
    create: Callable[..., SessionStorage]
    reopen: Callable[[SessionStorage], SessionStorage]
    marks: tuple[Any, ...] = ()
    close: Callable[[Path], None] | None = None


def _memory_create(place: Path, **header: Any) -> SessionStorage:
    return InMemorySessionStorage(**header)


def _memory_reopen(storage: SessionStorage) -> SessionStorage:
    assert isinstance(storage, InMemorySessionStorage)
    return InMemorySessionStorage.attach(storage.recorder, storage.session_id)  # type: ignore[arg-type]


def _jsonl_create(place: Path, **header: Any) -> SessionStorage:
    return JsonlSessionStorage.create(place / "sessions" / "session.jsonl", **header)


def _jsonl_reopen(storage: SessionStorage) -> SessionStorage:
    assert isinstance(storage, JsonlSessionStorage)
    return JsonlSessionStorage.open(storage.path)


def _minimal_create(place: Path, **header: Any) -> SessionStorage:
    return MinimalStorage.create(Lines(), **header)


def _minimal_reopen(storage: SessionStorage) -> SessionStorage:
    assert isinstance(storage, MinimalStorage)
    return MinimalStorage(storage.lines, storage.session_id)


# Add backends here (the database issue appends SQLite and PostgreSQL). "minimal" implements only the port's two
# abstract methods (sessiontree_minimal.py): what the contract asks of a backend is what the port builds on them.
STORAGE_BACKENDS: list[StorageBackend] = [
    StorageBackend("memory", _memory_create, _memory_reopen),
    StorageBackend("jsonl", _jsonl_create, _jsonl_reopen),
    StorageBackend("minimal", _minimal_create, _minimal_reopen),
]

import sessiontree_db_backends as _db  # noqa: E402  (tests/support; SQLite and PostgreSQL)

STORAGE_BACKENDS += [
    StorageBackend("sqlite", _db.sqlite_create, _db.reopen, close=_db.close),
    StorageBackend("postgres", _db.postgres_create, _db.reopen, (pytest.mark.postgres,), close=_db.close),
]


class StorageFactory:
    """Makes storages of one backend for one test, and closes them all afterwards."""

    def __init__(self, backend: StorageBackend, place: Path) -> None:
        self.backend = backend
        self.name = backend.name
        self._place = place
        self._count = 0
        self._opened: list[SessionStorage] = []

    def create(self, **header: Any) -> SessionStorage:
        """A new session (each call in its own folder, so they never collide)."""
        self._count += 1
        place = self._place / f"s{self._count}"
        place.mkdir()
        storage = self.backend.create(place, **header)
        self._opened.append(storage)
        return storage

    def reopen(self, storage: SessionStorage) -> SessionStorage:
        """A second, independent storage of the same session."""
        other = self.backend.reopen(storage)
        self._opened.append(other)
        return other

    def close(self) -> None:
        for storage in self._opened:
            storage.close()
        if self.backend.close is not None:
            self.backend.close(self._place)


def _out_of_line(backend: StorageBackend) -> StorageBackend:
    """``backend`` with every text and image of its sessions kept out of line (a blob threshold of 0 bytes)."""

    def outlined(storage: SessionStorage) -> SessionStorage:
        assert storage.blobs is not None
        storage.blobs.threshold = 0
        return storage

    return attrs.evolve(backend, name=f"{backend.name}+blobs", create=lambda place, **h: outlined(backend.create(place, **h)),
                        reopen=lambda storage: outlined(backend.reopen(storage)))


@pytest.fixture(params=[pytest.param(b, marks=b.marks, id=b.name)
                        for b in STORAGE_BACKENDS + [_out_of_line(b) for b in STORAGE_BACKENDS if b.name != "minimal"]])
def storage_factory(request: Any, tmp_path: Path) -> Iterator[StorageFactory]:
    """A :class:`StorageFactory` for each backend in ``STORAGE_BACKENDS``, and each again with its content out of line
    (not the minimal one: it has no blob store)."""
    factory = StorageFactory(request.param, tmp_path)
    try:
        yield factory
    finally:
        factory.close()


# -- repositories on every backend (test_repo.py, test_repo_fork.py) ------------------------------------------------

REPO_BACKENDS = ["memory", "jsonl", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres),
                 "memory+blobs", "jsonl+blobs", "sqlite+blobs", pytest.param("postgres+blobs", marks=pytest.mark.postgres)]


@pytest.fixture(params=REPO_BACKENDS)
def backend(request: Any) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def make_repo(backend: str, tmp_path: Path) -> Iterator[Any]:
    """Opens repositories of the test's backend (all on the same store) and closes them."""
    opened: list[SessionRepo] = []
    schema_cm = pg.temp_schema("repo") if backend.startswith("postgres") else None
    schema = schema_cm.__enter__() if schema_cm is not None else None
    memory: list[SessionRepo] = []

    kind, _, blobs = backend.partition("+")  # "+blobs": every text and image of its sessions kept out of line

    def make(**kwargs: Any) -> SessionRepo:
        kwargs.setdefault("clock", fixed_clock(kit.T0))
        if blobs:
            kwargs.setdefault("blob_threshold", 0)
        if kind == "memory":
            if not memory:
                memory.append(open_repo("memory:", **kwargs))
            return memory[0]
        url = {
            "jsonl": f"jsonl:{tmp_path / 'sessions'}",
            "sqlite": f"sqlite:{tmp_path / 'sessions.db'}",
            "postgres": pg.url(schema or ""),
        }[kind]
        repo = open_repo(url, **kwargs)
        opened.append(repo)
        return repo

    try:
        yield make
    finally:
        for repo in opened + memory:
            repo.close()
        if schema_cm is not None:
            schema_cm.__exit__(None, None, None)


@pytest.fixture
def repo(make_repo: Any) -> SessionRepo:
    return make_repo()  # type: ignore[no-any-return]


# -- repositories whose sessions get the time a test sets (test_prune*.py) -------------------------------------------


@pytest.fixture
def clock() -> Any:
    import sessiontree_prunekit as prunekit

    return prunekit.SetClock()


@pytest.fixture
def aged(make_repo: Any, clock: Any) -> SessionRepo:
    """A repository of the test's backend whose sessions get the time ``clock`` is set to."""
    return make_repo(clock=clock)  # type: ignore[no-any-return]
