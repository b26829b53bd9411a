"""The optional compiled parts of the hot paths, and their switch.

``compiled`` is ``adapters/_speedups.c`` (the encoders and the JSONL append) when it was
built (``pip install`` builds it where a C compiler is at hand), ``chainseal`` is
``adapters/_chainseal.c`` (chain.seal with OpenSSL's SHA-256, built where OpenSSL's headers
are too). Either is None when it was not built or the environment sets
``SESSIONTREE_PURE_PYTHON`` (to anything but empty, 0, false or no); every caller then
takes its pure-Python path, which does the same (docs/architecture.md). The tests run both.
"""

from __future__ import annotations

import os
from types import ModuleType

compiled: ModuleType | None
chainseal: ModuleType | None
try:
    from sessiontree.adapters import _speedups as compiled
except ImportError:  # pragma: no cover - an install without a C compiler
    compiled = None
try:
    from sessiontree.adapters import _chainseal as chainseal
except ImportError:  # pragma: no cover - an install without a C compiler or OpenSSL's headers
    chainseal = None
if os.environ.get("SESSIONTREE_PURE_PYTHON", "").strip().lower() not in ("", "0", "false", "no"):
    compiled = chainseal = None

__all__ = ["chainseal", "compiled"]
