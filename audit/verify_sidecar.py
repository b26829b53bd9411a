"""How verify checks a session file's sidecar index (``jsonl_index.py``) against the file.

The index is a cache, never a source: an open uses it only when it matches the file's identity and digests, and then
reads no line it covers. So verify compares every line the index covers with what the index says of it (where it
starts, its type, id and parent), whenever the index is one an open would use. A difference is a problem: the index
was damaged or forged (and re-sealed); deleting it is always safe.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import msgspec

from sessiontree.audit.verify_report import VerifyReport
from sessiontree.storage import jsonl_index
from sessiontree.storage.mapped import MappedLines
from sessiontree.wire.pi_names import PARENT_KEY as PI_PARENT_KEY
from sessiontree.wire.schema import NATIVE, envelope_decoder


def check_sidecar(path: Any, lines: Sequence[bytes], report: VerifyReport) -> None:
    """Report where the index an open of ``path`` would use disagrees with the file's ``lines``."""
    where = jsonl_index.sidecar_path(path)
    index = jsonl_index.read(where) if where is not None else None
    if index is None or index.dialect != report.dialect or not _in_use(path, index, lines):
        return
    found = _disagreement(lines, index)
    if found is not None:
        line, what = found
        report.problem(line, f"the sidecar index {where} disagrees with the file here ({what}): it was damaged or "
                       "forged; an open stops at such a line and removes it, and deleting it is always safe")


def _in_use(path: Any, index: jsonl_index.SidecarIndex, lines: Sequence[bytes]) -> bool:
    """Would an open use this index for the file (as ``jsonl_index._from_index`` decides: its identity, its size
    and time, the digests of its header and last covered line)?"""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    if ((st.st_dev, st.st_ino) != (index.device, index.inode) or index.size > st.st_size
            or (index.size == st.st_size and st.st_mtime_ns != index.mtime_ns) or index.lines > len(lines)):
        return False
    return (jsonl_index.line_digest(lines[0] + b"\n") == index.header_digest
            and jsonl_index.line_digest(lines[index.lines - 1] + b"\n") == index.last_digest)


def _disagreement(lines: Sequence[bytes], index: jsonl_index.SidecarIndex) -> tuple[int, str] | None:
    """The first line the index says something else of, and what; None when it agrees throughout."""
    offsets = lines.offsets if isinstance(lines, MappedLines) else jsonl_index.offsets_of(lines)
    for number in range(index.lines + 1):
        if offsets[number] != index.offsets[number]:
            return number + 1, f"line {number + 1} starts at byte {offsets[number]}, not {index.offsets[number]}"
    decode = envelope_decoder(PI_PARENT_KEY if index.dialect == "pi" else NATIVE.parent_key).decode
    markers = set(index.markers)
    types, ids, parents, orphans = index.types, index.ids, index.parents, index.orphans
    for pos in range(index.lines - 1):
        number = pos + 2
        try:
            head = decode(lines[pos + 1])
        except (msgspec.DecodeError, RecursionError):
            return number, "the line has no entry envelope"
        if head.id != ids[pos]:
            return number, f"entry {head.id!r}, not {ids[pos]!r}"
        if pos in markers:  # a pi leaf marker: read as a leaf entry whose parent is the leaf it moved from
            if head.type != "custom":
                return number, f"a {head.type!r} entry, not a leaf marker"
            continue
        parent = ids[parents[pos]] if parents[pos] >= 0 else orphans.get(pos)
        if head.type != types[pos]:
            return number, f"type {head.type!r}, not {types[pos]!r}"
        if head.parent != parent:
            return number, f"parent {head.parent!r}, not {parent!r}"
    return None
