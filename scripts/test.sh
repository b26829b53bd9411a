#!/usr/bin/env bash
# The whole test suite from a fresh checkout: a virtual environment with sessiontree and its
# test extras, the local PostgreSQL server, Debian's chromium (as root, when it is missing; the web
# viewer's browser tests), the pi peer harness (when node is present), the linter and the type
# checker, then pytest, then the property tests once more with content out of line. Extra arguments go to pytest
# (and skip the checks).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
bash scripts/ensure-postgres.sh
# The web viewer's browser tests drive Debian's chromium through playwright (never a downloaded browser).
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "== installing chromium for the browser tests"
    { apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; } \
        || echo "could not install chromium: the browser tests will skip (and fail under CI=true)"
fi
if command -v node >/dev/null 2>&1 && [ -d ../shared/tools/pi-peer ]; then
    bash scripts/install-pi-peer.sh
fi
if [ $# -gt 0 ]; then
    exec .venv/bin/python -m pytest "$@"
fi
echo "== ruff check"
.venv/bin/python -m ruff check .
echo "== mypy (scripts/typecheck.sh)"
bash scripts/typecheck.sh
.venv/bin/python -m pytest
echo "== the property tests again, every text and image kept out of line (docs/file-format.md)"
SESSIONTREE_BLOB_THRESHOLD=0 exec .venv/bin/python -m pytest -q --properties-only
