"""Fixtures for every test: the user's cache directory is a temporary one.

sessiontree keeps the listing index of a folder that is not its own (pi's) in
``$XDG_CACHE_HOME/sessiontree/indexes``; no test may write into the real one. Child
processes (the console script) inherit the variable.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
        yield


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--properties-only", action="store_true",
        help="run only the hypothesis property tests (scripts/test.sh runs them again with every text and image kept "
             "out of line: SESSIONTREE_BLOB_THRESHOLD=0)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--properties-only"):
        return
    kept = [item for item in items if getattr(getattr(item, "obj", None), "is_hypothesis_test", False)]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept
