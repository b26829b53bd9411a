"""Redaction tests: the shared test kit on ``sys.path`` (see tests/adapters/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

_SUPPORT = str(Path(__file__).resolve().parents[1] / "support")
if _SUPPORT not in sys.path:
    sys.path.insert(0, _SUPPORT)
