"""Shared by the verify tests (tests/audit/test_verify*.py): a chained session file, its lines, and what an
attacker who knows the format does after editing it."""

from __future__ import annotations

from pathlib import Path

import sessiontree_testkit as kit

from sessiontree import JsonlSessionStorage
from sessiontree.audit import chain

KEY = b"0123456789abcdef0123456789abcdef"


def make_file(folder: Path, turns: int = 4) -> Path:
    """A chained session file with a few turns, a label and a leaf move."""
    path = folder / "s.jsonl"
    session = kit.open_session(JsonlSessionStorage.create(path, cwd="/p", session_id=kit.SESSION_ID))
    first = session.append_message(kit.user("question 0"))
    session.append_message(kit.assistant("answer 0"))
    for n in range(1, turns):
        session.append_message(kit.user(f"question {n}"))
        session.append_message(kit.assistant(f"answer {n}"))
    session.append_label_change(first, "start")
    session.move_to(first, {"summary": "back to the start"})
    session.close()
    return path


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes()[:-1].split(b"\n")


def write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def reseal(lines: list[bytes]) -> list[bytes]:
    """What an attacker who knows the format does after editing: recompute every digest."""
    return chain.seal_lines([chain.strip(line) for line in lines])[0]


def altered(lines: list[bytes]) -> tuple[list[bytes], int]:
    """One message edited in place (line 4), with the line it must be named at."""
    out = list(lines)
    out[3] = out[3].replace(b"question 1", b"question 9")
    assert out[3] != lines[3]
    return out, 4
