"""Salvage: read what can be read from a damaged session file, and say what was skipped.

Only used when asked for (``JsonlSessionStorage.open(path, salvage=True)``), which opens
the file read-only. Every line is fully decoded, so a line is kept only if it is entirely
sound: valid JSON, a good envelope, a known parent (a line whose parent was skipped is
skipped too), a new id, and a body the codec accepts. Kept entries are numbered again
from version 2, so the session they form is consistent; ``skipped`` lists every other line
as ``(line number, reason)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from sessiontree.adapters import codec as codec_module
from sessiontree.adapters.chain import strip as strip_chain
from sessiontree.adapters.jsonl_scan import ScanContext, envelope_problem, read_header, tree_problem
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted


def salvage_entries(lines: Sequence[bytes], ctx: ScanContext) -> tuple[list[Any], list[tuple[int, str]]]:
    """Decoded entries of ``lines[1:]`` that are sound, and the skipped lines with reasons."""
    parent_key = ctx.codec.dialect.parent_key
    ids: set[str] = set()
    kept: list[Any] = []
    skipped: list[tuple[int, str]] = []
    for index in range(1, len(lines)):
        lineno = index + 1
        problem = codec_module.line_problem(lines[index], duplicates=ctx.codec.dialect.name == "native")
        if problem is not None:
            skipped.append((lineno, problem))
            continue
        try:
            obj = orjson.loads(strip_chain(lines[index]))
        except orjson.JSONDecodeError as exc:
            skipped.append((lineno, f"invalid JSON ({exc})"))
            continue
        problem = envelope_problem(obj, parent_key) or tree_problem(obj, parent_key, ids)
        if problem is not None:
            skipped.append((lineno, problem))
            continue
        try:
            entry = ctx.codec.decode_entry(obj, ctx.session_id, len(kept) + 2)
        except SessionError as exc:
            skipped.append((lineno, exc.message))
            continue
        ids.add(entry.id)
        kept.append(entry)
    return kept, skipped


def salvage_log(lines: Sequence[bytes], location: str) -> tuple[SessionStarted, list[Any], list[tuple[int, str]]]:
    """What salvage mode reads from a whole log given as lines (any backend): the header,
    the sound entries and the skipped lines. A header that cannot be read is an error."""
    if not lines:
        raise SessionError("corrupt", f"{location}: no session header")
    header, codec = read_header(strip_chain(lines[0]), location)
    entries, skipped = salvage_entries(lines, ScanContext(location, header.originator_id, codec))
    return header, entries, skipped
