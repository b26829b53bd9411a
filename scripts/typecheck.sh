#!/usr/bin/env bash
# mypy over the sessiontree package as it is installed: the layer folders (application/ is
# the package itself, domain/, projections/, the feature folders (wire/, storage/, pi/, audit/, content/, search/, retention/), cli/ and application/integrations/ its subpackages) are linked
# (and web/) into a temporary tree named like the package, so imports resolve as they do at run time.
set -euo pipefail
cd "$(dirname "$0")/.."
farm=$(mktemp -d)
trap 'rm -rf "$farm"' EXIT
mkdir "$farm/sessiontree"
for f in application/*.py; do ln -s "$PWD/$f" "$farm/sessiontree/"; done
for d in domain projections wire storage pi audit content search retention cli; do ln -s "$PWD/$d" "$farm/sessiontree/$d"; done
ln -s "$PWD/application/integrations" "$farm/sessiontree/integrations"
ln -s "$PWD/web" "$farm/sessiontree/web"
MYPYPATH="$farm" .venv/bin/python -m mypy -p sessiontree "$@"
