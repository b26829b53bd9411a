"""Where the command line writes: rich consoles, JSON on stdout, progress and errors on stderr."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

from sessiontree.wire.jsontext import dumps, pretty

if TYPE_CHECKING:  # rich is imported when a command prints for people: --json output never loads it
    from rich.console import Console

PROG = "sessiontree"
SHOW_AFTER = 1.0  # seconds of work before a progress bar appears


SALVAGE_HINT = "run it again with --salvage to read past the lines that cannot be read; the file is not changed"


class CliError(Exception):
    """A command-line failure that is not a ``SessionError`` (bad arguments, a missing feature, an ambiguous name);
    ``code`` is what ``--json`` reports (``usage`` unless said)."""

    def __init__(self, message: str, *, code: str = "usage") -> None:
        super().__init__(f"{code}: {message}" if code != "usage" else message)
        self.code = code
        self.message = message


@cache
def _console_class() -> type[Console]:
    from rich.console import Console

    class QuietPipeConsole(Console):
        """rich's console, but a closed pipe (``| head``) ends the command quietly with status 0."""

        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return QuietPipeConsole


PIPE_WIDTH = 10_000  # piped with no $COLUMNS: rows are printed whole (boxes cap their own width, views.PANEL_WIDTH)


def stdout() -> Console:
    """The console for results. ``highlight=False``: session text is shown as written. Piped, a row is not cut at
    rich's default 80 columns: the width is unbounded unless ``$COLUMNS`` sets one."""
    console = _console_class()(highlight=False, soft_wrap=False)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = PIPE_WIDTH
    return console


def stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def print_json(value: Any) -> None:
    """Pretty JSON on stdout (UTF-8, keys in insertion order, a final newline)."""
    sys.stdout.buffer.write(_dumps(value) + b"\n")
    sys.stdout.flush()


def _dumps(value: Any) -> bytes:
    return pretty(value, _default)


class JsonRows:
    """``print_json({**head, key: rows})`` made as the rows come, byte for byte, so a command holds a chunk of
    rows (``rows`` of them, or ``size`` bytes), never all of them. The rows wait in a spooled file (in memory up to
    ``size``, then on disk) and reach stdout at ``close``: an output that fails part way writes nothing, as a whole
    ``print_json`` did (a line found corrupt late in a long session must not leave half a document on stdout)."""

    def __init__(self, head: dict[str, Any], key: str, *, rows: int = 500, size: int = 4 << 20) -> None:
        import tempfile  # only commands that write rows pay for it

        self.out = tempfile.SpooledTemporaryFile(max_size=size)  # noqa: SIM115 (held across add calls, closed by close)
        self.head: bytes | None = (_dumps(head)[:-2] + b",\n  " if head else b"{\n  ") + _dumps(key) + b": ["
        self.rows: list[bytes] = []
        self.size, self.max_rows, self.max_size = 0, rows, size

    def add(self, row: Any) -> None:
        data = b"\n    " + _dumps(row).replace(b"\n", b"\n    ")  # JSON strings hold no raw newline
        self.rows.append(data)
        self.size += len(data)
        if len(self.rows) >= self.max_rows or self.size >= self.max_size:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.out.write((b"," if self.head is None else self.head) + b",".join(self.rows))
            self.head, self.rows, self.size = None, [], 0

    def close(self) -> None:
        empty = self.head is not None and not self.rows
        self.flush()
        self.out.write((self.head or b"") + b"]\n}\n" if empty else b"\n  ]\n}\n")
        self.out.seek(0)
        while chunk := self.out.read(1 << 20):
            sys.stdout.buffer.write(chunk)
        self.out.close()
        sys.stdout.buffer.flush()


def _default(value: Any) -> Any:
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    return str(value)


JSON_ERRORS = False  # set by ``--json``: errors go to stderr as JSON too


def error_line(message: str, code: str = "usage") -> None:
    """The one line a failing command prints on stderr: ``sessiontree: error: ...``, or with ``--json``
    ``{"error": {"code": ..., "message": ...}}`` (the message without its code prefix)."""
    text = " ".join(str(message).split()) or "unknown error"
    if JSON_ERRORS:
        text = text.removeprefix(f"{code}: ")
        sys.stderr.write(dumps({"error": {"code": code, "message": text}}).decode() + "\n")
    else:
        sys.stderr.write(f"{PROG}: error: {text}\n")
    sys.stderr.flush()


def warn(message: str) -> None:
    sys.stderr.write(f"{PROG}: warning: {message}\n")
    sys.stderr.flush()


def _no_progress(n: int = 1) -> None:
    """Progress on a console that is not a terminal: nothing shown."""


@contextmanager
def progress(description: str, total: int | None, *, delay: float | None = None) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr for long work: shown only when stderr is a terminal, never with ``--json``, and only
    once the work has taken ``delay`` seconds (default: ``$SESSIONTREE_PROGRESS_AFTER``, else 1; quick work shows
    nothing, and imports nothing of rich's).

    Yields ``advance(n)``. The bar is transient: it disappears when the work is done, so
    piped or redirected output stays clean.
    """
    if JSON_ERRORS or not sys.stderr.isatty():
        yield _no_progress
        return
    bar = _LateBar(description, total, time.monotonic() + (show_after() if delay is None else delay))
    try:
        yield bar.advance
    finally:
        bar.stop()


def show_after() -> float:
    """Seconds of work before a bar appears: ``$SESSIONTREE_PROGRESS_AFTER`` (0: at once), else SHOW_AFTER."""
    try:
        return max(0.0, float(os.environ.get("SESSIONTREE_PROGRESS_AFTER", SHOW_AFTER)))
    except ValueError:
        return SHOW_AFTER


class _LateBar:
    """rich's progress bar, started at the first ``advance`` after its start time."""

    def __init__(self, description: str, total: int | None, start: float) -> None:
        self.description, self.total, self.start = description, total, start
        self.done = 0
        self.bar: Any = None
        self.task: Any = None

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.bar is None:
            if time.monotonic() < self.start:
                return
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
            self.bar = Progress(*columns, console=stderr(), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.description, total=self.total, completed=self.done)
            return
        self.bar.advance(self.task, n)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
