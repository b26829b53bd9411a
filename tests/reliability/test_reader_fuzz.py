"""A fuzzer over the readers: real session files (the demo session, its pi export, pi's own
fixtures when present), damaged by flipped bytes, cut, swapped and duplicated lines, garbage
and truncation. Reading raises nothing but ``SessionError`` and never hangs; salvage keeps
every intact line before the damage; verify names the first damaged line of a chained file.

``SESSIONTREE_FUZZ_EXAMPLES`` raises the number of examples (docs/reliability.md has a long run).
"""

from __future__ import annotations

import os
import shutil
import signal
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import sessiontree_faults as faults
from eventsourcing.persistence import StoredEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import InMemorySessionStorage, JsonlSessionStorage, Session, SessionError, verify
from sessiontree.cli.demo import DemoClock, build_demo, demo_ids
from sessiontree.content.blob_stores import FOLDER, FolderBlobs
from sessiontree.pi.pi_convert import export_pi
from sessiontree.storage.files import is_whole_line
from sessiontree.storage.memory_recorder import MemoryRecorder

EXAMPLES = int(os.environ.get("SESSIONTREE_FUZZ_EXAMPLES", "150"))
WATCHDOG_SECONDS = 20
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
OUTCOMES: Counter[str] = Counter()


class Hung(Exception):
    """The watchdog fired: a reader ran for longer than any sane read of these files takes."""


@contextmanager
def watchdog(seconds: int = WATCHDOG_SECONDS) -> Iterator[None]:
    def fire(signum: int, frame: Any) -> None:
        raise Hung(f"still reading after {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


class Sources(dict):  # type: ignore[type-arg]
    """The source files by name (a short repr keeps Hypothesis' failure reports readable), and the blob folder of the
    native one (content kept out of line: the damaged copies read it too)."""

    blobs: Path

    def __repr__(self) -> str:
        return f"<{len(self)} source files: {', '.join(self)}>"


@pytest.fixture(scope="module")
def sources(tmp_path_factory: Any) -> dict[str, bytes]:
    """Real files: the demo session (native, chained), its pi export, and pi's own fixtures."""
    folder = tmp_path_factory.mktemp("sources")
    clock = DemoClock(datetime(2026, 11, 29, 9, 0, tzinfo=UTC))
    session = Session(JsonlSessionStorage.create(folder / "demo.jsonl", cwd="/src/cachelib"), clock=clock, id_generator=demo_ids())
    build_demo(session, clock)
    session.close()
    export_pi(folder / "demo.jsonl", folder / "demo-pi.jsonl")
    out = Sources({"native demo": (folder / "demo.jsonl").read_bytes(), "pi export": (folder / "demo-pi.jsonl").read_bytes()})
    out.blobs = folder / FOLDER
    shared = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "pi"
    for path in sorted(shared.glob("*.jsonl")) if shared.is_dir() else []:
        out[f"pi fixture {path.name}"] = path.read_bytes()
    return out


@pytest.fixture(scope="module", autouse=True)
def report_outcomes() -> Iterator[None]:
    yield
    if OUTCOMES:
        faults.record("reader_fuzz", examples=EXAMPLES, **dict(sorted(OUTCOMES.items())))


# -- damage -------------------------------------------------------------------------------------


@st.composite
def damaged(draw: Any, data: bytes) -> tuple[bytes, list[str]]:
    """``data`` with one to three kinds of damage applied; also says what was done."""
    lines = data.split(b"\n")[:-1]
    done = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "cut", "swap", "duplicate", "garbage", "split", "truncate"]))
        k = draw(st.integers(0, max(0, len(lines) - 1)))
        if kind == "flip" and lines[k]:
            line = bytearray(lines[k])
            line[draw(st.integers(0, len(line) - 1))] ^= draw(st.integers(1, 255))
            lines[k] = bytes(line)
        elif kind == "cut" and len(lines) > 1:
            del lines[k]
        elif kind == "swap" and k + 1 < len(lines):
            lines[k], lines[k + 1] = lines[k + 1], lines[k]
        elif kind == "duplicate":
            lines.insert(k, lines[k])
        elif kind == "garbage":
            lines.insert(k, draw(st.binary(max_size=200) | st.sampled_from([b"{}", b"[]", b"null", b'{"type":"session"}', b"{" * 3000])))
        elif kind == "split" and lines[k]:
            at = draw(st.integers(0, len(lines[k])))
            lines[k : k + 1] = [lines[k][:at], lines[k][at:]]
        done.append(kind)
    out = b"".join(line + b"\n" for line in lines)
    if "truncate" in done:
        out = out[: draw(st.integers(0, len(out)))]
    return out, done


def complete_lines(data: bytes) -> list[bytes]:
    """The lines a reader takes as complete (as ``verify`` does: a whole unterminated last one too)."""
    lines = data.split(b"\n")
    tail = lines.pop()
    if tail and is_whole_line(tail):
        lines.append(tail)
    return lines


def first_difference(original: list[bytes], damaged_lines: list[bytes]) -> int | None:
    """0-based index of the first line that differs; None if ``damaged_lines`` is a prefix of the original."""
    for index, line in enumerate(damaged_lines):
        if index >= len(original) or line != original[index]:
            return index
    return None


def read_everything(path: Path) -> int:
    """Open, replay and query the whole session the way an application would."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session(JsonlSessionStorage.open(path))
    try:
        entries = session.get_entries()
        session.build_context()
        session.get_session_stats()
        session.get_tree()
        for entry in entries:
            session.get_branch(entry.id) if entry.type != "leaf" else None
        if entries:
            session.at(max(1, session.version // 2)).build_context()
        return len(entries)
    finally:
        session.close()


# -- the properties -----------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_damaged_files_raise_only_session_errors_and_salvage_keeps_the_intact_prefix(
    sources: dict[str, bytes], tmp_path_factory: Any, data: Any
) -> None:
    """Strict reading, salvage and verify of a damaged file: only SessionError, no hang; salvage
    keeps every entry before the first damaged line; verify names that line in a chained file."""
    name = data.draw(st.sampled_from(sorted(sources)), label="source")
    original = sources[name]
    mutated, kinds = data.draw(damaged(original), label="damage")
    path = tmp_path_factory.mktemp("fuzz") / "s.jsonl"
    path.write_bytes(mutated)
    if sources.blobs.is_dir():  # type: ignore[attr-defined]
        shutil.copytree(sources.blobs, path.parent / FOLDER)  # type: ignore[attr-defined]
    before = complete_lines(original)
    after = complete_lines(mutated)
    first_bad = first_difference(before, after)

    with watchdog():
        try:
            read_everything(path)
            OUTCOMES["strict read ok"] += 1
        except SessionError as exc:
            OUTCOMES[f"strict read SessionError {exc.code}"] += 1

        try:
            salvaged = JsonlSessionStorage.open(path, salvage=True)
        except SessionError as exc:
            OUTCOMES[f"salvage refused ({exc.code})"] += 1
            assert first_bad == 0 or (first_bad is None and not after), (exc, kinds)
            salvaged = None
        if salvaged is not None and first_bad != 0:
            kept = [e.id for e in salvaged.load()[1]]
            intact = len(after) - 1 if first_bad is None else first_bad - 1  # entry lines before the damage
            original_ids = [orjson.loads(line)["id"] for line in before[1 : 1 + intact]]
            assert kept[:intact] == original_ids, (kinds, first_bad)
            OUTCOMES["salvage kept every intact line before the damage"] += 1

        report = verify(path)
    if name == "native demo":
        if not after:
            assert not report.ok and report.first_bad_line == 1
        elif first_bad is None:
            assert report.ok, (report.problems, kinds)
            OUTCOMES["verify ok (only the tail was cut)"] += 1
        else:
            assert not report.ok and report.first_bad_line == first_bad + 1, (report.problems, kinds, first_bad)
            OUTCOMES["verify named the first damaged line"] += 1


@FUZZ
@given(data=st.data())
def test_damaged_database_rows_raise_only_session_errors(sources: dict[str, bytes], data: Any) -> None:
    """The same damage in stored events (one row a line) gives SessionError or a session, never
    another exception; verify of the rows names the first damaged version."""
    original = sources["native demo"]
    mutated, kinds = data.draw(damaged(original), label="damage")
    lines = [line for line in complete_lines(mutated) if b"\n" not in line]
    if not lines:
        return
    recorder = MemoryRecorder()
    sid = "fuzz-session"
    recorder.insert_events([StoredEvent(sid, n, "sessiontree:any", line) for n, line in enumerate(lines, 1)])
    storage = InMemorySessionStorage.attach(recorder, sid)
    FolderBlobs(sources.blobs).copy_to(storage.blobs, FolderBlobs(sources.blobs).digests())  # type: ignore[attr-defined]
    with watchdog():
        try:
            session = Session(storage)
            session.get_entries()
            session.build_context()
            session.get_session_stats()
            OUTCOMES["rows: read ok"] += 1
        except SessionError as exc:
            OUTCOMES[f"rows: SessionError {exc.code}"] += 1
        report = verify(storage)
    first_bad = first_difference(complete_lines(original), lines)
    if first_bad is not None:
        assert not report.ok and report.first_bad_line == first_bad + 1, (report.problems, kinds)
