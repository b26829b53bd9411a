"""The sidecar index of a JSONL session file: where each line is and what its envelope says.

A full scan of a session file checks every line and keeps, per entry, its type, id and parent position; the index
stores that result with each line's offset, so the next open reads none of the lines it covers. It is a cache, never
a source: it is used only when it matches the file (its size, identity and modification time, and digests of the
header line and of its last line), a file that grew is scanned from where the index ends, and anything else is a full
scan. The format and the checks are described in docs/file-format.md (*The sidecar index*).

Where it lives: beside the session, as ``.<file name>.idx``, in a folder that is ours (it carries the repository
marker); for every other folder (pi's) in ``$XDG_CACHE_HOME/sessiontree/sidecars/``, named by a hash of the file's
real path. It is written private (0600) to a temporary file and renamed over the old one, so a reader sees a whole
index or the previous one, never half of one.

Loading through it (:func:`load`): with a sound index the storage maps the file and reads none of the lines the index
covers: the log is made from the index's envelopes and the loader slices each line from the mapping when it is first
decoded, so memory follows the entries used, not the bytes in the file. Lines appended since the index was written
are read and checked as a full scan checks them, and the index is extended. Without a sound index the file is scanned
in full (the same checks, the same errors) and the index written afresh.
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from array import array
from collections.abc import Iterable, Sequence
from itertools import accumulate, islice
from itertools import count as naturals
from operator import add, ge, lt
from typing import TYPE_CHECKING, Any

import attrs
import msgspec

from sessiontree.domain.errors import SessionError
from sessiontree.domain.log import EntryLog
from sessiontree.storage import folders
from sessiontree.storage.files import is_whole_line, open_regular
from sessiontree.storage.jsonl_file import names
from sessiontree.storage.jsonl_scan import Envelopes, LineLoader, envelopes_of, utf8
from sessiontree.storage.mapped import FileView, MappedLines, map_file, whole_lines_end, windows
from sessiontree.wire import jsontext
from sessiontree.wire.jsontext import DECODE_ERRORS, dumps
from sessiontree.wire.jsontext import decode as decode_json
from sessiontree.wire.schema import LEAF_TARGET, envelope_decoder

if TYPE_CHECKING:
    from sessiontree.storage.jsonl import JsonlSessionStorage

MAGIC = b"sessiontree-idx\n"
FORMAT = 1
_LENGTH = struct.Struct("<Q")
_DIGEST = 32
RACY_NS = 2_000_000_000
_MAX_INDEX_BYTES = 1 << 31  # larger than any index of a file this library reads whole


def line_digest(line: bytes | memoryview) -> str:
    return hashlib.sha256(line).hexdigest()


@attrs.define(slots=True, eq=False)
class SidecarIndex:
    """What a full scan found in the first ``lines`` lines of a file (the header included).

    ``offsets``: where each line starts, then where the last one ends (after its newline): ``lines + 1`` values,
    the last being ``size``. ``types``, ``ids``, ``parents``: each entry's (position ``p`` is line ``p + 2``);
    ``markers``: the entries a dialect reads as something other than their line (pi's leaf markers), ``orphans``: the
    parent ids of entries whose parent is not earlier in the log (only markers have them).
    """

    dialect: str
    size: int
    device: int
    inode: int
    mtime_ns: int
    header_digest: str
    last_digest: str
    offsets: array[int]
    types: list[str]
    ids: list[str]
    parents: array[int]
    markers: list[int] = attrs.field(factory=list)
    written_ns: int = attrs.field(factory=time.time_ns)
    orphans: dict[int, str] = attrs.field(factory=dict)

    @property
    def settled(self) -> bool:
        """Was the file last modified well before the index was written? A change in place within the same tick of
        the file system's clock would keep the modification time (the "racy" case git knows): such an index is
        not trusted for a file of the same size until it is rewritten later."""
        return self.written_ns - self.mtime_ns >= RACY_NS

    @property
    def lines(self) -> int:
        return len(self.offsets) - 1

    def positions(self, kind: str) -> list[int]:
        return [pos for pos, name in enumerate(self.types) if name == kind]


def sidecar_path(session_path: str | os.PathLike[str]) -> str | None:
    """Where the index of the session file at ``session_path`` is kept (None: nowhere, there is no cache directory)."""
    folder, name = os.path.split(os.path.abspath(session_path))
    if folders.is_ours(folder):
        return os.path.join(folder, f".{name}.idx")
    return folders.cache_file("sidecars", session_path, ".idx", 40)


def encode(index: SidecarIndex) -> bytes:
    """The index file's bytes: magic, the metadata's length and JSON, the arrays, the ids, then a SHA-256 of it all."""
    kinds = list(dict.fromkeys(index.types))
    code = {kind: number for number, kind in enumerate(kinds)}
    meta = {
        "format": FORMAT, "dialect": index.dialect, "size": index.size, "device": index.device, "inode": index.inode,
        "mtime_ns": index.mtime_ns, "written_ns": index.written_ns, "header": index.header_digest,
        "last": index.last_digest, "lines": index.lines,
        "kinds": kinds, "markers": index.markers,
        "orphans": [[pos, parent] for pos, parent in index.orphans.items()],
        "leaf_moves": index.positions("leaf"), "labels": index.positions("label"), "names": index.positions("session_info"),
    }
    head = dumps(meta)
    body = b"".join((
        MAGIC, _LENGTH.pack(len(head)), head,
        array("q", index.offsets).tobytes(), array("i", index.parents).tobytes(),
        array("H", [code[kind] for kind in index.types]).tobytes(), dumps(index.ids),
    ))
    return body + hashlib.sha256(body).digest()


def decode(data: bytes) -> SidecarIndex | None:
    """The index in ``data``, or None when it is not a whole, self-consistent index of this format."""
    if len(data) < len(MAGIC) + _LENGTH.size + _DIGEST or not data.startswith(MAGIC):
        return None
    body = memoryview(data)[:-_DIGEST]
    if hashlib.sha256(body).digest() != data[-_DIGEST:]:
        return None
    try:
        return _parse(body)
    except (ValueError, KeyError, TypeError, IndexError, OverflowError, *DECODE_ERRORS):
        return None


def _parse(body: memoryview) -> SidecarIndex | None:
    at = len(MAGIC)
    (length,) = _LENGTH.unpack_from(body, at)
    at += _LENGTH.size
    meta = decode_json(body[at : at + length])
    at += length
    if meta["format"] != FORMAT:
        return None
    lines = meta["lines"]
    count = lines - 1
    offsets, parents, codes = array("q"), array("i"), array("H")
    for values, items in ((offsets, lines + 1), (parents, count), (codes, count)):
        end = at + items * values.itemsize
        if count < 0 or end > len(body):
            return None
        values.frombytes(body[at:end])
        at = end
    ids = decode_json(body[at:])
    kinds = meta["kinds"]
    if not (isinstance(ids, list) and len(ids) == count and set(map(type, ids)) <= {str}):  # checked in C
        return None
    if not all(type(k) is str for k in kinds) or (codes and max(codes) >= len(kinds)):
        return None
    index = SidecarIndex(
        dialect=meta["dialect"], size=meta["size"], device=meta["device"], inode=meta["inode"], mtime_ns=meta["mtime_ns"],
        header_digest=meta["header"], last_digest=meta["last"], offsets=offsets, types=list(map(kinds.__getitem__, codes)),
        ids=ids, parents=parents, markers=[int(p) for p in meta["markers"]],
        orphans={int(pos): str(parent) for pos, parent in meta["orphans"]}, written_ns=meta["written_ns"],
    )
    return index if _consistent(index, meta) else None


def _consistent(index: SidecarIndex, meta: dict[str, Any]) -> bool:
    """Does the index agree with itself (lines in order, parents earlier, ids unique, the summaries its types')?"""
    offsets, count = index.offsets, len(index.ids)
    if offsets[0] != 0 or offsets[-1] != index.size or not all(map(lt, offsets, islice(offsets, 1, None))):
        return False
    parents = index.parents
    if (parents and (min(parents) < -1 or any(map(ge, parents, range(count))))) or len(set(index.ids)) != count:
        return False
    if any(not 0 <= p < count for p in (*index.markers, *index.orphans)):
        return False
    types = index.types
    for key, kind in (("leaf_moves", "leaf"), ("labels", "label"), ("names", "session_info")):
        listed = meta[key]  # in order, each of its type, and as many as the types say: the same list, checked in C
        if (len(listed) != types.count(kind) or not all(map(lt, listed, islice(listed, 1, None)))
                or any(not (type(p) is int and 0 <= p < count) or types[p] != kind for p in listed)):
            return False
    return True


def read(path: str) -> SidecarIndex | None:
    """The index at ``path``, or None if there is none, it cannot be read, or it is not a sound index."""
    try:
        fd = open_regular(path, follow=False)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size > _MAX_INDEX_BYTES:
            return None
        data = os.pread(fd, size, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    return decode(data)


def write(path: str, index: SidecarIndex) -> bool:
    """Write ``index`` to ``path`` atomically and private; False (and nothing left behind) if it cannot be written."""
    return folders.write_private(path, encode(index))


def remove(session_path: str | os.PathLike[str]) -> None:
    """Remove the index of a session file that is gone (nothing if there is none)."""
    path = sidecar_path(session_path)
    if path is not None:
        try:
            os.unlink(path)
        except OSError:
            pass


def offsets_of(lines: Sequence[bytes]) -> array[int]:
    """Where each of ``lines`` (newline-terminated on disk, newlines cut) starts, then where the last one ends."""
    return offsets_from_lengths(map(len, lines))


def offsets_from_lengths(lengths: Iterable[int]) -> array[int]:
    """:func:`offsets_of` from the lines' lengths: line ``i`` starts after the ``i`` lines and newlines before it."""
    return array("q", map(add, accumulate(lengths, initial=0), naturals()))


def load(storage: JsonlSessionStorage) -> tuple[Any, LineLoader, EntryLog]:
    """The file's lines, the loader and the checked, lazy log, through the index when it is sound."""
    if storage._file.fd >= 0 and not names(storage.path, storage._file.fd):
        raise SessionError("conflict", f"session {storage.session_id} at {storage.path} was rewritten since it was opened "
                           "(an erasure replaced the file): open it again")
    where = sidecar_path(storage.path) if storage.indexable else None
    if where is not None:
        index = read(where)
        if index is not None:
            found = _from_index(storage, index, where)
            if found is not None:
                return found
    scanned: tuple[Any, LineLoader, Envelopes | None] | None = scan_mapped(storage)
    if scanned is None:  # something unusual: the whole file read and checked line by line, naming the problem
        whole = storage.read_lines(strict=True)
        scanned = whole, storage._loader(whole), None
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
    write(where, index)


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
