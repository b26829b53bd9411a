"""PostgreSQL at scale against a raw insert floor: ``python benchmarks/bench_postgres.py``.

Everything runs in one fresh schema of the server (``--url``, default the test database), dropped at the end:

* the **raw floor**: psycopg ``INSERT`` of a 300-byte row plus ``COMMIT``, one connection per writer;
* **sessiontree**: ``Session.append_message`` of a ~300-byte user message, one session per writer, through one
  repository per process (threads share it, with a pool as large as the writers; processes get one connection each);
* 1, 20 and 50 writers at once, as threads and as processes: throughput, p50 and p99 of one append;
* **large repositories**: ``--sessions`` sessions (default 100,000; 4 lines each) written in bulk, then ``list``
  of the newest 50 (a new repository object, as a new process; then the same again), and ``open`` of one session of
  1,000 entries (through ``repo.open``, the log read and decoded).

Ratios are against the floor measured in the same run; the machine is shared, so run it several times.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import orjson
import psycopg

from sessiontree import InMemorySessionRepo, TextContent, UserMessage, open_repo

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
PAYLOAD = b"x" * 300
TEXT = "y" * 180  # with the entry's ids, timestamps and chain digest: a line of about 300 bytes


def connect(url: str) -> psycopg.Connection[Any]:
    parts = urlsplit(url)
    return psycopg.connect(host=parts.hostname, port=parts.port or 5432, user=parts.username or "postgres",
                           password=parts.password, dbname=parts.path.lstrip("/"))


def repo_url(url: str, schema: str, pool: int, overflow: int = 2) -> str:
    return f"{url}?schema={schema}&pool_size={pool}&max_overflow={overflow}"


# --- one writer's loop, for both sides --------------------------------------------------------------------------


def raw_writer(url: str, schema: str, writer: int, count: int, start: Any) -> list[float]:
    conn = connect(url)
    conn.execute(f"SET search_path TO {schema}")
    conn.commit()
    start.wait()
    out = []
    for _ in range(count):
        t0 = time.perf_counter()
        conn.execute("INSERT INTO raw_floor (writer, payload) VALUES (%s, %s)", (writer, PAYLOAD))
        conn.commit()
        out.append(time.perf_counter() - t0)
    conn.close()
    return out


def session_writer(repo: Any, count: int, start: Any) -> list[float]:
    session = repo.create(cwd="/bench")
    start.wait()
    out = []
    for i in range(count):
        t0 = time.perf_counter()
        session.append_message(UserMessage(content=[TextContent(text=TEXT)], timestamp=i))
        out.append(time.perf_counter() - t0)
    return out


def _in_process(kind: str, url: str, schema: str, writer: int, count: int, start: Any, results: Any) -> None:
    try:
        if kind == "raw":
            results.put(raw_writer(url, schema, writer, count, start))
            return
        repo = open_repo(repo_url(url, schema, 1, 0))
        try:
            results.put(session_writer(repo, count, start))
        finally:
            repo.close()
    except BaseException as exc:  # e.g. the server's max_connections: the parent stops with it, not waits forever
        start.abort()
        results.put(f"writer {writer}: {exc!r}")


def run_threads(kind: str, url: str, schema: str, writers: int, count: int) -> tuple[float, list[float]]:
    start = threading.Barrier(writers + 1, timeout=120)
    repo = open_repo(repo_url(url, schema, writers)) if kind == "st" else None
    with ThreadPoolExecutor(writers) as pool:
        if repo is None:
            futures = [pool.submit(raw_writer, url, schema, w, count, start) for w in range(writers)]
        else:
            futures = [pool.submit(session_writer, repo, count, start) for _ in range(writers)]
        start.wait()
        t0 = time.perf_counter()
        latencies = [x for f in futures for x in f.result()]
        wall = time.perf_counter() - t0
    if repo is not None:
        repo.close()
    return wall, latencies


def run_processes(kind: str, url: str, schema: str, writers: int, count: int) -> tuple[float, list[float]]:
    ctx = mp.get_context("fork")
    start, results = ctx.Barrier(writers + 1, timeout=120), ctx.Queue()
    procs = [ctx.Process(target=_in_process, args=(kind, url, schema, w, count, start, results)) for w in range(writers)]
    for p in procs:
        p.start()
    try:
        start.wait()
    except threading.BrokenBarrierError:
        errors = [results.get(timeout=60) for _ in range(writers)]
        first = next((e for e in errors if "BrokenBarrier" not in str(e)), errors[0])
        raise SystemExit(f"a writer could not start: {first}") from None
    t0 = time.perf_counter()
    latencies = []
    for _ in procs:
        got = results.get(timeout=600)
        if isinstance(got, str):
            raise SystemExit(got)
        latencies += got
    wall = time.perf_counter() - t0
    for p in procs:
        p.join()
    return wall, latencies


# --- large repositories -----------------------------------------------------------------------------------------


def session_lines(count: int, entries: int) -> list[list[bytes]]:
    """``count`` real sessions of ``entries`` entries (after the header), as their stored lines."""
    scratch = InMemorySessionRepo()
    out = []
    for i in range(count):
        session = scratch.create(cwd=f"/home/me/p{i % 50}", name=f"session {i}" if i % 3 == 0 else None)
        while len(session.get_entries()) < entries:
            session.append_message(UserMessage(content=[TextContent(text=f"question {i} " + TEXT[:60])], timestamp=i))
        out.append(session.storage.read_lines())
        scratch.delete(session.id)
    return out


def write_bulk(repo: Any, sessions: int) -> float:
    """Write ``sessions`` copies of one real 4-line session, each under a new id, 8 threads at a time (the bulk path
    a migration takes: ``store_lines``, one transaction per session)."""
    template = session_lines(1, 3)[0]
    t0 = time.perf_counter()

    def write(_: int) -> None:
        sid = str(uuid.uuid4())
        repo.store.store_lines(sid, [_retag(template[0], sid), *template[1:]])

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(sessions), chunksize=256))
    return time.perf_counter() - t0


def _sid(header: bytes) -> str:
    return str(orjson.loads(header)["id"])


def _retag(header: bytes, sid: str) -> bytes:
    data = orjson.loads(header)
    data["id"] = sid
    return orjson.dumps(data)


def list_newest(repo: Any, limit: int) -> Sequence[Any]:
    try:
        return list(repo.list(limit=limit))
    except TypeError:  # a sessiontree before pagination
        return repo.list()[:limit]


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def large(url: str, schema: str, sessions: int, repeat: int) -> dict[str, float]:
    big_url = repo_url(url, schema + "_big", 8)
    repo = open_repo(big_url)
    got: dict[str, float] = {}
    try:
        got["write"] = write_bulk(repo, sessions)
        [big] = session_lines(1, 1000)
        big_id = _sid(big[0])
        repo.store.store_lines(big_id, big)
        got["list cold"] = timed(lambda: list_newest(repo, 50), 1)[0]
        fresh = []
        for _ in range(repeat):
            other = open_repo(repo_url(url, schema + "_big", 1))
            fresh += timed(lambda: list_newest(other, 50), 1)  # noqa: B023 - called at once
            other.close()
        got["list fresh"] = statistics.median(fresh)
        got["list hot"] = statistics.median(timed(lambda: list_newest(repo, 50), repeat))
        got["open"] = statistics.median(timed(lambda: repo.open(big_id).leaf_id, repeat))
    finally:
        repo.close()
    return got


# --- the table ----------------------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=PG_DEFAULT, help="PostgreSQL URL without query (default: %(default)s)")
    ap.add_argument("--sessions", type=int, default=100_000, help="sessions in the large repository (0: skip it)")
    ap.add_argument("--appends", type=int, default=200, help="appends per writer (default %(default)s)")
    ap.add_argument("--writers", default="1,20,50", help="concurrent writers to try (default %(default)s)")
    ap.add_argument("--no-processes", action="store_true", help="threads only")
    ap.add_argument("--repeat", type=int, default=5, help="repeats of the list and open timings")
    args = ap.parse_args(argv)
    schema = f"bench_pg_{uuid.uuid4().hex[:10]}"
    with connect(args.url) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"CREATE TABLE {schema}.raw_floor (id bigserial PRIMARY KEY, writer int, payload bytea)")
    rows: list[tuple[str, str, str, str]] = []
    try:
        rows += concurrency(args, schema)
        if args.sessions:
            rows += large_rows(args, schema)
    finally:
        with connect(args.url) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            conn.execute(f"DROP SCHEMA IF EXISTS {schema}_big CASCADE")
    print("| case | sessiontree | raw floor | ratio |")
    print("|---|---:|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


def concurrency(args: argparse.Namespace, schema: str) -> list[tuple[str, str, str, str]]:
    rows = []
    modes = [("threads", run_threads)] + ([] if args.no_processes else [("processes", run_processes)])
    for writers in (int(w) for w in args.writers.split(",")):
        for mode, run in modes:
            if writers == 1 and mode == "processes":
                continue
            count = args.appends if writers > 1 else args.appends * 3
            raw_wall, raw = run("raw", args.url, schema, writers, count)
            st_wall, st = run("st", args.url, schema, writers, count)
            label = "one session" if writers == 1 else f"{writers} sessions, {mode}"
            raw_tp, st_tp = len(raw) / raw_wall, len(st) / st_wall
            rows.append((f"{label}: throughput /s", f"{st_tp:,.0f}", f"{raw_tp:,.0f}", f"{st_tp / raw_tp:.2f}x"))
            for name, q in (("p50", 0.5), ("p99", 0.99)):
                a, b = pct(st, q) * 1000, pct(raw, q) * 1000
                rows.append((f"{label}: append {name} ms", f"{a:.2f}", f"{b:.2f}", f"{a / b:.2f}x"))
            print(f"{label}: done", file=sys.stderr, flush=True)
    return rows


def large_rows(args: argparse.Namespace, schema: str) -> list[tuple[str, str, str, str]]:
    got = large(args.url, schema, args.sessions, args.repeat)
    n = f"{args.sessions:,}"
    return [
        (f"write {n} sessions (4 lines each), s", f"{got['write']:.1f} ({args.sessions / got['write']:,.0f}/s)", "", ""),
        (f"list newest 50 of {n}, first call ms", f"{got['list cold'] * 1000:.1f}", "", ""),
        (f"list newest 50 of {n}, new repository ms", f"{got['list fresh'] * 1000:.1f}", "", "target <= 50"),
        (f"list newest 50 of {n}, again ms", f"{got['list hot'] * 1000:.1f}", "", ""),
        ("open a 1,000-entry session ms", f"{got['open'] * 1000:.1f}", "", "target <= 30"),
    ]


if __name__ == "__main__":
    sys.exit(main())
