#!/usr/bin/env bash
# The whole test suite from a fresh checkout: a virtual environment with sessiontree and its
# test extras, the local PostgreSQL server, the pi peer harness (when node is present), then
# pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
bash scripts/ensure-postgres.sh
if command -v node >/dev/null 2>&1 && [ -d ../shared/tools/pi-peer ]; then
    bash scripts/install-pi-peer.sh
fi
exec .venv/bin/python -m pytest "$@"
