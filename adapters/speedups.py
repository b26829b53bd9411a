"""The optional compiled parts of the hot paths (``adapters/_speedups.c``), and their switch.

``compiled`` is the extension module when it was built (``pip install`` builds it where a C
compiler is at hand) and the environment does not set ``SESSIONTREE_PURE_PYTHON``; else
None, and every caller takes its pure-Python path, which does the same (docs/architecture.md).
The tests run both.
"""

from __future__ import annotations

import os
from types import ModuleType

compiled: ModuleType | None
try:
    from sessiontree.adapters import _speedups as compiled
except ImportError:  # pragma: no cover - an install without a C compiler
    compiled = None
if os.environ.get("SESSIONTREE_PURE_PYTHON"):
    compiled = None

__all__ = ["compiled"]
