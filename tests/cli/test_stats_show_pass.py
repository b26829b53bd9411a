"""``stats`` and ``show`` as one pass that keeps no entry (issue 19): byte for byte what the commands printed when they
read the whole session, on random sessions, damaged or not, read with or without ``--salvage``; a failure is the same
error."""

from __future__ import annotations

import argparse
import io
import sys
import warnings
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import sessiontree_strategies as strat
from sessiontree_statskit import old_cmd_show, old_cmd_stats
from sessiontree_streamkit import damaged, lines_of, write_session

from sessiontree import JsonlSessionStorage, Session, SessionError, streaming
from sessiontree.cli import app, cmd_inspect, output
from sessiontree.cli.treeview import FILTERS

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture])


def _run(argv: list[str]) -> tuple[int, bytes, str]:
    """The command line run in this process: status, stdout's bytes, stderr."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = io.StringIO()
    with mock.patch.object(sys, "stdout", out), mock.patch.object(sys, "stderr", err), \
            mock.patch.dict("os.environ", {"COLUMNS": "120"}):
        status = app.run(argv)
    output.JSON_ERRORS = False
    return status, out.buffer.getvalue(), err.getvalue()  # type: ignore[attr-defined]


def _both(argv: list[str], name: str, old: Any) -> None:
    new = _run(argv)
    event(f"status {new[0]}, {len(new[1]) // 100 * 100}+ bytes")
    with mock.patch.object(cmd_inspect, name, old):
        expected = _run(argv)
    assert new == expected


def _session_file(folder: Path, ops: list[tuple[Any, ...]], dialect: str, data: Any) -> Path:
    lines = lines_of(write_session(folder / "made.jsonl", ops, dialect))
    raw, _ = data.draw(damaged(lines))
    path = folder / "s.jsonl"
    path.write_bytes(raw)
    if data.draw(st.booleans(), label="indexed"):  # a first open writes the sidecar index, as the benchmarks do
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                Session(JsonlSessionStorage.open(path)).close()
            except SessionError:
                pass
    return path


@SETTINGS
@given(ops=strat.operations(), dialect=st.sampled_from(["native", "pi"]), salvage=st.booleans(), json=st.booleans(),
       data=st.data())
def test_stats_prints_what_the_whole_read_printed(tmp_path_factory: Any, ops: list[tuple[Any, ...]], dialect: str,
                                                  salvage: bool, json: bool, data: Any) -> None:
    path = _session_file(tmp_path_factory.mktemp("stats"), ops, dialect, data)
    _both(["stats", str(path), *(["--salvage"] if salvage else []), *(["--json"] if json else [])], "cmd_stats",
          old_cmd_stats)


@SETTINGS
@given(ops=strat.operations(), dialect=st.sampled_from(["native", "pi"]), salvage=st.booleans(), json=st.booleans(),
       mode=st.sampled_from(FILTERS), window=st.none() | st.integers(0, 6), depth=st.none() | st.integers(0, 2),
       chunk=st.integers(1, 4), data=st.data())
def test_show_prints_what_the_whole_read_printed(tmp_path_factory: Any, ops: list[tuple[Any, ...]], dialect: str,
                                                 salvage: bool, json: bool, mode: str, window: int | None,
                                                 depth: int | None, chunk: int, data: Any) -> None:
    """Also with ``--json`` rows written ``chunk`` at a time."""
    path = _session_file(tmp_path_factory.mktemp("show"), ops, dialect, data)
    argv = ["show", str(path), "--filter", mode, *(["--salvage"] if salvage else []), *(["--json"] if json else [])]
    argv += [*(["--window", str(window)] if window is not None else []), *(["--depth", str(depth)] if depth is not None else [])]
    with mock.patch.object(cmd_inspect, "JsonRows", partial(output.JsonRows, rows=chunk)):
        _both(argv, "cmd_show", old_cmd_show)


@pytest.mark.parametrize("rows,size", [(1, 1 << 20), (2, 1 << 20), (500, 1), (500, 4 << 20)])
def test_json_rows_are_written_as_print_json_writes_the_whole(rows: int, size: int) -> None:
    """Rows in chunks of any count or size give ``print_json``'s bytes, also for no rows and an empty head."""
    for head in ({"a": 1, "b": [1, {"c": "x\ny"}]}, {}):
        for count in (0, 1, 3):
            items = [{"n": n, "s": "é\n", "d": {"k": [n, None]}, 7: 1.5} for n in range(count)]
            out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
            with mock.patch.object(sys, "stdout", out):
                output.print_json({**head, "rows": items})
                whole = out.buffer.getvalue()  # type: ignore[attr-defined]
                writer = output.JsonRows(head, "rows", rows=rows, size=size)
                for item in items:
                    writer.add(item)
                writer.close()
                assert out.buffer.getvalue()[len(whole):] == whole  # type: ignore[attr-defined]


@pytest.mark.parametrize("dialect", ["native", "pi"])
def test_stats_and_show_keep_no_entry(tmp_path: Path, dialect: str) -> None:
    """After ``stats`` and ``show`` (``--filter no-tools`` looks at every message) of a mapped file, the log holds no
    entry but a pi leaf marker (its line reads as another entry)."""
    ops = [("user", "q"), ("assistant", "a", True, 10), ("tool_result", "r"), ("move", 0, None), ("user", "again"),
           ("label", 1, "good"), ("compaction", 0, "none", 5)]
    path = write_session(tmp_path / "s.jsonl", ops, dialect)
    Session(JsonlSessionStorage.open(path)).close()  # the index, so the next opens map the file
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    with Session(JsonlSessionStorage.open(path)) as session, mock.patch.object(sys, "stdout", out):
        assert streaming.stats(session).whole.entry_count == len(session)
        for json in (True, False):
            args = argparse.Namespace(json=json, filter="no-tools", window=None, depth=None, full=False)
            cmd_inspect.show_reader(session, args)
        assert all(item is None or item.type == "leaf" for item in session._agg.log._items)
