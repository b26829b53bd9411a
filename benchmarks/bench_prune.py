"""What pruning costs: ``python benchmarks/bench_prune.py [--sessions 1000] [--entries 20] [--repeat 3]``.

For JSONL and SQLite (and PostgreSQL with ``--postgres URL``) it writes ``--sessions`` old sessions, then times, per
session (milliseconds, best of ``--repeat``):

* ``delete``   -- the baseline, in the same run: ``repo.delete(id)`` for each listed session (no plan, no checks);
* ``plan``     -- ``repo.prune(..., dry_run=True)``: the listing plus one read of every old session;
* ``prune``    -- planning and deleting (each deletion checked against the plan);
* ``archive``  -- planning, writing each archive (gzip, fsynced) and deleting.

The ratio column is each against ``delete``. The archive column gives archive bytes per log byte.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sessiontree import AssistantMessage, TextContent, UserMessage, open_repo

OLD = datetime(2025, 1, 1, tzinfo=UTC)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def fill(url: str, sessions: int, entries: int) -> None:
    with open_repo(url, clock=lambda: OLD) as repo:
        for n in range(sessions):
            session = repo.create(cwd="/bench")
            for i in range(entries // 2):
                session.append_message(UserMessage(content=f"question {n}.{i} " * 10, timestamp=0))
                session.append_message(AssistantMessage(content=[TextContent(text="an answer " * 30)], provider="p",
                                                        model="m", timestamp=0))
            session.close()


def timed(url_of: Callable[[], str], args: argparse.Namespace, work: Callable[[Any, Path], None]) -> float:
    """Best per-session milliseconds of ``work(repo, scratch)`` on freshly filled repositories."""
    best = float("inf")
    for _ in range(args.repeat):
        url = url_of()
        fill(url, args.sessions, args.entries)
        with open_repo(url) as repo, tempfile.TemporaryDirectory() as scratch:
            start = time.perf_counter()
            work(repo, Path(scratch))
            best = min(best, (time.perf_counter() - start) * 1000 / args.sessions)
    return best


def row(name: str, url_of: Callable[[], str], args: argparse.Namespace) -> list[str]:
    ratio: dict[str, Any] = {}

    def delete(repo: Any, _: Path) -> None:
        for info in repo.list():
            repo.delete(info.id)

    def archive(repo: Any, scratch: Path) -> None:
        result = repo.prune("90d", archive=scratch / "a", now=NOW)
        ratio["bytes"] = sum(f.stat().st_size for f in (scratch / "a").iterdir()) / result.bytes

    base = timed(url_of, args, delete)
    plan = timed(url_of, args, lambda repo, _: repo.prune("90d", dry_run=True, now=NOW))
    prune = timed(url_of, args, lambda repo, _: repo.prune("90d", now=NOW))
    arch = timed(url_of, args, archive)
    cells = [f"{v:.2f} ({v / base:.1f}x)" for v in (plan, prune, arch)]
    return [name, f"{base:.2f}", *cells, f"{ratio['bytes']:.2f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--postgres", metavar="URL", help="also PostgreSQL (a private schema per run, left behind)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-prune-"))
    backends: list[tuple[str, Callable[[], str]]] = [
        ("jsonl", lambda: str(root / uuid.uuid4().hex)),
        ("sqlite", lambda: f"sqlite:///{root / uuid.uuid4().hex}.db"),
    ]
    if args.postgres:
        sep = "&" if "?" in args.postgres else "?"
        backends.append(("postgres", lambda: f"{args.postgres}{sep}schema=bp_{uuid.uuid4().hex[:12]}"))
    print(f"{args.sessions} sessions of {args.entries} entries; ms per session, best of {args.repeat} (pid {os.getpid()})")
    print("| backend | delete (baseline) | plan (dry run) | prune | archive + prune | archive bytes / log bytes |")
    print("|---|---|---|---|---|---|")
    try:
        for name, url_of in backends:
            print("| " + " | ".join(row(name, url_of, args)) + " |", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
