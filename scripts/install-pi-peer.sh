#!/usr/bin/env bash
# Copy the pi peer harness (../shared/tools/pi-peer, read-only) to a writable place and
# install both pi builds it drives. Tests find it through $SESSIONTREE_PI_PEER or the
# default location below.
set -euo pipefail
cd "$(dirname "$0")/.."
src=../shared/tools/pi-peer
dest=${SESSIONTREE_PI_PEER:-${TMPDIR:-/tmp}/sessiontree-pi-peer}
if [ -f "$dest/node_modules/@mariozechner/pi-coding-agent/package.json" ] \
   && [ -f "$dest/latest/node_modules/@earendil-works/pi-coding-agent/package.json" ]; then
    exit 0
fi
rm -rf "$dest" && mkdir -p "$dest"
cp -r "$src"/. "$dest"/
chmod -R u+w "$dest"
(cd "$dest" && npm ci --no-audit --no-fund --loglevel=error)
(cd "$dest/latest" && npm ci --no-audit --no-fund --loglevel=error)
echo "pi peer harness installed in $dest"
