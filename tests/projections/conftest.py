"""Puts tests/support on sys.path so these tests can import the shared test kit.

With ``--import-mode=importlib`` and no ``tests/__init__.py`` there is no package to
import helpers from; ``tests/support`` holds plain, uniquely named modules instead.
"""

import sys
from pathlib import Path

_SUPPORT = str(Path(__file__).resolve().parents[1] / "support")
if _SUPPORT not in sys.path:
    sys.path.insert(0, _SUPPORT)
