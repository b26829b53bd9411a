#!/usr/bin/env bash
# Make sure the local PostgreSQL server (127.0.0.1:5432, database `test`) is up.
# Tests marked `postgres` need it; on machines without PostgreSQL this prints a note.
set -uo pipefail
if ! command -v pg_isready >/dev/null 2>&1; then
    echo "note: PostgreSQL client tools not found; postgres tests will report it" >&2
    exit 0
fi
pg_isready -h 127.0.0.1 -p 5432 -q && exit 0
if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
else
    service postgresql start || true
fi
for _ in $(seq 1 30); do
    pg_isready -h 127.0.0.1 -p 5432 -q && exit 0
    sleep 1
done
echo "warning: PostgreSQL did not come up on 127.0.0.1:5432" >&2
