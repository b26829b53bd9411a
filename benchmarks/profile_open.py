"""Profile open+context of one session file: where the time of a cold open goes.

    python benchmarks/profile_open.py FILE [--top 25] [--sort tottime|cumulative] [--pyinstrument]
    python benchmarks/profile_open.py FILE --breakdown     (no profiler: CPU ms per step)
    python benchmarks/profile_open.py FILE --appends 2000  (profile appends instead)

Runs ``Session(JsonlSessionStorage.open(FILE)).build_context()`` once under cProfile (or
pyinstrument, when installed and asked for; it is not a dependency of the project) and
prints the top functions, then the CPU time of each phase (and of the garbage collector). Profiling slows Python code down
(cProfile roughly 1.5-2x), so read the shares, not the absolute numbers; the
unprofiled phase times are printed after the profile. The files are the ones ``run.py --data DIR``
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

clock = time.process_time  # CPU time: what a busy shared machine does not inflate


class GcClock:
    """CPU time spent in the cyclic garbage collector, by generation (ms), while active."""

    def __init__(self) -> None:
        self.ms = [0.0, 0.0, 0.0]
        self.count = [0, 0, 0]
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = clock()
        else:
            self.ms[info["generation"]] += (clock() - self._start) * 1000
            self.count[info["generation"]] += 1

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def phases(file: Path) -> dict[str, float]:
    """Unprofiled CPU times (ms) of each phase of one open+context."""
    t0 = clock()
    storage = JsonlSessionStorage.open(file)
    t1 = clock()
    storage.load()
    t2 = clock()
    storage.close()
    session = Session(JsonlSessionStorage.open(file))
    t3 = clock()
    session.build_context()
    t4 = clock()
    session.close()
    return {
        "storage open (header)": (t1 - t0) * 1000,
        "storage.load (read + scan)": (t2 - t1) * 1000,
        "Session(...) (open + load + replay)": (t3 - t2) * 1000,
        "build_context (decode path + messages)": (t4 - t3) * 1000,
    }


def breakdown(file: Path) -> dict[str, float]:
    """Unprofiled CPU ms of each step of the read path, in a fresh process's first open.

    Uses the steps ``Session`` and ``build_context`` are made of (storage load, aggregate
    replay, path walk, decoding, context state, messages); if those internals change, this
    raises and ``--breakdown`` says so.
    """
    from sessiontree.domain.aggregate import replay
    from sessiontree.projections.context import (
        DEFAULT_OPTIONS,
        default_compaction_transform,
        entry_to_messages,
        path_to_root_or_compaction,
        settings_at,
    )

    out: dict[str, float] = {}
    in_gc: dict[str, float] = {}
    with GcClock() as gc_clock:
        mark = [clock(), 0.0]

        def step(name: str) -> None:
            now, collected = clock(), sum(gc_clock.ms)
            out[name] = (now - mark[0]) * 1000
            in_gc[name] = collected - mark[1]
            mark[0], mark[1] = clock(), collected

        storage = JsonlSessionStorage.open(file)
        header, entries = storage.load()
        step("storage open + load (read, scan every line)")
        agg = replay(header, entries)
        step("aggregate replay (index every entry)")
        log, leaf, limit = agg.log, agg.leaf_id, len(agg.log)
        positions = path_to_root_or_compaction(log, leaf, limit)
        step("path walk (leaf to compaction)")
        path = log.get_many(positions)
        step(f"decode the {len(path):,} path entries")
        settings_at(log, leaf, limit)
        step("context settings (walk back for model/thinking/tools)")
        kept = default_compaction_transform(path)
        messages: list[object] = []
        for index, entry in enumerate(kept):
            messages.extend(entry_to_messages(entry, index, kept, DEFAULT_OPTIONS))
        step(f"compaction transform + {len(messages):,} messages")
        storage.close()
    result = {f"{name} [GC {in_gc[name]:.0f}]": value for name, value in out.items()}
    result["total"] = sum(out.values())
    for generation in range(3):
        result[f"  of which cyclic GC, generation {generation} ({gc_clock.count[generation]} runs)"] = gc_clock.ms[generation]
    return result


def profile_appends(file: Path, count: int, top: int, sort: str) -> None:
    """cProfile of ``count`` appends of the file's own messages to a private copy of it."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="sessiontree-profile-"))
    try:
        copy = folder / file.name
        shutil.copyfile(file, copy)
        session = Session(JsonlSessionStorage.open(copy))
        found = [entry.message for entry in session.find_entries("message")[:count]]
        session.build_context()
        profile = cProfile.Profile()
        profile.enable()
        for index in range(count):
            session.append_message(found[index % len(found)])
        profile.disable()
        session.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats(sort).print_stats(top)
    print(out.getvalue())


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
    parser.add_argument("--breakdown", action="store_true", help="no profiler: CPU ms of each read-path step")
    parser.add_argument("--appends", type=int, metavar="K", help="profile K appends (to a copy) instead")
    args = parser.parse_args()
    if args.appends:
        profile_appends(args.file, args.appends, args.top, args.sort)
        return
    if args.breakdown:
        try:
            steps = breakdown(args.file)
        except Exception as exc:  # internals moved: say so rather than guess
            raise SystemExit(f"breakdown unavailable (the read path changed?): {exc!r}") from None
        print(f"open+context of {args.file.name}, step by step (CPU ms, first open in this process;"
              " [GC n]: ms of it in the cyclic garbage collector):")
        for name, value in steps.items():
            print(f"  {name:62s} {value:8.1f}")
        return
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
    print(f"phases of open+context of {args.file.name} (unprofiled CPU ms, after the profiled run):")
    with GcClock() as gc_clock:
        for name, value in phases(args.file).items():
            print(f"  {name:45s} {value:10.1f}")
    for generation in range(3):
        print(f"  of which cyclic GC, generation {generation} ({gc_clock.count[generation]:5d} runs)  "
              f"{gc_clock.ms[generation]:10.1f}")


if __name__ == "__main__":
    main()
