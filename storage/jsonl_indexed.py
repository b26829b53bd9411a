"""Loading a JSONL session through its sidecar index, with the file mapped.

With a sound index (``jsonl_index.py``) the storage maps the file and reads none of the lines the index covers: the
log is made from the index's envelopes and the loader slices each line from the mapping when it is first decoded,
so memory follows the entries used, not the bytes in the file. Lines appended since the index was written are read
and checked as a full scan checks them, and the index is extended. Without an index, or with one that does not match
the file in every respect checked, the file is scanned in full (the same checks, the same errors) and the index
written afresh.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from sessiontree.domain.errors import SessionError
from sessiontree.domain.log import EntryLog
from sessiontree.storage import jsonl_index
from sessiontree.storage.files import is_whole_line
from sessiontree.storage.jsonl_file import names
from sessiontree.storage.jsonl_index import SidecarIndex, line_digest, offsets_from_lengths, offsets_of
from sessiontree.storage.jsonl_scan import Envelopes, LineLoader, envelopes_of, utf8
from sessiontree.storage.mapped import FileView, MappedLines, map_file, whole_lines_end, windows
from sessiontree.wire import jsontext
from sessiontree.wire.schema import LEAF_TARGET, envelope_decoder

if TYPE_CHECKING:
    from sessiontree.storage.jsonl import JsonlSessionStorage


def load(storage: JsonlSessionStorage) -> tuple[Any, LineLoader, EntryLog]:
    """The file's lines, the loader and the checked, lazy log, through the index when it is sound."""
    if storage._file.fd >= 0 and not names(storage.path, storage._file.fd):
        raise SessionError("conflict", f"session {storage.session_id} at {storage.path} was rewritten since it was opened "
                           "(an erasure replaced the file): open it again")
    where = jsonl_index.sidecar_path(storage.path) if storage.indexable else None
    if where is not None:
        index = jsonl_index.read(where)
        if index is not None:
            found = _from_index(storage, index, where)
            if found is not None:
                return found
    scanned: tuple[Any, LineLoader, Envelopes | None] | None = scan_mapped(storage)
    if scanned is None:  # something unusual: the whole file read and checked line by line, naming the problem
        read = storage.read_lines(strict=True)
        scanned = read, storage._loader(read), None
    lines, loader, envelopes = scanned
    log = storage._scan(lines, loader, envelopes)
    if where is not None and not storage._file.needs_newline:
        offsets = lines.offsets if isinstance(lines, MappedLines) else offsets_of(lines)
        _write(storage, where, offsets, lines, log, sorted(loader.decoded))
    return lines, loader, log


def scan_mapped(storage: JsonlSessionStorage) -> tuple[MappedLines, LineLoader, Envelopes] | None:
    """Map the file and check its lines window by window, keeping each line's envelope and length but not its bytes
    (the pages read are handed back as the scan goes, so memory stays bounded whatever the file's size): the lines,
    their loader and their envelopes checked in bulk; None at anything a bulk check does not pass."""
    file = storage._file
    size = os.fstat(file.fd).st_size
    lines_end = whole_lines_end(file.fd, size)  # mapped no further: a torn tail is read plainly (a writer may cut it off)
    if not lines_end:
        return None
    mapped = map_file(file.fd, file.path, lines_end)
    if mapped is None:
        return None
    scanned = _scan_windows(mapped, lines_end, envelope_decoder(storage.codec.dialect.parent_key).decode)
    if scanned is None:
        return None
    lengths, heads, end = scanned
    tail = os.pread(file.fd, max(0, size - end), end)
    size = end + len(tail)
    whole = bool(tail) and is_whole_line(tail)
    try:
        if whole:
            heads.append(envelope_decoder(storage.codec.dialect.parent_key).decode(tail))
    except (msgspec.DecodeError, RecursionError):
        return None
    if not lengths or len(tail) > jsontext.MAX_LINE_BYTES or (whole and not utf8([tail])):
        return None
    found = envelopes_of(heads)
    if found is None:
        return None
    file.bytes_read += size
    file.observe_lines(0, size, len(lengths), tail)
    if tail and not whole:
        file.warn_torn(len(lengths) + 1, tail)
    lines = MappedLines(mapped, offsets_from_lengths(lengths), [tail] if whole else [])
    return lines, storage._loader(lines), found


def _scan_windows(mapped: FileView, size: int, envelope: Any) -> tuple[array[int], list[Any], int] | None:
    """Every newline-terminated line's length and envelope (the header's not decoded), and where the last ends."""
    lengths, heads = array("q"), list[Any]()
    end = 0
    for offset, batch in windows(mapped, size):
        if max(map(len, batch)) > jsontext.MAX_LINE_BYTES or (not all(map(bytes.isascii, batch)) and not utf8(batch)):
            return None
        try:
            heads.extend(map(envelope, batch[1:] if not lengths else batch))
        except (msgspec.DecodeError, RecursionError):
            return None
        lengths.extend(map(len, batch))
        end = offset + sum(map(len, batch)) + len(batch)
    return lengths, heads, end


def _write(storage: JsonlSessionStorage, where: str, offsets: Sequence[int], lines: Any, log: EntryLog,
           markers: list[int]) -> None:
    st = os.fstat(storage._file.fd)
    if st.st_size != offsets[-1]:  # the file moved on since it was read: the next open indexes it
        return
    types, ids, parents, orphans = log.envelopes()
    index = SidecarIndex(
        dialect=storage.codec.dialect.name, size=offsets[-1], device=st.st_dev, inode=st.st_ino, mtime_ns=st.st_mtime_ns,
        header_digest=line_digest(lines[0] + b"\n"), last_digest=line_digest(lines[-1] + b"\n"),
        offsets=array("q", offsets), types=list(types), ids=list(ids), parents=array("i", parents), markers=markers,
        orphans=dict(orphans),
    )
    jsonl_index.write(where, index)


def _from_index(storage: JsonlSessionStorage, index: SidecarIndex, where: str) -> tuple[MappedLines, LineLoader, EntryLog] | None:
    """The lines, loader and log from a sound index, the lines after it read and checked; None when it does not
    match the file (a full scan follows)."""
    file = storage._file
    st = os.fstat(file.fd)
    if (index.dialect != storage.codec.dialect.name or (st.st_dev, st.st_ino) != (index.device, index.inode)
            or st.st_size < index.size or (st.st_size == index.size and (st.st_mtime_ns != index.mtime_ns or not index.settled))):
        return None
    offsets = index.offsets
    mapped = map_file(file.fd, file.path, index.size)
    if mapped is None:
        return None
    if line_digest(mapped[: offsets[1]]) != index.header_digest or line_digest(mapped[offsets[-2] :]) != index.last_digest:
        return None
    held = _tail(storage, index)
    if held is None:
        return None
    lines = MappedLines(mapped, offsets, held)
    found = Envelopes(index.types, index.ids, list(index.parents), dict(zip(index.ids, range(len(index.ids)))))
    orphans = dict(index.orphans)
    if held and not _extend(lines, found, index.lines, storage):
        return None
    loader = storage._loader(lines)
    loader.expected = found.ids
    loader.expected_heads = (found.types, found.parents, orphans)
    if not storage._restore(lines, index.markers, loader):
        return None
    if file.torn:  # warned of only now: a failed extension scans the file again, which warns
        file.warn_torn(len(lines) + 1, file.torn)
    log = EntryLog.lazy(found.types, found.ids, found.parents, found.index, loader, orphans)
    if held:
        _write(storage, where, _extended(offsets, held), lines, log, index.markers)
    return lines, loader, log


def _tail(storage: JsonlSessionStorage, index: SidecarIndex) -> list[Any] | None:
    """The whole lines after the index's end (as a strict read takes them: a torn last line warned of), or None if
    one is over the line limit (the full scan names it)."""
    file = storage._file
    parts, tail, size = file.read_split(index.size)
    file.count = index.lines
    file.observe_lines(index.size, size, len(parts), tail)
    if any(len(part) > jsontext.MAX_LINE_BYTES for part in parts) or len(tail) > jsontext.MAX_LINE_BYTES:
        return None
    if tail and is_whole_line(tail):
        parts.append(tail)
    return list(parts)


def _extended(offsets: Sequence[int], held: list[bytes]) -> list[int]:
    more = offsets_of(held)
    end = offsets[-1]
    return [*offsets, *(end + offset for offset in more[1:])]


def _extend(lines: MappedLines, found: Envelopes, start: int, storage: JsonlSessionStorage) -> bool:
    """Check the lines from ``start`` (0-based) on as a full scan does and add them to ``found``; False at anything
    unusual (the full scan then names it, or reads what a dialect reads differently)."""
    envelope = envelope_decoder(storage.codec.dialect.parent_key).decode
    index, types, ids, parents = found.index, found.types, found.ids, found.parents
    for number in range(start, len(lines)):
        line = lines[number]
        try:
            head = envelope(line)
            if not line.isascii():
                line.decode()
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return False
        kind, entry_id, parent = head.type, head.id, head.parent
        if kind == "session" or not entry_id or entry_id in index or (parent is not None and parent not in index):
            return False
        if kind == "leaf" and not _target_earlier(line, index):
            return False
        index[entry_id] = len(types)
        types.append(kind)
        ids.append(entry_id)
        parents.append(-1 if parent is None else index[parent])
    return storage._extension_ok(lines, found, start - 1)


def _target_earlier(line: bytes, index: dict[str, int]) -> bool:
    try:
        target = LEAF_TARGET.decode(line).target
    except (msgspec.DecodeError, RecursionError):
        return False
    return target is None or (type(target) is str and target in index)
