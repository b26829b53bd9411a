"""Salvage: read what can be read from a damaged log, and say what was skipped.

Only used when asked for (``JsonlSessionStorage.open(path, salvage=True)``, which opens the
file read-only, or a copy or fork with ``salvage=True``). Every line is fully decoded, so a
line is kept only if it is entirely sound: safe to parse, valid JSON, a good envelope, a
known parent (a line whose parent was skipped is skipped too), a new id, and a body the
codec accepts. Kept entries are numbered again from version 2, so the session they form is
consistent; the skipped lines come with their reasons.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import Any

from sessiontree.audit.chain import strip as strip_chain
from sessiontree.content.blobs import MARKER, resolve
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry, SessionStarted
from sessiontree.storage.jsonl_scan import envelope_problem, read_header, tree_problem
from sessiontree.wire.codec import Codec
from sessiontree.wire.jsontext import line_problem, parse


def salvage_log(
    lines: Sequence[bytes], location: str, codec: Codec | None = None, blobs: Any = None,
) -> tuple[SessionStarted, list[Entry], list[tuple[int, str]]]:
    """The header, the sound entries and the skipped ``(line, reason)`` of a whole log given
    as lines (any backend; ``blobs``: the store its out-of-line content is read from). A header that cannot be
    read is an error."""
    if not lines:
        raise SessionError("corrupt", f"{location}: no session header")
    header, codec = read_header(strip_chain(lines[0]), location, codec)
    ids: set[str] = set()
    kept: list[Entry] = []
    skipped: list[tuple[int, str]] = []
    for number in range(2, len(lines) + 1):
        found = read_entry(lines[number - 1], codec, header.originator_id, len(kept) + 2, ids, blobs)
        if isinstance(found, str):
            skipped.append((number, found))
        else:
            ids.add(found.id)
            kept.append(found)
    return header, kept, skipped


def read_entry(
    line: bytes, codec: Codec, session_id: str, version: int, ids: Container[str], blobs: Any = None,
) -> Entry | str:
    """The entry on ``line`` as entry ``version`` if the line is entirely sound (see the module
    docstring; ``ids``: the ids of the entries before it), else the reason it is not. Out-of-line content is read
    from ``blobs``: a store, or a function from a reference to the string it stands for (verify's check)."""
    problem = line_problem(line, duplicates=codec.dialect.name == "native")
    if problem is not None:
        return problem
    try:
        obj = parse(strip_chain(line))
    except (ValueError, RecursionError) as exc:
        return f"invalid JSON ({exc})"
    parent_key = codec.dialect.parent_key
    problem = envelope_problem(obj, parent_key) or tree_problem(obj, parent_key, ids)
    if problem is not None:
        return problem
    if MARKER in line and codec.dialect.name == "native":
        try:
            resolve(obj, blobs)
        except SessionError as exc:
            return exc.message
    try:
        return codec.decode_entry(obj, session_id, version)
    except SessionError as exc:
        return exc.message
    except RecursionError:
        return "nested too deeply to decode"
