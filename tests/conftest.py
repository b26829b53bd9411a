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
