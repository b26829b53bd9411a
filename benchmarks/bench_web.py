"""The web viewer in a real browser: ``python benchmarks/bench_web.py`` (after ``bash scripts/test.sh``, which installs
chromium and playwright).

It writes (once, into ``--data``) a ``bench``-shaped session of ``--entries`` entries and ``--sessions`` sessions of
``--small`` entries, starts ``sessiontree serve`` on them and drives the system's headless chromium:

* tree, first paint -- from navigation start to the first tree rows drawn, for the big session: ``cold`` on a
  server that has not opened it yet (a new server each time), ``warm`` on a reload;
* server CPU -- what the server's process spent until the cold tree's rows were drawn (a measure the machine's
  load inflates less than wall time);
* context page -- from navigation start to the messages shown, context at the big session's leaf (opened already);
* server RSS -- of the server process idle, then with the ``--sessions`` small sessions' trees opened.

Baselines from the same run: the command line doing the same work (``sessiontree show --window 200``,
``sessiontree context --json``: a new process each, as a user would run it) and the idle server's RSS. Times are
the median of ``--repeat`` runs, in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "support"))
sys.path.insert(0, str(HERE.parent / "tests" / "cli"))

import bench_data
from sessiontree_web import CHROMIUM, CHROMIUM_FLAGS, Server

TARGETS = {"tree": 1500.0, "context": 300.0, "rss": 300.0}


def prepare(data: Path, entries: int, sessions: int, small: int) -> dict[str, Any]:
    """The repository folder with one big and ``sessions`` small sessions (written once, reused)."""
    repo = data / f"repo-{entries}-{sessions}x{small}"
    if not (repo / ".complete").exists():
        shutil.rmtree(repo, ignore_errors=True)
        repo.mkdir(parents=True)
        print(f"writing a {entries:,}-entry session and {sessions} of {small:,} entries into {repo} ...", flush=True)
        bench_data.generate_native(repo / "big.jsonl", entries)
        for i in range(sessions):
            bench_data.generate_native(repo / f"small-{i}.jsonl", small, seed=i)
        (repo / ".complete").write_text("")
    from sessiontree import JsonlSessionStorage

    ids = {}
    for path in sorted(repo.glob("*.jsonl")):
        storage = JsonlSessionStorage.open(path)
        ids[path.stem] = storage.session_id
        storage.close()
    return {"repo": repo, "big": ids.pop("big"), "small": list(ids.values())}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_ms(pid: int) -> float:
    """The CPU time (user + system) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def cli_ms(*args: str) -> tuple[float, float]:
    """Wall and CPU milliseconds of one run of the command line."""
    script = Path(sys.executable).parent / "sessiontree"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([str(script), *args], check=True, capture_output=True)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000


def shown_ms(page: Any, url: str, selector: str, on_shown: Any = None) -> float:
    """Milliseconds from the navigation's start to ``selector`` being in the page (checked every frame). Then the
    page is left to finish what it loads after (usage, the verify badge), so the next measure starts on a quiet
    server."""
    page.goto(url, wait_until="commit")
    page.wait_for_function(f"() => document.querySelector({selector!r}) !== null", polling="raf", timeout=120_000)
    shown = float(page.evaluate("performance.now()"))
    if on_shown is not None:
        on_shown()
    page.wait_for_load_state("networkidle", timeout=120_000)
    return shown


def _cookie(page: Any, server: Any) -> None:
    """The token's cookie, as the first visit of the printed URL sets it, and a page of the server's origin open, as
    when a user comes to a session from the list. (Not the list itself: its rows load every session's statistics,
    which is not what these measures are about; and not a page of another origin: chromium would start a new
    renderer process for the new origin inside the measure.)"""
    port = server.base.rsplit(":", 1)[1]
    page.context.add_cookies([{"name": f"sessiontree_token_{port}", "value": server.token, "url": server.base}])
    page.goto(f"{server.base}/static/app.css")


def measure(data: dict[str, Any], repeat: int) -> list[tuple[str, float, float, str, float | None]]:
    from playwright.sync_api import sync_playwright

    repo, big = data["repo"], data["big"]
    tree_sel, ctx_sel = "#tree .row[data-id]", "#messages"
    cold, cold_cpu, warm, context = [], [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        for _ in range(repeat):
            server = Server(repo, repo)
            try:
                _cookie(page, server)  # as the first visit would leave it, without loading the sessions list first
                spent, pid = cpu_ms(server.proc.pid), server.proc.pid
                cold.append(shown_ms(page, f"{server.base}/sessions/{big}", tree_sel,
                                     lambda pid=pid, spent=spent: cold_cpu.append(cpu_ms(pid) - spent)))
                warm.append(shown_ms(page, f"{server.base}/sessions/{big}", tree_sel))
                context += [shown_ms(page, f"{server.base}/sessions/{big}/context", ctx_sel) for _ in range(3)]
            finally:
                server.stop()
        server = Server(repo, repo)
        try:
            _cookie(page, server)
            time.sleep(0.5)
            idle = rss_mb(server.proc.pid)
            for sid in data["small"]:
                shown_ms(page, f"{server.base}/sessions/{sid}", tree_sel)
                shown_ms(page, f"{server.base}/sessions/{sid}/context", ctx_sel)
            ten = rss_mb(server.proc.pid)
            shown_ms(page, f"{server.base}/sessions/{big}", tree_sel)
            with_big = rss_mb(server.proc.pid)
        finally:
            server.stop()
        browser.close()
    shows = [cli_ms("show", "--repo", str(repo), big, "--window", "200") for _ in range(repeat)]
    show, show_cpu = statistics.median(w for w, _ in shows), statistics.median(c for _, c in shows)
    ctx = statistics.median(cli_ms("context", "--repo", str(repo), big, "--json")[0] for _ in range(repeat))
    n, cli_show = len(data["small"]), "`sessiontree show --window 200`"
    return [
        ("tree first paint, cold (big session)", statistics.median(cold), show, cli_show, TARGETS["tree"]),
        ("server CPU to the cold tree's first paint (big session)", statistics.median(cold_cpu), show_cpu,
         "CPU of `sessiontree show --window 200`", None),
        ("tree first paint, warm (big session)", statistics.median(warm), show, cli_show, TARGETS["tree"]),
        ("context page at the leaf (big session)", statistics.median(context), ctx, "`sessiontree context --json`",
         TARGETS["context"]),
        (f"server RSS, {n} sessions open (MB)", ten, idle, "idle server", TARGETS["rss"]),
        (f"server RSS, {n} + the big session open (MB)", with_big, idle, "idle server", None),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000, help="entries of the big session (default 100,000)")
    parser.add_argument("--sessions", type=int, default=10, help="small sessions opened for the RSS measure (default 10)")
    parser.add_argument("--small", type=int, default=10_000, help="entries of each small session (default 10,000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per time measure (median; default 3)")
    parser.add_argument("--data", type=Path, default=HERE / "out" / "web-data", help="where the sessions are written")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"no chromium at {CHROMIUM}: apt-get install chromium (scripts/test.sh does)", file=sys.stderr)
        return 2
    data = prepare(args.data, args.entries, args.sessions, args.small)
    rows = measure(data, args.repeat)
    print(f"\nweb viewer, {args.entries:,}-entry session, {args.sessions} x {args.small:,}-entry sessions, "
          f"median of {args.repeat}")
    print("| measure | value | baseline | baseline is | ratio | target | verdict |")
    print("|---|---:|---:|---|---:|---:|---|")
    for name, value, base, what, target in rows:
        unit = "MB" if "RSS" in name else "ms"
        verdict = "-" if target is None else ("ok" if value <= target else "MISSED")
        shown_target = "-" if target is None else f"<= {target:,.0f} {unit}"
        ratio = f"{value / base:.2f}x"
        print(f"| {name} | {value:,.0f} {unit} | {base:,.0f} {unit} | {what} | {ratio} | {shown_target} | {verdict} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
