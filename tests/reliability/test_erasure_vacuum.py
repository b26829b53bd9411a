"""PostgreSQL keeps an erased row's old version in its files until the table is rewritten: ``sessiontree redact
--vacuum`` rewrites them (VACUUM FULL), after which no file of the database holds the erased bytes. The server's WAL
is not rewritten, as docs/audit.md says (issue 32, item 1)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import sessiontree_pg as pg
from sessiontree_cli_runner import run

from sessiontree import UserMessage, open_repo

SECRET = "ocelotharbour3310"


def _server_files() -> Path:
    import psycopg

    with psycopg.connect(host=pg.HOST, port=pg.PORT, user=pg.USER, dbname=pg.DBNAME, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # what the server holds in memory, written to its files
        data = conn.execute("SHOW data_directory").fetchone()[0]  # type: ignore[index]
        oid = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()[0]  # type: ignore[index]
    folder = Path(data) / "base" / str(oid)
    if not os.access(folder, os.R_OK | os.X_OK):
        pytest.skip(f"the server's files ({folder}) cannot be read here (the test reads them as root)")
    return folder


def _holders(folder: Path) -> list[str]:
    found = []
    for path in folder.iterdir():
        try:
            if path.is_file() and SECRET.encode() in path.read_bytes():
                found.append(path.name)
        except OSError:
            continue
    return found


def test_redact_vacuum_leaves_no_old_row_version_in_the_database_files(tmp_path: Path) -> None:
    """After an erasure the old row version is still in the table's file (the limit audit.md states); ``redact
    --vacuum`` rewrites the tables and then no file of the database holds the erased bytes."""
    with pg.temp_schema("vacuum") as schema:
        url = pg.url(schema)
        with open_repo(url) as repo:
            session = repo.create(cwd="/w")
            entry = session.append_message(UserMessage(content=f"the word is {SECRET}", timestamp=0))
            sid = session.id
            session.redact(entry, reason="a secret")
            assert SECRET not in str(repo.list())
            session.close()
        assert _holders(_server_files()), "the old row version was expected on the disk before VACUUM"
        done = run(("redact", sid, entry, "--reason", "a secret", "--vacuum", "--json", "--repo", url), tmp_path)
        assert "VACUUM FULL" in json.loads(done.stdout)["vacuum"]
        assert _holders(_server_files()) == []
