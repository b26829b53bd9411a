"""Fault-injection and secure-default tests (docs/reliability.md); puts tests/support (and tests/cli, for the console
script's runner) on sys.path."""

import sys
from pathlib import Path

for _folder in ("support", "cli"):
    _path = str(Path(__file__).resolve().parents[1] / _folder)
    if _path not in sys.path:
        sys.path.insert(0, _path)
