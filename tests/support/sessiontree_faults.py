"""Helpers for the fault-injection tests in ``tests/reliability`` (docs/reliability.md).

Loaded like ``sessiontree_testkit`` (a plain module on ``sys.path``). Child processes are
made with ``os.fork`` so they start in milliseconds; a child reports to its parent over a
pipe, one line per acknowledged append, and never returns into pytest. ``record`` appends a
result row to the file named by ``SESSIONTREE_RELIABILITY_LOG`` (when set), from which the
tables in docs/reliability.md are written.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from sessiontree import JsonlSessionStorage, Session

LOG_ENV = "SESSIONTREE_RELIABILITY_LOG"


def fork(work: Callable[[int], None]) -> tuple[int, int]:
    """Run ``work(write_fd)`` in a child process; return (pid, read end of its pipe)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        status = 0
        try:
            os.close(read_fd)
            work(write_fd)
        except BaseException as exc:
            try:
                os.write(write_fd, f"ERROR {type(exc).__name__}: {exc}\n".encode())
            except OSError:
                pass
            status = 1
        finally:
            os._exit(status)
    os.close(write_fd)
    return pid, read_fd


def drain(read_fd: int) -> list[str]:
    """Every complete line the child wrote (a line cut by a kill is not an acknowledgement)."""
    chunks = []
    while chunk := os.read(read_fd, 1 << 16):
        chunks.append(chunk)
    os.close(read_fd)
    data = b"".join(chunks)
    return data[: data.rfind(b"\n") + 1].decode().splitlines()


def wait_ok(pid: int, lines: list[str]) -> None:
    """Wait for a child that should finish by itself; fail with what it reported if it did not."""
    status = os.waitpid(pid, 0)[1]
    errors = [line for line in lines if line.startswith("ERROR")]
    assert status == 0 and not errors, errors[-1:] or f"exit status {status}"


def reopen(path: Path) -> Session:
    """The session in a file, without the torn-line warning (the tests count those themselves)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Session(JsonlSessionStorage.open(path))


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.001)


def record(test: str, **fields: Any) -> None:
    """Append one result row for docs/reliability.md (only when the log variable is set)."""
    where = os.environ.get(LOG_ENV)
    if where:
        with open(where, "ab") as handle:
            handle.write(orjson.dumps({"test": test, **fields}) + b"\n")


def ids_in_lines(path: Path) -> list[str]:
    """The entry ids of every complete line of a session file, in order (header excluded)."""
    data = path.read_bytes()
    lines = data[: data.rfind(b"\n")].split(b"\n")[1:]
    return [orjson.loads(line)["id"] for line in lines]
