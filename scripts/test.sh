#!/usr/bin/env bash
# The whole test suite from a fresh checkout: a virtual environment with sessiontree and its
# test extras, the local PostgreSQL server, the pi peer harness (when node is present), then
# pytest; then the adapter tests again with the compiled parts switched off. Extra
# arguments go to pytest (and skip the second pass).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
bash scripts/ensure-postgres.sh
if command -v node >/dev/null 2>&1 && [ -d ../shared/tools/pi-peer ]; then
    bash scripts/install-pi-peer.sh
fi
if [ $# -gt 0 ]; then
    exec .venv/bin/python -m pytest "$@"
fi
.venv/bin/python -m pytest
# The storage and codec tests once more without the optional compiled parts (the paths an
# install without a C compiler takes; adapters/speedups.py): about a minute.
echo "== again in pure Python (SESSIONTREE_PURE_PYTHON=1): tests/adapters"
SESSIONTREE_PURE_PYTHON=1 exec .venv/bin/python -m pytest -q tests/adapters
