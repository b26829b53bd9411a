"""Fixtures for the wire tests: the shared test kit on ``sys.path`` and the backends' fixtures
(``storage_factory``, ``make_repo``, ``repo``, ``clock``, ...) of tests/support/sessiontree_fixtures.py."""

from __future__ import annotations

import sys
from pathlib import Path

_SUPPORT = str(Path(__file__).resolve().parents[1] / "support")
if _SUPPORT not in sys.path:
    sys.path.insert(0, _SUPPORT)

from sessiontree_fixtures import *  # noqa: E402, F403
