"""The PostgreSQL server the tests use for real: 127.0.0.1:5432, user postgres, database test.

Loaded like ``sessiontree_testkit`` (a plain module on ``sys.path``). Every test that
needs the server takes a fresh schema from :func:`temp_schema` and drops it afterwards.
When the server cannot be reached, :func:`require_postgres` fails the test under CI
(``CI=true``: ``.ci/run`` starts the server, so absence is a broken setup) and skips it
elsewhere.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

HOST, PORT, USER, DBNAME = "127.0.0.1", 5432, "postgres", "test"
_REACHABLE: bool | None = None


def reachable() -> bool:
    """Can the test database be reached? (asked once per test run)"""
    global _REACHABLE
    if _REACHABLE is None:
        try:
            import psycopg

            with psycopg.connect(host=HOST, port=PORT, user=USER, dbname=DBNAME, connect_timeout=5):
                _REACHABLE = True
        except Exception:
            _REACHABLE = False
    return _REACHABLE


def require_postgres() -> None:
    if reachable():
        return
    message = f"PostgreSQL is not reachable at {HOST}:{PORT} (database {DBNAME}, user {USER})"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message + "; .ci/run should have started it")
    pytest.skip(message)


def url(schema: str) -> str:
    return f"postgresql://{USER}@{HOST}:{PORT}/{DBNAME}?schema={schema}"


def drop_schema(schema: str) -> None:
    import psycopg
    from psycopg.sql import SQL, Identifier

    with psycopg.connect(host=HOST, port=PORT, user=USER, dbname=DBNAME, autocommit=True) as conn:
        conn.execute(SQL("DROP SCHEMA IF EXISTS {0} CASCADE").format(Identifier(schema)))


@contextmanager
def temp_schema(prefix: str = "st") -> Iterator[str]:
    """A schema name no other test uses; the schema (if created) is dropped afterwards."""
    require_postgres()
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        yield schema
    finally:
        drop_schema(schema)
