"""What keeping content out of line costs and saves: ``python benchmarks/bench_blobs.py [--images 50] [--repeat 5]``.

Each row compares a JSONL repository with the default blob store (images and text over 64 KiB out of line) against
the same repository with ``blob_threshold=None`` (everything inline, the baseline), measured in the same run:

* ``disk``        -- bytes on disk after ``--images`` appends of the same 1 MiB image (issue 22: <= 3 MB);
* ``append img``  -- p50 of one append of a message holding a 1 MiB image (distinct images);
* ``open+ctx``    -- opening the session of ``disk`` in a fresh repository and building its context (every image read);
* ``ctx memory``  -- the Python memory the context of that session holds (tracemalloc, after the open: 50 messages
  that refer to one blob share one string);
* ``append p50``  -- p50 of small appends (a question, an answer), where the store only looks at each line.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from sessiontree import AssistantMessage, ImageContent, JsonlSessionRepo, TextContent, UserMessage

MB = 1 << 20


def _usage(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _image(seed: int) -> str:
    return base64.b64encode(seed.to_bytes(4, "big") + os.urandom(MB - 4)).decode("ascii")


def measure(threshold: Any, args: argparse.Namespace) -> dict[str, float]:
    out: dict[str, list[float]] = {"disk": [], "append img": [], "open+ctx": [], "ctx memory": [], "append p50": []}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            repo = JsonlSessionRepo(folder, blob_threshold=threshold, redactors=None)
            session = repo.create()
            image = _image(0)
            for n in range(args.images):
                session.append_message(UserMessage([TextContent(f"step {n}"), ImageContent(image, "image/png")]))
            session.close()
            out["disk"].append(_usage(folder))
            start = time.perf_counter()
            reopened = JsonlSessionRepo(folder, blob_threshold=threshold).open(session.id)
            assert reopened.build_context().messages[-1].content[1].data == image
            out["open+ctx"].append((time.perf_counter() - start) * 1000)
            reopened.close()
            tracemalloc.start()
            reopened = JsonlSessionRepo(folder, blob_threshold=threshold).open(session.id)
            held = reopened.build_context().messages
            out["ctx memory"].append(tracemalloc.get_traced_memory()[0])
            tracemalloc.stop()
            del held
            reopened.close()
            other = repo.create()
            images = [_image(n) for n in range(10)]
            times = []
            for picture in images:
                message = UserMessage([ImageContent(picture, "image/png")])
                start = time.perf_counter()
                other.append_message(message)
                times.append((time.perf_counter() - start) * 1000)
            out["append img"].append(statistics.median(times))
            small = []
            for n in range(2000):
                message = (UserMessage(f"question {n}") if n % 2 == 0 else
                           AssistantMessage([TextContent("an answer " * 20)], provider="p", model="m"))
                start = time.perf_counter()
                other.append_message(message)
                small.append((time.perf_counter() - start) * 1e6)
            out["append p50"].append(statistics.median(small[200:]))
            other.close()
    return {key: statistics.median(values) for key, values in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    # interleaved: each repeat measures both sides, so load on the machine hits both alike
    base: dict[str, list[float]] = {}
    store: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        one = argparse.Namespace(images=args.images, repeat=1)
        for key, value in measure(None, one).items():
            base.setdefault(key, []).append(value)
        for key, value in measure(64 * 1024, one).items():
            store.setdefault(key, []).append(value)
    units = {"disk": "MB", "append img": "ms", "open+ctx": "ms", "ctx memory": "MB", "append p50": "us"}
    print(f"{'row':<12} {'inline (baseline)':>18} {'blob store':>12} {'ratio':>7}")
    for key, unit in units.items():
        b, s = statistics.median(base[key]), statistics.median(store[key])
        scale = 1 / MB if unit == "MB" else 1
        print(f"{key:<12} {b * scale:>15.2f} {unit:<2} {s * scale:>9.2f} {unit:<2} {s / b:>6.2f}x")


if __name__ == "__main__":
    main()
