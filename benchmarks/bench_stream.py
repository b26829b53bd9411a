"""Whole-session commands in bounded memory (issue 19, part 4): ``python benchmarks/bench_stream.py [--data DIR]``.

Runs ``sessiontree verify``, ``export --format pi``, ``export --format native``, ``replay --step --json``, ``stats``,
``stats --json``, ``show`` and ``show --json`` (output to a file, as a pipe would take it) through the console
script, each in a fresh process, on the 630 MB compacted pi session of ``bench_large.py`` and on the 100k-entry
native and pi files of ``bench_data.py`` (``--data`` holds or receives them; ``--entries N``: files of another size,
and no large session). Prints each command's wall time and peak RSS (``ru_maxrss`` of the child), the RSS against
the file's size, and against pi 1.6.0 opening the same file (``pi_driver.mjs open``: pi has no verify, export,
replay or stats of its own; to read a session it loads it whole).
``--baseline DIR``: a virtualenv (or any folder with ``bin/sessiontree``) with another build, measured in the same
run, interleaved (e.g. the commit before the change).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_large import remove_index, write_file  # the 630 MB session
from run import pi_child  # the runner of benchmarks/run.py

COMMANDS = {
    "verify": ["verify", "{file}"],
    "export pi": ["export", "{file}", "--format", "pi", "-o", "{out}"],
    "export native": ["export", "{file}", "--format", "native", "-o", "{out}"],
    "replay --step --json": ["replay", "{file}", "--step", "--json"],
    "stats": ["stats", "{file}"],
    "stats --json": ["stats", "{file}", "--json"],
    "show": ["show", "{file}"],
    "show --json": ["show", "{file}", "--json"],
}


def run_script(script: Path, template: list[str], path: Path, folder: Path) -> dict[str, float]:
    """One command in a fresh process: wall ms and peak RSS (bytes); its stdout goes to a file, stderr is kept."""
    out = folder / "export.out"
    out.unlink(missing_ok=True)
    args = [str(script), *(a.format(file=path, out=out) for a in template)]
    with open(folder / "stdout", "wb") as sink:
        started = time.perf_counter()
        proc = subprocess.Popen(args, stdout=sink, stderr=subprocess.PIPE, cwd=folder)
        assert proc.stderr is not None
        error = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = (time.perf_counter() - started) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {error.decode()[-500:]}")
    out.unlink(missing_ok=True)
    return {"ms": wall, "maxrss": usage.ru_maxrss * 1024}


def files(data: Path, use_pi: bool, entries: int) -> dict[str, Path]:
    """The 630 MB session (not with ``--entries``: a smoke run) and the native and pi files of ``entries``."""
    import bench_data

    found = {}
    if entries == 100_000:
        found["630 MB pi (compacted)"] = large = data / "large-pi.jsonl"
        if not large.exists():
            write_file(large)
    made = bench_data.prepare(data, [entries], use_pi)[entries]
    label = f"{entries // 1000}k" if entries >= 1000 else str(entries)
    return {**found, f"{label} native": made["native"], f"{label} pi": made["pi"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="keep the files here and reuse them (default: a temporary folder)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="a virtualenv with another build, measured alongside")
    parser.add_argument("--no-pi", action="store_true")
    parser.add_argument("--only", help="the commands whose name contains this, or one of these (e.g. replay or stats,show)")
    parser.add_argument("--entries", type=int, default=100_000, help="the size of the native and pi files; other than "
                        "100000 (a smoke run), the 630 MB session is left out")
    args = parser.parse_args(argv)
    data = args.data or Path(tempfile.mkdtemp(prefix="sessiontree-stream-"))
    data.mkdir(parents=True, exist_ok=True)
    scripts = {"ours": Path(sys.executable).parent / "sessiontree"}
    if args.baseline is not None:
        scripts["baseline"] = args.baseline / "bin" / "sessiontree"
    pi_home = Path(os.environ.get("SESSIONTREE_PI_PEER", os.path.join(os.environ.get("TMPDIR", "/tmp"), "sessiontree-pi-peer")))
    use_pi = not args.no_pi and (pi_home / "latest").is_dir()
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, path in files(data, use_pi, args.entries).items():
            remove_index(path)
            run_script(scripts["ours"], ["context", "{file}"], path, folder)  # writes the sidecar index, as a first open does
            size = path.stat().st_size
            pi_rss = statistics.median(pi_child(pi_home, "open", path)["maxrss"] for _ in range(args.repeat)) if use_pi else None
            for command, template in COMMANDS.items():
                if args.only and not any(part in command for part in args.only.split(",")):
                    continue
                runs: dict[str, list[dict[str, float]]] = {side: [] for side in scripts}
                for _ in range(args.repeat):
                    for side, script in scripts.items():
                        runs[side].append(run_script(script, template, path, folder))
                rows.append(_row(name, size, command, runs, pi_rss))
                print(rows[-1], flush=True)
    print()
    print(f"median of {args.repeat} fresh processes each; peak RSS is the whole process (interpreter and imports too)")
    print("| file | command | side | wall ms | peak RSS MiB | RSS / file | x pi open |")
    print("|---|---|---|---:|---:|---:|---:|")
    print("\n".join(rows))
    return 0


def _row(name: str, size: int, command: str, runs: dict[str, list[dict[str, float]]], pi_rss: float | None) -> str:
    out = []
    for side, measured in runs.items():
        wall = statistics.median(r["ms"] for r in measured)
        rss = statistics.median(r["maxrss"] for r in measured)
        versus = f"{rss / pi_rss:.2f}x" if pi_rss else "-"
        out.append(f"| {name} | {command} | {side} | {wall:,.0f} | {rss / 2**20:,.0f} | {rss / size:.2f} | {versus} |")
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
