"""The figures docs/architecture.md gives, measured from the code as it is (issue 34: docs that cannot go stale).

    python scripts/architecture_figures.py            print the block
    python scripts/architecture_figures.py --write    replace the block in docs/architecture.md
    python scripts/architecture_figures.py --check    exit 1 when docs/architecture.md holds another block

Lines are all the lines of each folder's modules (as ``wc -l`` counts them); calls are calls of the library's own
Python functions (``sys.setprofile``'s ``call`` events in its folders) on a JSONL session with a fixed clock and fixed
ids, so the figures are the same on every run of the same code.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
START, END = "<!-- figures: scripts/architecture_figures.py --write -->", "<!-- end of figures -->"
FOLDERS = [  # (folder, what it is, part of the core?)
    ("domain", "entries, messages, the aggregate", True),
    ("projections", "read models and the context", True),
    ("wire", "the wire format", True),
    ("storage", "the storage ports and backends", True),
    ("pi", "pi's dialect", True),
    ("audit", "chain, checkpoints, verify, erasure", True),
    ("content", "blobs and redaction", True),
    ("search", "full-text search", True),
    ("retention", "pruning and archives", True),
    ("application", "the public API and services", True),
    ("application/integrations", "framework stores", False),
    ("cli", "the command line", False),
    ("web", "the web viewer", False),
]
APPENDS, ENTRIES = 200, 1000


def _modules(folder: Path, skip: Path | None) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if skip is None or skip not in p.parents)


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def calls(run: Callable[[], Any]) -> int:
    """How many calls of the library's own functions ``run`` makes (not its dependencies': their releases would
    move the figure)."""
    import importlib

    count = 0
    packages = ["sessiontree", *(f"sessiontree.{name}" for name, _, core in FOLDERS if core and name != "application")]
    # where they are installed from
    own = tuple(str(Path(importlib.import_module(package).__file__ or "").parent) for package in packages)

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call" and frame.f_code.co_filename.startswith(own):
            count += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return count


def _fixed() -> dict[str, Any]:
    from sessiontree.domain.ids import counter_ids

    moment = datetime(2026, 1, 1, tzinfo=UTC)
    return {"clock": lambda: moment, "id_generator": counter_ids("e")}


def _message(n: int) -> Any:
    from sessiontree import AssistantMessage, TextContent, Usage, UserMessage

    if n % 2 == 0:
        return UserMessage(f"question {n}: what does the cache do when the file is renamed?", timestamp=n)
    return AssistantMessage([TextContent(f"answer {n}: it checks the file's identity first.")], provider="anthropic",
                            model="claude", usage=Usage(input=100, output=20, total_tokens=120), timestamp=n)


def per_append(folder: Path) -> float:
    from sessiontree import JsonlSessionStorage, Session

    session = Session(JsonlSessionStorage.create(folder / "append.jsonl", session_id="figures-append"), **_fixed())
    for n in range(20):  # first appends fill caches; what is measured is the steady state
        session.append_message(_message(n))
    messages = [_message(n) for n in range(20, 20 + APPENDS)]

    def run() -> None:
        for message in messages:
            session.append_message(message)

    total = calls(run)
    session.close()
    return total / APPENDS


def per_entry_on_open(folder: Path) -> float:
    from sessiontree import JsonlSessionStorage, Session, open_session

    path = folder / "open.jsonl"
    session = Session(JsonlSessionStorage.create(path, session_id="figures-open"), **_fixed())
    for n in range(ENTRIES):
        session.append_message(_message(n))
    session.close()
    open_session(path).build_context()  # the first open writes the sidecar index: measured is a warm open
    return calls(lambda: open_session(path).build_context()) / ENTRIES


def figures() -> str:
    rows, core_lines, core_modules, over = [], 0, 0, []
    for name, what, core in FOLDERS:
        folder = ROOT / name
        skip = ROOT / "application" / "integrations" if name == "application" else None
        modules = _modules(folder, skip)
        lines = sum(_lines(p) for p in modules)
        over += [f"`{p.relative_to(ROOT)}`" for p in modules if _lines(p) > 500]
        if core:
            core_lines += lines
            core_modules += len(modules)
        rows.append(f"| `{name}/` | {what} | {len(modules)} | {lines:,} |")
    with tempfile.TemporaryDirectory() as tmp:
        append = per_append(Path(tmp))
        entry = per_entry_on_open(Path(tmp))
    return "\n".join([
        START,
        "| folder | holds | modules | lines |",
        "|---|---|---:|---:|",
        *rows,
        f"| **core** | domain, projections, features, application (without integrations) | {core_modules} | {core_lines:,} |",
        "",
        "| measured | |",
        "|---|---:|",
        f"| calls of library functions per append (JSONL, default redactor, steady state) | {append:.1f} |",
        f"| calls of library functions per entry, open + context of {ENTRIES:,} entries (index warm) | {entry:.1f} |",
        f"| modules over 500 lines | {', '.join(over) if over else 'none'} |",
        END,
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="replace the block in docs/architecture.md")
    mode.add_argument("--check", action="store_true", help="exit 1 when docs/architecture.md holds another block")
    args = parser.parse_args()
    block = figures()
    if not (args.write or args.check):
        print(block)
        return 0
    doc = DOC.read_text()
    start, end = doc.index(START), doc.index(END) + len(END)
    if args.check:
        if doc[start:end] != block:
            print("docs/architecture.md's figures are stale; run: python scripts/architecture_figures.py --write\n")
            print(block)
            return 1
        return 0
    DOC.write_text(doc[:start] + block + doc[end:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
