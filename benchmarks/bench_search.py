"""How fast search across sessions is: ``python benchmarks/bench_search.py [--sessions 10000]``.

Writes ``--sessions`` sessions of ``--entries`` entries (user and assistant turns of about 30 words drawn from a
seeded vocabulary, every session one rare word) into a JSONL folder, then measures, in one run:

* ``index build``: the first ``repo.search`` of a repository with no index (every log read, the index written);
* ``warm query p50``: ``repo.search`` again on the same object (catching up with the files that changed, found by a
  ``stat`` of every file, then the index), and the index query alone;
* ``grep -rl``: the same words found by ``grep -rl WORD folder``, the no-index floor: the ratio is query / grep;
* ``append to searchable p50``: an append by another repository object, then the search that finds it;
* ``CLI warm``: ``sessiontree search WORD --repo folder`` timed from outside by ``farm-bench -n 5`` (interpreter start
  included), against ``sessiontree --help`` in the same call;
* with ``--databases``: the build and the warm query on SQLite and PostgreSQL (the test database, a private schema
  dropped afterwards), and on PostgreSQL the same words through a pg_trgm index (``ILIKE``) beside the tsvector one.

Milliseconds unless said; the machine's load moves the digits, the ratios less.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sessiontree import AssistantMessage, TextContent, UserMessage, open_repo
from sessiontree.search.search import store_search
from sessiontree.search.search_index import Filters
from sessiontree.search.search_text import parse_query

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
TARGETS = {"build_s": 60.0, "query_ms": 20.0, "grep_ratio": 0.25, "append_ms": 20.0, "cli_ms": 500.0}


def vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(size)]


def write_sessions(folder: Path, count: int, entries: int, words: list[str], rng: random.Random) -> None:
    repo = open_repo(folder)
    for i in range(count):
        session = repo.create(cwd=f"/home/me/project{i % 7}")
        for turn in range(entries):
            text = " ".join(rng.choices(words, k=30)) + (f" rare{i}" if turn == entries // 2 else "")
            if turn % 2 == 0:
                session.append_message(UserMessage(content=[TextContent(text=text)], timestamp=0))
            else:
                session.append_message(AssistantMessage(content=[TextContent(text=text)], provider="b", model="m", timestamp=0))
        session.close()
    repo.close()


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return (time.perf_counter() - start) * 1000, out


def p50(values: list[float]) -> float:
    return statistics.median(values)


def queries(words: list[str], count: int, rng: random.Random) -> list[str]:
    picks = [rng.choice(words) for _ in range(10)] + [f"rare{rng.randrange(count)}" for _ in range(10)]
    return picks + [f"{a} {b}" for a, b in zip(picks[:5], picks[5:10], strict=True)]


def measure_repo(url: str, qs: list[str]) -> dict[str, float]:
    """The first search (the index built or opened), then warm searches on the same object, and the index query alone."""
    repo = open_repo(url)
    build, _ = timed(lambda: repo.search(qs[0]))
    warm = [timed(lambda q=q: repo.search(q))[0] for q in qs * 2]
    impl: Any = store_search(repo)._impl
    index = impl.refresh() if hasattr(impl, "root") else impl.index
    query_only = [timed(lambda q=q: index.query(Filters(parse_query(q), 20)))[0] for q in qs]
    reopened, _ = timed(lambda: open_repo(url).search(qs[1]))  # a new repository object, as a new process: index read
    repo.close()
    return {"build": build, "warm": p50(warm), "query_only": p50(query_only), "reopen": reopened}


def grep_floor(folder: Path, qs: list[str]) -> float:
    walls = []
    for q in qs[:10]:
        start = time.perf_counter()
        subprocess.run(["grep", "-rl", q.split()[0], str(folder)], capture_output=True, check=False)
        walls.append((time.perf_counter() - start) * 1000)
    return p50(walls)


def append_to_searchable(folder: Path, rounds: int = 40) -> float:
    reader, writer = open_repo(folder), open_repo(folder)
    reader.search("warmup")
    sid = writer.list()[0].id
    session = writer.open(sid)
    times = []
    for i in range(rounds):
        word = f"fresh{uuid.uuid4().hex[:10]}"
        start = time.perf_counter()
        session.append_message(UserMessage(content=[TextContent(text=f"{word} {i}")], timestamp=0))
        hits = reader.search(word)
        times.append((time.perf_counter() - start) * 1000)
        assert hits and hits[0].session_id == sid
    session.close()
    reader.close()
    writer.close()
    return p50(times)


def cli_warm(folder: Path, word: str) -> tuple[float | None, float | None]:
    script = Path(sys.executable).parent / "sessiontree"
    if not shutil.which("farm-bench") or not script.exists():
        return None, None
    out = subprocess.run(["farm-bench", "-n", "5", "--timeout", "300", "--vs", f"{script} --help", "--",
                          str(script), "search", word, "--repo", str(folder)], capture_output=True, text=True, check=False)
    found = {m.group(1): float(m.group(2)) * 1000
             for m in re.finditer(r"^([AB]) wall s\s+[\d.]+\s+([\d.]+)", out.stdout, re.MULTILINE)}
    return found.get("A"), found.get("B")


def databases(folder: Path, qs: list[str], work: Path, pg_url: str) -> dict[str, dict[str, float]]:
    out = {}
    source = open_repo(folder)
    ids = [i.id for i in source.list()]
    sqlite_url = f"sqlite:///{work / 'sessions.db'}"
    target = open_repo(sqlite_url)
    for sid in ids:
        target.copy_from(source, sid).close()
    target.close()
    out["SQLite"] = measure_repo(sqlite_url, qs)
    try:
        import psycopg

        schema = f"bench_search_{uuid.uuid4().hex[:8]}"
        url = f"{pg_url}?schema={schema}"
        target = open_repo(url)
    except Exception as exc:  # no server (or no psycopg): the table leaves PostgreSQL out
        print(f"PostgreSQL skipped: {exc}", file=sys.stderr)
        source.close()
        return out
    try:
        for sid in ids:
            target.copy_from(source, sid).close()
        target.close()
        out["PostgreSQL"] = measure_repo(url, qs)
        out["PostgreSQL pg_trgm"] = trigram(pg_url, schema, qs)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]  # our own name
        source.close()
    return out


def trigram(pg_url: str, schema: str, qs: list[str]) -> dict[str, float]:
    """The same words through pg_trgm: a GIN trigram index on the text, ``ILIKE '%word%'`` (substring, any case)."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        table = f'"{schema}".sessiontree_search_entries'
        build, _ = timed(lambda: conn.execute(f"CREATE INDEX ON {table} USING gin (text gin_trgm_ops)"))  # type: ignore[arg-type]
        conn.execute(f"ANALYZE {table}")  # type: ignore[arg-type]
        sql = f"SELECT source, entry_id FROM {table} WHERE text ILIKE %s LIMIT 20"
        warm = [timed(lambda q=q: conn.execute(sql, (f"%{q.split()[0]}%",)).fetchall())[0] for q in qs]  # type: ignore[arg-type]
    return {"build": build, "warm": p50(warm), "query_only": p50(warm)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--entries", type=int, default=20)
    parser.add_argument("--databases", action="store_true", help="also SQLite and PostgreSQL")
    parser.add_argument("--postgres", default=PG_DEFAULT)
    parser.add_argument("--keep", metavar="DIR", help="write the sessions here (reused when present)")
    args = parser.parse_args()
    rng = random.Random(42)
    words = vocabulary(rng)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-search-"))
    folder = work / "sessions"
    if not folder.exists():
        start = time.perf_counter()
        write_sessions(folder, args.sessions, args.entries, words, rng)
        print(f"wrote {args.sessions} sessions in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    for leftover in folder.glob(".sessiontree-search.sqlite*"):
        leftover.unlink()
    qs = queries(words, args.sessions, rng)
    jsonl = measure_repo(str(folder), qs)
    print(f"JSONL: {jsonl}", file=sys.stderr)
    grep = grep_floor(folder, qs)
    append = append_to_searchable(folder)
    print(f"grep {grep:.1f}, append {append:.1f}", file=sys.stderr)
    cli, floor = cli_warm(folder, qs[10])
    ratio = jsonl["warm"] / grep
    rows = [
        ("index build (JSONL)", f"{jsonl['build'] / 1000:.2f} s", f"<= {TARGETS['build_s']:.0f} s",
         jsonl["build"] / 1000 <= TARGETS["build_s"]),
        ("warm query p50, in process", f"{jsonl['warm']:.1f}", f"<= {TARGETS['query_ms']:.0f}",
         jsonl["warm"] <= TARGETS["query_ms"]),
        ("  of which: the index query alone", f"{jsonl['query_only']:.1f}", "", None),
        ("first search of a new repository object", f"{jsonl['reopen']:.0f}", "", None),
        ("grep -rl p50 (no-index floor)", f"{grep:.1f}", "", None),
        ("warm query / grep", f"{ratio:.3f}x", f"<= {TARGETS['grep_ratio']}x", ratio <= TARGETS["grep_ratio"]),
        ("append to searchable p50", f"{append:.1f}", f"<= {TARGETS['append_ms']:.0f}", append <= TARGETS["append_ms"]),
        ("CLI warm (farm-bench median wall)", _ms(cli), f"<= {TARGETS['cli_ms']:.0f}",
         None if cli is None else cli <= TARGETS["cli_ms"]),
        ("  sessiontree --help, same call", _ms(floor), "", None),
    ]
    if args.databases:
        for name, result in databases(folder, qs, work, args.postgres).items():
            rows.append((f"{name}: build / warm p50 / query only", f"{result['build']:.0f} / {result['warm']:.1f} / "
                         f"{result['query_only']:.1f}", "", None))
    print(f"\n{args.sessions:,} sessions of {args.entries} entries; milliseconds unless said\n")
    print("| measure | value | target | met |\n|---|---:|---:|---|")
    for name, value, target, ok in rows:
        print(f"| {name} | {value} | {target} | {'' if ok is None else 'yes' if ok else 'NO'} |")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


if __name__ == "__main__":
    main()
