"""Fault-injection and secure-default tests (docs/reliability.md); puts tests/support on sys.path."""

import sys
from pathlib import Path

_SUPPORT = str(Path(__file__).resolve().parents[1] / "support")
if _SUPPORT not in sys.path:
    sys.path.insert(0, _SUPPORT)
