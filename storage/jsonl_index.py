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
from typing import Any

import attrs

from sessiontree.storage import folders
from sessiontree.storage.cache_files import cache_file, write_private
from sessiontree.storage.files import open_regular
from sessiontree.wire.jsontext import DECODE_ERRORS, dumps
from sessiontree.wire.jsontext import decode as decode_json

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
    return cache_file("sidecars", session_path, ".idx", 40)


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
    return write_private(path, encode(index))


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
