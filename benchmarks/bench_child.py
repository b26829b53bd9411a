"""One measurement in a fresh process: ``python benchmarks/bench_child.py MEASURE 'JSON ARGS'``.

Prints one JSON object. ``benchmarks/run.py`` starts one process per measurement and
repetition, so no measurement sees another's warm caches or heap. Times are in
milliseconds; ``rss_before`` is the resident set size just before the measured work and
``maxrss`` the peak (``VmHWM`` on Linux) at its end, both in bytes.

Measures:

* ``open_context`` -- ``Session(JsonlSessionStorage.open(file))`` then ``build_context()``
  (wall and CPU time); ``index``: ``"none"`` removes the file's sidecar index first (a cold open, which
  writes it), ``"kept"`` requires it (an open through a valid index);
* ``parse_floor`` -- read the file, ``orjson.loads`` every line, an id -> parent map
  (the least a reader can do; garbage collector paused, as our scan does);
* ``append`` -- on a private copy of the file: open and build the context, ``count``
  timed ``append_message`` calls (with ``fsync``, each followed by a timed raw
  ``os.write`` + ``os.fsync`` of the same line to a twin copy: the floor), then
  ``ctx_iters`` rounds of append + timed ``build_context()`` (the incremental context),
  then one uncached rebuild (``build_context(leaf_id=...)``);
* ``write_floor`` -- on a private copy of the file, the file's first message lines, one
  at a time: ``orjson.dumps`` of the parsed entry + ``os.write`` (``flush``), or
  ``os.write`` + ``os.fsync`` (``fsync``);
* ``time_travel`` -- open the session, then ``at(v).build_context()`` for ``v`` = half;
* ``list_sessions`` -- ``open_repo(directory).list()``, with the directory's listing index
  removed first (``cold``) or as the previous run left it.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import gc
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

from sessiontree import JsonlSessionStorage, Session


def _import_library() -> None:
    """Import every module of the library now, so that no measured call pays for a module the
    library imports lazily (``import sessiontree`` leaves the pi dialect, the generated codec,
    the scanner and others to first use). Imports are excluded on both sides: pi's column
    starts after node has loaded pi's module. Codecs are still built inside the measurement,
    as a real first open builds them."""
    import importlib
    import pkgutil

    features = ('wire', 'storage', 'pi', 'audit', 'content', 'search', 'retention')  # one folder per feature
    for package in ("sessiontree", "sessiontree.domain", "sessiontree.projections", *(f"sessiontree.{f}" for f in features)):
        path = importlib.import_module(package).__path__
        for info in pkgutil.iter_modules(path, package + "."):
            try:
                importlib.import_module(info.name)
            except ImportError:  # an optional extra that is not installed (postgres, signing)
                pass


_import_library()
IMPORT_MS = (time.perf_counter() - _T0) * 1000
now = time.perf_counter


def maxrss() -> int:
    """Peak resident set size of this program so far, in bytes.

    On Linux this is ``VmHWM``: ``ru_maxrss`` would also count the parent's peak at the
    fork that started this process (the kernel carries it across ``exec``).
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def rss_now() -> int:
    """Current resident set size in bytes (Linux; elsewhere the peak so far)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return maxrss()


def ms(seconds: float) -> float:
    return round(seconds * 1000, 4)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(-(-q * len(ordered) // 1)) - 1))
    return ordered[rank]


def summary(samples: list[float]) -> dict[str, float]:
    """p50, p99 and mean of per-operation times (seconds in, ms out)."""
    return {
        "p50": ms(statistics.median(samples)),
        "p99": ms(percentile(samples, 0.99)),
        "mean": ms(statistics.fmean(samples)),
        "n": len(samples),
    }


def open_context(file: str, index: str = "as is") -> dict[str, Any]:
    from sessiontree.storage import jsonl_index

    if index == "none":  # no sidecar index yet: the open scans the file (and writes one)
        jsonl_index.remove(file)
    elif index == "kept" and not os.path.exists(str(jsonl_index.sidecar_path(file))):
        raise SystemExit(f"no sidecar index for {file}: run an open first")
    rss0 = rss_now()
    c0 = time.process_time()
    t0 = now()
    session = Session(JsonlSessionStorage.open(file))
    t1 = now()
    context = session.build_context()
    t2 = now()
    c2 = time.process_time()
    out = {
        "open_ms": ms(t1 - t0), "ctx_ms": ms(t2 - t1), "total_ms": ms(t2 - t0), "cpu_ms": ms(c2 - c0),
        "entries": len(session), "messages": len(context.messages),
        "rss_before": rss0, "maxrss": maxrss(),
    }
    session.close()
    return out


def parse_floor(file: str) -> dict[str, Any]:
    rss0 = rss_now()
    t0 = now()
    gc.disable()
    with open(file, "rb") as fh:
        lines = fh.read().split(b"\n")
    loads = orjson.loads
    objs = [loads(line) for line in lines if line]
    key = "parentId" if "parentId" in objs[min(1, len(objs) - 1)] else "parent_id"
    parents = {obj["id"]: obj[key] for obj in objs[1:]}
    gc.enable()
    t1 = now()
    return {"total_ms": ms(t1 - t0), "entries": len(parents), "rss_before": rss0, "maxrss": maxrss()}


def _private_copy(file: str) -> tuple[Path, Path]:
    """A copy of ``file`` in a new folder, already on the disk (so no append pays for it)."""
    folder = Path(tempfile.mkdtemp(prefix="sessiontree-bench-"))
    target = folder / Path(file).name
    shutil.copyfile(file, target)
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return folder, target


def _message_lines(file: str, count: int) -> list[bytes]:
    """The first ``count`` message lines of ``file`` (cycled when it has fewer)."""
    found: list[bytes] = []
    with open(file, "rb") as fh:
        for line in fh:
            if b'"type":"message"' in line[:40]:
                found.append(line.rstrip(b"\n"))
                if len(found) == count:
                    break
    return [found[i % len(found)] for i in range(count)]


def append(file: str, durability: str, count: int, ctx_iters: int, warmup: int, redact: bool = True) -> dict[str, Any]:
    folder, copy = _private_copy(file)
    try:
        # redact=False: the same appends with redaction on write off (the default redactor's cost)
        session = Session(JsonlSessionStorage.open(copy, durability=durability), redactors="default" if redact else None)
        found = [e.message for e in session.find_entries("message")[: count + warmup + ctx_iters]]
        messages = [found[i % len(found)] for i in range(count + warmup + ctx_iters)]
        session.build_context()  # a running agent has its context at hand
        for message in messages[:warmup]:
            session.append_message(message)
        # With fsync, the raw floor runs interleaved in this process (a write+fsync of the
        # same bytes to a twin copy after each append): fsync latency on a shared virtual
        # disk drifts by 2-4x within seconds, so separate runs would not compare.
        floor_fd, raw = -1, _message_lines(file, count)
        if durability == "fsync":
            twin = folder / "twin.jsonl"
            shutil.copyfile(copy, twin)
            floor_fd = os.open(twin, os.O_WRONLY | os.O_APPEND)
            os.fsync(floor_fd)
        samples, floor = [], []
        for index, message in enumerate(messages[warmup : warmup + count]):
            t0 = now()
            session.append_message(message)
            samples.append(now() - t0)
            if floor_fd >= 0:
                t0 = now()
                os.write(floor_fd, raw[index] + b"\n")
                os.fsync(floor_fd)
                floor.append(now() - t0)
        if floor_fd >= 0:
            os.close(floor_fd)
        ctx_samples = []
        for message in messages[warmup + count :]:
            session.append_message(message)
            t0 = now()
            session.build_context()
            ctx_samples.append(now() - t0)
        t0 = now()
        session.build_context(leaf_id=session.leaf_id)  # no cache: walk + convert the whole path
        rebuild = now() - t0
        session.close()
        out: dict[str, Any] = {"append": summary(samples), "rebuild_ms": ms(rebuild), "maxrss": maxrss()}
        if ctx_samples:
            out["ctx_after_append"] = summary(ctx_samples)
        if floor:
            out["floor"] = summary(floor)
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def write_floor(file: str, durability: str, count: int, warmup: int) -> dict[str, Any]:
    lines = _message_lines(file, count + warmup)
    objs = [orjson.loads(line) for line in lines]
    folder, copy = _private_copy(file)  # appended to, like the session's own copy
    try:
        fd = os.open(copy, os.O_WRONLY | os.O_APPEND)
        samples = []
        dumps, write, fsync = orjson.dumps, os.write, os.fsync
        for index, (obj, line) in enumerate(zip(objs, lines)):
            t0 = now()
            if durability == "fsync":
                write(fd, line + b"\n")
                fsync(fd)
            else:
                write(fd, dumps(obj) + b"\n")
            if index >= warmup:
                samples.append(now() - t0)
        os.close(fd)
        return {"append": summary(samples)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def time_travel(file: str) -> dict[str, Any]:
    session = Session(JsonlSessionStorage.open(file))
    version = session.version // 2
    t0 = now()
    view = session.at(version)
    t1 = now()
    context = view.build_context()
    t2 = now()
    session.close()
    return {"at_ms": ms(t1 - t0), "total_ms": ms(t2 - t0), "version": version, "messages": len(context.messages)}


def list_sessions(directory: str, cold: bool) -> dict[str, Any]:
    from sessiontree import open_repo
    from sessiontree.storage.jsonl_repo import INDEX_FILE

    if cold:
        (Path(directory) / INDEX_FILE).unlink(missing_ok=True)
    t0 = now()
    repo = open_repo(directory)
    infos = repo.list()
    t1 = now()
    repo.close()
    return {"total_ms": ms(t1 - t0), "sessions": len(infos)}


FILLER = "the quick brown fox jumps over the lazy dog while the agent reads the file and plans. "


def api_append(count: int, redact: bool = True) -> dict[str, Any]:
    """``count`` appends as an app makes them: build the message objects (alternating user and
    assistant, the assistant with its usage and cost), then ``append_message``; a new session
    of a JSONL repository. pi_driver.mjs ``api_append`` builds the same content for pi."""
    from sessiontree import AssistantMessage, Cost, JsonlSessionRepo, TextContent, Usage, UserMessage

    folder = Path(tempfile.mkdtemp(prefix="sessiontree-bench-api-"))
    try:
        # redact=False: as pi appends, with no redaction on write (the default redactor is on)
        session = JsonlSessionRepo(folder, redactors="default" if redact else None).create(cwd="/home/me/project")
        t0 = now()
        for i in range(count):
            stamp = int(time.time() * 1000)
            if i % 2 == 0:
                message: Any = UserMessage(content=[TextContent(text=f"question {i}: {FILLER}")], timestamp=stamp)
            else:
                usage = Usage(
                    input=1000 + i % 500, output=200 + i % 300, cache_read=5000, cache_write=100,
                    total_tokens=6300 + i % 500 + i % 300,
                    cost=Cost(input=0.003, output=0.0045, cache_read=0.0015, cache_write=0.000375, total=0.009375),
                )
                message = AssistantMessage(
                    content=[TextContent(text=f"answer {i}: {FILLER * 4}")], provider="anthropic",
                    model="claude-sonnet-4-5", api="anthropic-messages", usage=usage, stop_reason="stop", timestamp=stamp,
                )
            session.append_message(message)
        elapsed = now() - t0
        session.close()
        return {"mean_us": elapsed / count * 1e6, "count": count, "maxrss": maxrss()}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


MEASURES = {
    "api_append": api_append,
    "open_context": open_context,
    "parse_floor": parse_floor,
    "append": append,
    "write_floor": write_floor,
    "time_travel": time_travel,
    "list_sessions": list_sessions,
}


def main() -> None:
    measure, args = sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    result = MEASURES[measure](**args)
    result["import_ms"] = round(IMPORT_MS, 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
