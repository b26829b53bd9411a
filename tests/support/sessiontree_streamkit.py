"""Shared by the streaming tests (issue 19, part 4): random session files, damage done to them, and the whole-read
readings the streamed ones must equal (what verify, export and replay did before they streamed).

Loaded like ``sessiontree_testkit`` (see its docstring).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import sessiontree_strategies as strat
import sessiontree_testkit as kit
from hypothesis import strategies as st

from sessiontree import JsonlSessionStorage, SessionError
from sessiontree.audit.chain import seal_lines
from sessiontree.pi.pi_convert import _convert_entry
from sessiontree.projections.context import entry_to_messages
from sessiontree.wire.jsontext import duplicate_key

REBUILDS = frozenset({"leaf", "compaction"})


def pi_safe(ops: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The operations a pi file takes (it refuses a compaction with a retained tail)."""
    return [op for op in ops if not (op[0] == "compaction" and op[2] == "tail")]


def write_session(path: Path, ops: list[tuple[Any, ...]], dialect: str) -> Path:
    """A session file made by ``ops`` in ``dialect`` (``native`` or ``pi``), deterministic ids and clock."""
    if dialect == "pi":
        from sessiontree.pi.pi_storage import PiSessionStorage

        storage: Any = PiSessionStorage.create(path, cwd="/p", session_id=kit.SESSION_ID)
        ops = pi_safe(ops)
    else:
        storage = JsonlSessionStorage.create(path, cwd="/p", session_id=kit.SESSION_ID)
    session = kit.open_session(storage)
    for op in ops:
        strat.apply_operation(session, op)
    session.close()
    return path


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


@st.composite
def damaged(draw: Any, lines: list[bytes]) -> tuple[bytes, str]:
    """The bytes of a file made from ``lines`` with one kind of damage (or none), and what was done."""
    out = list(lines)
    kind = draw(st.sampled_from(["none", "flip", "cut", "junk", "drop", "repeat", "key", "torn"]), label="damage")
    k = draw(st.integers(0, len(out) - 1), label="line")
    if kind == "flip" and out[k]:
        line = bytearray(out[k])
        line[draw(st.integers(0, len(line) - 1))] ^= draw(st.integers(1, 255))
        out[k] = bytes(line).replace(b"\n", b" ")
    elif kind == "cut":
        out[k] = out[k][: draw(st.integers(0, max(0, len(out[k]) - 1)))]
    elif kind == "junk":
        out.insert(k, draw(st.binary(max_size=20)).replace(b"\n", b""))
    elif kind == "drop" and k > 0:
        del out[k]
    elif kind == "repeat":
        out.insert(k, out[k])
    elif kind == "key" and out[k].startswith(b'{"type":'):
        out[k] = b'{"type":"x",' + out[k][1:]  # a repeated key (pi reads its last value)
    data = b"".join(line + b"\n" for line in out)
    if kind == "torn":
        data += b'{"type":"message","id":"torn'
    return data, kind


def salvage_reading(path: Path, lines: list[bytes]) -> dict[str, Any]:
    """What verify reported for a pi file when it read it through salvage mode (every entry decoded and kept)."""
    problems: list[tuple[int | None, str]] = []
    entries = 0
    try:
        try:
            storage = JsonlSessionStorage.open(path, salvage=True)
        except SessionError as exc:
            if exc.code != "unsupported_version":
                raise
            storage = JsonlSessionStorage.open(path)
        try:
            entries = len(list(storage.load()[1]))
        finally:
            storage.close()
    except SessionError as exc:
        problems.append((exc.line, exc.message))
    else:
        problems += [(line, reason) for line, reason in storage.skipped if not reason.startswith("torn last line")]
    duplicates = [(n, f"key {duplicate_key(line)!r} appears twice in one object; its last value is read, as pi does")
                  for n, line in enumerate(lines, 1) if duplicate_key(line) is not None]
    return {"problems": sorted(problems, key=lambda p: (p[0] is None, p[0] or 0)), "entries": entries,
            "duplicates": duplicates}


def whole_conversion(src_path: Path, dst: Any) -> tuple[bytes, int]:
    """The bytes a conversion wrote when it read the whole session first (and the entries)."""
    source = JsonlSessionStorage.open(src_path)
    try:
        src = source.codec
        lines = [dst.encode_event(attrs.evolve(source.header, version=3))]
        lines += [dst.encode_event(_convert_entry(entry, src, dst)) for entry in source.load()[1]]
    finally:
        source.close()
    if dst.dialect.name == "native":
        lines = seal_lines(lines)[0]
    return b"".join(line + b"\n" for line in lines), len(lines) - 1


def common_prefix(a: list[Any], b: list[Any]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x is not y and x != y:
            break
        n += 1
    return n


def whole_steps(session: Any, start: int, end: int) -> list[tuple[Any, ...]]:
    """Replay's steps as it computed them holding every message (and every entry) of the context."""
    options = session.options
    out: list[tuple[Any, ...]] = []
    if start <= 1:
        out.append((1, session.header.originator_id, None, None, 0, [], 0))
        leaf, messages = None, []
    else:
        before_start = session.at(start - 1)
        leaf, messages = before_start.leaf_id, list(before_start.build_context().messages)
    entries = session.get_entries()
    for version in range(max(start, 2), end + 1):
        event, view = entries[version - 2], session.at(version)
        before, leaf = leaf, view.leaf_id
        if event.type not in REBUILDS and event.parent_id == before and options.extends_with(event):
            removed, added = 0, entry_to_messages(event, len(messages), [], options)
            messages.extend(added)
        else:
            new = list(view.build_context().messages)
            keep = common_prefix(messages, new)
            removed, added = len(messages) - keep, new[keep:]
            messages = new
        out.append((version, event.id, before, leaf, removed, [getattr(m, "role", "?") for m in added], len(messages)))
    return out
