"""A library leaves its host's process-wide state alone: the cyclic collector's switch, thresholds and frozen objects
(``gc.freeze``, as prefork servers use it) are the same after opening, reading, appending and searching sessions (issue 33, item 4)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sessiontree_testkit as kit

from sessiontree import AssistantMessage, JsonlSessionStorage, Session, TextContent, UserMessage, open_repo
from sessiontree.pi.pi_convert import export_pi

ENTRIES = 600  # more than a batch of any bulk path (scan, index, decode)


def host_state() -> tuple[bool, tuple[int, int, int]]:
    return gc.isenabled(), gc.get_threshold()


def still_frozen(objects: list[Any]) -> bool:
    """Are the host's frozen objects still out of the collector's generations? (``gc.get_freeze_count()`` alone also
    falls when a frozen object is freed, which is no one's doing.)"""
    ids = {id(o) for o in objects}
    return not any(id(o) in ids for o in gc.get_objects())


@pytest.fixture
def prefork_host() -> Iterator[None]:
    """A host as a prefork server sets itself up: its objects frozen, its own thresholds."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(1234, 11, 12)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _folder(tmp_path: Path) -> tuple[Path, str]:
    folder = tmp_path / "sessions"
    with open_repo(folder) as repo:
        session = repo.create(cwd="/w")
        for i in range(ENTRIES // 2):
            session.append_message(UserMessage(f"question {i} about zebras"))
            session.append_message(AssistantMessage([TextContent(f"answer {i}")], provider="p", model="m"))
        sid = session.id
        session.close()
    return folder, sid


def _unchanged(action: Callable[[], Any]) -> None:
    objects = [[i] for i in range(1000)]  # the host's own, frozen with everything it has made so far
    gc.freeze()
    before, frozen = host_state(), gc.get_freeze_count()
    action()
    assert host_state() == before
    assert still_frozen(objects), f"the host froze {frozen} objects; {gc.get_freeze_count()} are frozen now"


def test_opening_reading_appending_and_searching_leave_the_collector_alone(tmp_path: Path, prefork_host: None) -> None:
    """Every everyday operation, cold (no sidecar index) and warm, native and pi files: the host's collector state holds."""
    folder, sid = _folder(tmp_path)
    native = next(folder.glob("*.jsonl"))
    pi_file = tmp_path / "pi.jsonl"
    export_pi(native, pi_file)

    def read(path: Path) -> None:
        session = Session(JsonlSessionStorage.open(path))
        assert len(session.build_context().messages) == ENTRIES
        assert len(session.get_entries()) == ENTRIES
        session.close()

    def append() -> None:
        with open_repo(folder) as repo:
            session = repo.open(sid)
            session.append_message(UserMessage("one more"))
            assert kit.said(session.build_context().messages)[-1] == "user:one more"
            session.close()

    def search() -> None:
        with open_repo(folder) as repo:
            assert repo.search("zebras", limit=5)
            assert repo.search("zebras", limit=5)  # warm: a stat per file, then the index

    for path in (native, pi_file):
        _unchanged(lambda path=path: read(path))  # cold: no sidecar index yet
        _unchanged(lambda path=path: read(path))  # warm: through the index the first open wrote
    _unchanged(append)
    _unchanged(search)


def test_a_host_that_turned_the_collector_off_keeps_it_off(tmp_path: Path) -> None:
    """A host that disabled the collector finds it disabled after a bulk read."""
    folder, _sid = _folder(tmp_path)
    native = next(folder.glob("*.jsonl"))
    gc.disable()
    try:
        session = Session(JsonlSessionStorage.open(native))
        session.build_context()
        session.close()
        assert not gc.isenabled()
    finally:
        gc.enable()


CTYPES_CHECK = """
import sys, tempfile
from sessiontree import JsonlSessionStorage, Session, UserMessage, open_repo
from sessiontree.pi.pi_convert import export_pi
folder = tempfile.mkdtemp()
with open_repo(folder) as repo:
    session = repo.create(cwd="/w")
    for i in range(50):
        session.append_message(UserMessage(f"zebra {i}"))
    path = session.storage.path
    session.close()
    export_pi(path, folder + "/pi.jsonl.out")
    for file in (path, folder + "/pi.jsonl.out"):
        for _ in range(2):
            s = Session(JsonlSessionStorage.open(file)); s.build_context(); s.get_entries(); s.close()
    assert repo.search("zebra") and repo.search("zebra") and repo.list()
print(sorted(m for m in sys.modules if m == "ctypes" or m.startswith("ctypes.")))
"""


def test_no_foreign_function_calls(tmp_path: Path) -> None:
    """Opening (cold and warm), reading, appending, listing and searching load no ``ctypes``: nothing reaches into the
    C library behind the interpreter's back (the allocator, inotify)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", CTYPES_CHECK], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "[]"


def test_the_library_makes_no_collector_calls() -> None:
    """No module of the library imports ``gc`` (or ``ctypes``): the host's collector is the host's (issue 33, item 4)."""
    import ast

    root = Path(__file__).resolve().parents[2]
    folders = [p for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists() and p.name != "tests"]
    found = []
    for folder in folders:
        for path in folder.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                found += [f"{path.relative_to(root)}: {n}" for n in names if n.split(".")[0] in ("gc", "ctypes")]
    assert folders and found == []
