"""Decompression bombs given as a pruned session's archive (issue 32, item 8; docs/reliability.md): the archive is
expanded a chunk at a time and every line is checked as it comes out (the line limit, an entry's envelope, ids
unique), so a bomb stops at its first line that cannot be a session's, in bounded time and memory."""

from __future__ import annotations

import time
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import sessiontree_testkit as kit

from sessiontree import JsonlSessionStorage, Session, SessionError, open_session, verify
from sessiontree.wire import jsontext

BOMB = 256 << 20  # bytes it expands to


def _header(tmp_path: Path) -> bytes:
    path = tmp_path / "s.jsonl"
    session = Session(JsonlSessionStorage.create(path, cwd="/p"))
    session.append_message(kit.user("hello"))
    session.close()
    return path.read_bytes()


def _bomb(path: Path, start: bytes, unit: bytes, total: int) -> Path:
    """A gzip file holding ``start`` then ``unit`` repeated to about ``total`` bytes (compressed as it is made)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [packer.compress(start)]
    block = unit * max(1, (1 << 20) // len(unit))
    for _ in range(total // len(block)):
        parts.append(packer.compress(block))
    parts.append(packer.flush())
    path.write_bytes(b"".join(parts))
    return path


def _measured(call: Callable[[], Any]) -> tuple[Any, int, float]:
    tracemalloc.start()
    began = time.monotonic()
    try:
        try:
            value: Any = call()
        except SessionError as exc:
            value = exc
        return value, tracemalloc.get_traced_memory()[1], time.monotonic() - began
    finally:
        tracemalloc.stop()


def _repeated_entry(log: bytes) -> bytes:
    last = orjson.loads(log.splitlines()[-1])
    last.pop("chain", None)
    return orjson.dumps(last) + b"\n"


@pytest.mark.parametrize("kind", ["empty lines", "empty objects", "one entry repeated"])
def test_an_archive_bomb_stops_at_its_first_impossible_line(tmp_path: Path, kind: str) -> None:
    """256 MB of ``\\n``, of ``{}\\n``, or of one entry line repeated (archives of 256 KB to 1 MB): ``verify`` names the
    line and ``open`` is ``corrupt``, each within seconds and 40 MB (before: a 65 KB bomb took 641 MB and over 60 s
    to verify, a 1.5 MB one 14 GB)."""
    log = _header(tmp_path)
    unit = {"empty lines": b"\n", "empty objects": b"{}\n", "one entry repeated": _repeated_entry(log)}[kind]
    path = _bomb(tmp_path / "bomb.jsonl.gz", log, unit, BOMB)
    assert path.stat().st_size < 2 << 20
    report, peak, took = _measured(lambda: verify(path))
    bad = len(log.splitlines()) + 1
    assert not report.ok and report.first_bad_line == bad, report.problems
    assert "not read further" in report.problems[0].message
    assert peak < 40 << 20 and took < 10, (peak, took)
    opened, peak, took = _measured(lambda: open_session(path))
    assert isinstance(opened, SessionError) and opened.code == "corrupt" and opened.line == bad
    assert peak < 40 << 20 and took < 10, (peak, took)


def test_a_line_over_the_limit_stops_the_expansion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line longer than the line limit (1 MB here) is refused as soon as the expansion passes the limit, not after
    the whole 64 MB line is expanded."""
    monkeypatch.setattr(jsontext, "MAX_LINE_BYTES", 1 << 20)
    log = _header(tmp_path)
    path = _bomb(tmp_path / "long.jsonl.gz", log + b'{"type":"custom","data":"', b"a", 64 << 20)
    report, peak, _ = _measured(lambda: verify(path))
    assert report.first_bad_line == len(log.splitlines()) + 1 and "line limit" in report.problems[0].message
    assert peak < 16 << 20, peak
