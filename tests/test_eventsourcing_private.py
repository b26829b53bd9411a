"""eventsourcing's public API only (issue 34): the library uses no ``._name`` of eventsourcing. Where its public API
cannot do what we need (a row written in a transaction that also writes other rows), we own the SQL: see
docs/architecture.md, "SQL we own"."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import eventsourcing

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = [p for p in sorted(ROOT.rglob("*.py")) if p.relative_to(ROOT).parts[0] not in {".venv", "tests", "benchmarks",
                                                                                         "scripts"}]
MEMORY_PATH = {"_database_lock", "_stored_events", "_stored_events_index", "_listeners", "_max_tracking_ids"}


def _defined(tree: ast.AST) -> set[str]:
    """Names a module defines itself: functions, classes and attributes it assigns (an annotation alone is no value)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def eventsourcing_private_names() -> set[str]:
    names = set()
    for path in Path(eventsourcing.__file__).parent.rglob("*.py"):
        if "tests" in path.parts:
            continue
        names |= {n for n in _defined(ast.parse(path.read_text())) if n.startswith("_") and not n.startswith("__")}
    return names


def private_uses() -> Counter[tuple[str, str]]:
    """Attribute accesses and strings (for getattr) naming a private name of eventsourcing the library never defines."""
    trees = {p.relative_to(ROOT).as_posix(): ast.parse(p.read_text()) for p in LIBRARY}
    ours = set().union(*(_defined(tree) for tree in trees.values()))
    theirs = eventsourcing_private_names() - ours
    uses: Counter[tuple[str, str]] = Counter()
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in theirs:
                uses[module, node.attr] += 1
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in theirs:
                uses[module, node.value] += 1
    return uses


def test_the_library_uses_no_private_name_of_eventsourcing():
    """No attribute access, nor string for getattr, names a private name of eventsourcing (issue 34, item 3)."""
    assert dict(private_uses()) == {}


def test_the_scan_finds_a_private_use():
    """The scan is not blind: a module reaching into POPO's lock or a recorder's insert is reported."""
    theirs = eventsourcing_private_names()
    assert {"_database_lock", "_stored_events_index", "_insert_events", "_insert_stored_events"} <= theirs
    tree = ast.parse("def f(r):\n    with r._database_lock:\n        r._insert_events(None, [])\n")
    found = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in theirs}
    assert found == {"_database_lock", "_insert_events"}


def test_the_memory_path_names_no_popo_internals():
    """The memory, popo: and archive stores run on our recorder (memory_recorder.py): POPO's internals appear nowhere,
    not even defined by us under the same name."""
    text = {p.relative_to(ROOT).as_posix(): p.read_text() for p in LIBRARY}
    assert [(m, n) for m, t in text.items() for n in MEMORY_PATH if re.search(rf"\b{n}\b", t)] == []
    assert [m for m, t in text.items() if "eventsourcing.popo import" in t and "POPOFactory" not in t] == []
