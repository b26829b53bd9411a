"""How fast ``repo.list()`` is as sessions pile up: ``python benchmarks/bench_list.py``.

For each size (default 1,000 and 10,000 sessions of ``--entries`` entries each) it writes
the sessions once into a JSONL directory (through ``JsonlSessionRepo``), copies them into
SQLite and, when the server is reachable, PostgreSQL (``--postgres URL``, default the test
database, a private schema dropped afterwards), and times ``list()``:

* ``cold``  -- no index yet: every log is folded once (the index is written);
* ``fresh`` -- a new repository object (as a new process would): the index file or view is
  read and every log is checked (JSONL: one ``stat`` per file);
* ``hot``   -- the same object again, nothing changed;
* ``grow``  -- after 1% of the sessions got one more entry (only that is read).

pi's own listing (``SessionManager.list``, which reads every file completely) runs on the
same files when the pi peer harness is installed (``$SESSIONTREE_PI_PEER``, default
``${TMPDIR:-/tmp}/sessiontree-pi-peer``; ``scripts/install-pi-peer.sh``), with both pi
builds. Numbers are milliseconds (best of ``--repeat``); a table is printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sessiontree import AssistantMessage, TextContent, UserMessage, open_repo
from sessiontree.repository import SessionRepo
from sessiontree.storage.jsonl_repo import INDEX_FILE

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"


def pi_peer_home() -> Path | None:
    home = Path(os.environ.get("SESSIONTREE_PI_PEER") or Path(tempfile.gettempdir()) / "sessiontree-pi-peer")
    if (home / "pi-peer.mjs").is_file() and (home / "node_modules").is_dir() and shutil.which("node"):
        return home
    return None


def write_sessions(repo: SessionRepo, count: int, entries: int) -> list[str]:
    ids = []
    for i in range(count):
        session = repo.create(cwd="/home/me/project", name=f"session {i}" if i % 3 == 0 else None)
        for turn in range(max(0, entries // 2)):
            session.append_message(UserMessage(content=[TextContent(text=f"question {i}.{turn}")], timestamp=0))
            session.append_message(
                AssistantMessage(
                    content=[TextContent(text=f"answer {i}.{turn} " + "x" * 200)],
                    provider="bench",
                    model="m",
                    timestamp=0,
                )
            )
        ids.append(session.id)
        session.close()
    return ids


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1000)
    return min(times), result


def measure(make: Callable[[], SessionRepo], ids: list[str], repeat: int, reset: Callable[[], None]) -> dict[str, float]:
    """cold / fresh / hot / grow timings of list() on one backend."""
    out: dict[str, float] = {}
    cold_times = []
    for _ in range(repeat):
        reset()
        repo = make()
        start = time.perf_counter()
        listed = repo.list()
        cold_times.append((time.perf_counter() - start) * 1000)
        assert len(listed) == len(ids), (len(listed), len(ids))
        repo.close()
    out["cold"] = min(cold_times)
    fresh_times = []
    for _ in range(repeat):
        repo = make()
        start = time.perf_counter()
        repo.list()
        fresh_times.append((time.perf_counter() - start) * 1000)
        repo.close()
    out["fresh"] = min(fresh_times)
    repo = make()
    repo.list()
    out["hot"], _ = best(repo.list, repeat)
    grow_times = []
    for r in range(repeat):
        for sid in ids[r :: 100]:
            session = repo.open(sid)
            session.append_message(UserMessage(content=f"one more {r}", timestamp=0))
            session.close()
        start = time.perf_counter()
        repo.list()
        grow_times.append((time.perf_counter() - start) * 1000)
    out["grow"] = min(grow_times)
    repo.close()
    return out


def pi_list(home: Path, directory: Path, pkg: str) -> float | None:
    cmd = ["node", "pi-peer.mjs", "list", str(directory), "--in-place"]
    if pkg != "legacy":
        cmd += ["--pkg", pkg]
    done = subprocess.run(cmd, cwd=home, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"  pi ({pkg}) failed: {done.stderr.strip()[:200]}", file=sys.stderr)
        return None
    return float(json.loads(done.stdout)["listMs"])


def drop_schema(url: str, schema: str) -> None:
    from urllib.parse import urlsplit

    import psycopg
    from psycopg.sql import SQL, Identifier

    parts = urlsplit(url)
    with psycopg.connect(
        host=parts.hostname, port=parts.port or 5432, user=parts.username, dbname=parts.path.lstrip("/"), autocommit=True
    ) as conn:
        conn.execute(SQL("DROP SCHEMA IF EXISTS {0} CASCADE").format(Identifier(schema)))


def run_size(count: int, args: argparse.Namespace, work: Path) -> list[tuple[str, dict[str, float | None]]]:
    rows: list[tuple[str, dict[str, float | None]]] = []
    directory = work / f"jsonl-{count}"
    print(f"writing {count} sessions of {args.entries} entries ...", file=sys.stderr, flush=True)
    source = open_repo(directory)
    ids = write_sessions(source, count, args.entries)

    # pi first, while the files are untouched by our benchmark's appends.
    home = pi_peer_home()
    pi_times: dict[str, float | None] = {}
    if home is not None:
        for pkg in ("legacy", "latest"):
            runs = [pi_list(home, directory, pkg) for _ in range(args.repeat)]
            ok = [r for r in runs if r is not None]
            pi_times[pkg] = min(ok) if ok else None

    def reset_jsonl() -> None:
        (directory / INDEX_FILE).unlink(missing_ok=True)

    print("timing JSONL ...", file=sys.stderr, flush=True)
    rows.append(("jsonl", measure(lambda: open_repo(directory), ids, args.repeat, reset_jsonl)))  # type: ignore[arg-type]

    db_path = work / f"sessions-{count}.db"
    sqlite = open_repo(f"sqlite:{db_path}")
    print("copying into SQLite ...", file=sys.stderr, flush=True)
    for sid in ids:
        sqlite.copy_from(source, sid).close()
    sqlite.close()

    def reset_sqlite() -> None:
        import sqlite3

        with sqlite3.connect(db_path) as conn:
            conn.execute("DELETE FROM session_index")
            conn.execute("DELETE FROM tracking WHERE application_name = 'sessiontree'")

    print("timing SQLite ...", file=sys.stderr, flush=True)
    rows.append(("sqlite", measure(lambda: open_repo(f"sqlite:{db_path}"), ids, args.repeat, reset_sqlite)))

    if args.postgres:
        schema = f"bench_{uuid.uuid4().hex[:10]}"
        url = f"{args.postgres}?schema={schema}"
        try:
            pg = open_repo(url)
        except Exception as exc:  # the server is optional here
            print(f"  PostgreSQL skipped: {exc}", file=sys.stderr)
        else:
            try:
                print("copying into PostgreSQL ...", file=sys.stderr, flush=True)
                for sid in ids:
                    pg.copy_from(source, sid).close()

                def reset_pg() -> None:
                    view: Any = pg.view  # type: ignore[attr-defined]
                    with view.datastore.transaction(commit=True) as curs:
                        curs.execute(f'DELETE FROM "{schema}".sessiontree_sessions')
                        curs.execute(f"DELETE FROM \"{schema}\".sessiontree_tracking WHERE application_name = 'sessiontree'")

                print("timing PostgreSQL ...", file=sys.stderr, flush=True)
                rows.append(("postgres", measure(lambda: open_repo(url), ids, args.repeat, reset_pg)))
            finally:
                pg.close()
                drop_schema(args.postgres, schema)
    for pkg, ms in pi_times.items():
        rows.append((f"pi {pkg}", {"cold": ms, "fresh": ms, "hot": ms, "grow": None}))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--entries", type=int, default=10, help="entries per session (default 10)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--postgres", default=PG_DEFAULT, help="server URL without schema ('' to skip)")
    parser.add_argument("--keep", type=Path, help="keep the generated files here")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="sessiontree-bench-list-"))
    work.mkdir(parents=True, exist_ok=True)
    table: list[tuple[int, str, dict[str, float | None]]] = []
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            for name, times in run_size(size, args, work):
                table.append((size, name, times))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    print(f"\nlist() in ms, best of {args.repeat}; {args.entries} entries per session")
    print(f"{'sessions':>8}  {'backend':<10} {'cold':>9} {'fresh':>9} {'hot':>9} {'grow 1%':>9}")
    for size, name, t in table:
        print(f"{size:>8}  {name:<10} {cell(t['cold']):>9} {cell(t['fresh']):>9} {cell(t['hot']):>9} {cell(t['grow']):>9}")
    print("(pi reads every file on every list: its one number is in each column it applies to)")


if __name__ == "__main__":
    main()
