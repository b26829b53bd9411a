"""Profile open+context of one session file: where the time of a cold open goes.

    python benchmarks/profile_open.py FILE [--top 25] [--sort tottime|cumulative] [--pyinstrument]

Runs ``Session(JsonlSessionStorage.open(FILE)).build_context()`` once under cProfile (or
pyinstrument, when installed and asked for; it is not a dependency of the project) and
prints the phases' wall times and the top functions. Profiling slows Python code down
(cProfile roughly 1.5-2x), so read the shares, not the absolute numbers; the
unprofiled phase times are printed first. The files are the ones ``run.py --data DIR``
keeps (``DIR/made-by-pi/native-100000.jsonl`` and ``pi-100000.jsonl``).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import time
from pathlib import Path

from sessiontree import JsonlSessionStorage, Session


class GcClock:
    """Time spent in the cyclic garbage collector, by generation (ms), while active."""

    def __init__(self) -> None:
        self.ms = [0.0, 0.0, 0.0]
        self.count = [0, 0, 0]
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.ms[info["generation"]] += (time.perf_counter() - self._start) * 1000
            self.count[info["generation"]] += 1

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def phases(file: Path) -> dict[str, float]:
    """Unprofiled wall times (ms) of each phase of one open+context."""
    t0 = time.perf_counter()
    storage = JsonlSessionStorage.open(file)
    t1 = time.perf_counter()
    header, entries = storage.load()
    t2 = time.perf_counter()
    storage.close()
    session = Session(JsonlSessionStorage.open(file))
    t3 = time.perf_counter()
    session.build_context()
    t4 = time.perf_counter()
    session.close()
    return {
        "storage open (header)": (t1 - t0) * 1000,
        "storage.load (read + scan)": (t2 - t1) * 1000,
        "Session(...) (open + load + replay)": (t3 - t2) * 1000,
        "build_context (decode path + messages)": (t4 - t3) * 1000,
    }


def open_and_build(file: Path) -> None:
    session = Session(JsonlSessionStorage.open(file))
    session.build_context()
    session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--sort", default="tottime", choices=["tottime", "cumulative"])
    parser.add_argument("--pyinstrument", action="store_true", help="use pyinstrument (pip install pyinstrument)")
    args = parser.parse_args()
    if args.pyinstrument:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005)
        profiler.start()
        open_and_build(args.file)
        profiler.stop()
        print(profiler.output_text(unicode=False, color=False, show_all=False))
    else:
        profile = cProfile.Profile()
        profile.enable()
        open_and_build(args.file)
        profile.disable()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(args.sort).print_stats(args.top)
        print(out.getvalue())
    print(f"phases of open+context of {args.file.name} (unprofiled, ms, after the profiled run):")
    with GcClock() as clock:
        for name, value in phases(args.file).items():
            print(f"  {name:45s} {value:10.1f}")
    for generation in range(3):
        print(f"  of which cyclic GC, generation {generation} ({clock.count[generation]:5d} runs)  "
              f"{clock.ms[generation]:10.1f}")


if __name__ == "__main__":
    main()
