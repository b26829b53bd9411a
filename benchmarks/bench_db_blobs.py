"""What storing a database append's blobs in the transaction of its line costs: ``python benchmarks/bench_db_blobs.py
[--appends 40] [--rounds 5] [--size 1048576] [--same] [--postgres]``.

Each round runs two fresh processes, one per design, alternating which goes first; each appends ``--appends``
messages, each holding a distinct image of ``--size`` bytes (``--same``: one image, stored once, already there from
the second append on), to one session (SQLite file; with ``--postgres`` also a
fresh schema of the test server at 127.0.0.1:5432) and reports the p50 of one append in ms:

* ``joint``  -- the blobs inserted in the transaction of the line (``blob_tables.TableBlobs.insert_with``);
* ``before`` -- the design before it: the blobs put in their own transaction, the line inserted, the blobs put again
  (what a recorder without eventsourcing's hooks still does; selected here by making ``joins`` say no).

The table gives the median over the rounds of each design's p50.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid


def child(design: str, url: str, appends: int, size: int, same: bool) -> None:
    from sessiontree import ImageContent, TextContent, UserMessage, open_repo
    from sessiontree.content.blob_tables import TableBlobs

    if design == "before":
        TableBlobs.joins = lambda self, recorder: False  # type: ignore[method-assign]
    with open_repo(url) as repo:
        session = repo.create()
        image = _image(size)
        session.append_message(UserMessage([TextContent("warm up"), ImageContent(image, "image/png")]))
        times = []
        for n in range(appends):
            message = UserMessage([TextContent(f"step {n}"), ImageContent(image if same else _image(size), "image/png")])
            start = time.perf_counter()
            session.append_message(message)
            times.append((time.perf_counter() - start) * 1000)
    print(statistics.median(times))


def _image(size: int) -> str:
    return base64.b64encode(os.urandom(size)).decode("ascii")


def _run(design: str, url: str, args: argparse.Namespace) -> float:
    out = subprocess.run([sys.executable, __file__, "--child", design, url, str(args.appends), str(args.size),
                          "same" if args.same else "distinct"],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--same", action="store_true")
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        design, url, appends, size, same = args.child
        child(design, url, int(appends), int(size), same == "same")
        return
    backends = ["sqlite"] + (["postgres"] if args.postgres else [])
    results: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for r in range(args.rounds):
            for backend in backends:
                order = ["joint", "before"] if r % 2 == 0 else ["before", "joint"]
                for design in order:
                    schema = f"bench_{uuid.uuid4().hex[:10]}"
                    url = (f"postgresql://postgres@127.0.0.1:5432/test?schema={schema}" if backend == "postgres"
                           else f"sqlite:{scratch}/{r}-{design}.db")
                    try:
                        results.setdefault((backend, design), []).append(_run(design, url, args))
                    finally:
                        if backend == "postgres":
                            _drop(schema)
    what = "the same image" if args.same else "distinct images"
    print(f"| backend | joint p50 ms | before p50 ms | joint/before |  ({args.appends} appends of {what}, {args.size} B, "
          f"{args.rounds} rounds)")
    print("|---|---|---|---|")
    for backend in backends:
        joint, before = (statistics.median(results[backend, d]) for d in ("joint", "before"))
        print(f"| {backend} | {joint:.2f} | {before:.2f} | {joint / before:.2f} |")


def _drop(schema: str) -> None:
    import psycopg
    from psycopg.sql import SQL, Identifier

    with psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname="test", autocommit=True) as conn:
        conn.execute(SQL("DROP SCHEMA IF EXISTS {0} CASCADE").format(Identifier(schema)))


if __name__ == "__main__":
    main()
