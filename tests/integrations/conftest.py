"""Fixtures of the pydantic-ai store's conformance tests: ``repo`` (a repository of every backend) and ``store`` (the
store on it). The Agents SDK's conformance module defines its own ``store``, which takes precedence there."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

for _folder in (Path(__file__).resolve().parent, Path(__file__).resolve().parents[1] / "support"):  # the kits
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

import sessiontree_pg as pg  # noqa: E402

from sessiontree import open_repo  # noqa: E402
from sessiontree.integrations.pydantic_ai import SessionTreeConversationStore  # noqa: E402
from sessiontree.repository import SessionRepo  # noqa: E402

BACKENDS = ["jsonl", "memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def repo(request: Any, tmp_path: Path) -> Iterator[SessionRepo]:
    if request.param == "postgres":
        with pg.temp_schema("pyai") as schema:
            repo = open_repo(pg.url(schema))
            yield repo
            repo.close()
        return
    url = {"jsonl": str(tmp_path / "sessions"), "memory": "memory:", "sqlite": f"sqlite:///{tmp_path / 's.db'}"}
    repo = open_repo(url[request.param])
    yield repo
    repo.close()


@pytest.fixture
def store(repo: SessionRepo) -> SessionTreeConversationStore:
    return SessionTreeConversationStore(repo)
