"""Deleting content no line refers to any more: after an erasure (the erased entry's blobs, unless another entry
still refers to them) and after pruning (the pruned sessions' blobs).

Whether a blob is still referred to is asked of every log that shares its store: the native session files of the
folder (``.blobs`` is the folder's), or every stored event of the database. The digest's hex is looked for in the
stored bytes as a reference lays it out (``"sha256":"<hex>"``); text cannot fake it (its quotes are escaped), and
another producer's field of that name keeps the blob, which errs on the side of keeping content. A folder's
blobs are deleted while its lock is held for collecting, so no writer can put one to use meanwhile; in a database a
writer stores its blobs in the transaction of its line, and in memory puts them again once its line is stored; there
the check and the deletion are one step (``blob_tables.py``, ``blob_stores.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sessiontree.content.blobs import check_ref, refs
from sessiontree.storage.files import open_regular
from sessiontree.storage.memory_recorder import MemoryRecorder

CHUNK = 4 << 20


def digests_of(lines: Iterable[bytes]) -> list[str]:
    """The digests of the blobs these stored lines refer to."""
    return list(dict.fromkeys(ref["sha256"] for line in lines for ref in refs(line) if check_ref(ref) is None))


def needle(digest: str) -> bytes:
    """What a line that refers to the blob holds, as our writer lays it out (a digest merely quoted, as a redaction
    record lists the blobs it deletes, is not a reference)."""
    return b'"sha256":"' + digest.encode("ascii") + b'"'


def scope_of(store: Any) -> Any:
    """What shares a repository's blob store: its folder (JSONL), or its recorder."""
    root = getattr(store, "root", None)
    return root if root is not None else getattr(store, "recorder", None)


def collect(blobs: Any, scope: Any, digests: Iterable[str]) -> list[str]:
    """Delete the blobs among ``digests`` that no log in ``scope`` (a folder of session files, or a recorder) refers
    to; the ones deleted."""
    wanted = list(digests)
    if blobs is None or scope is None or not wanted:
        return []
    if isinstance(scope, (str, os.PathLike)):
        return list(blobs.collect(wanted, lambda digest: _in_folder(Path(scope), needle(digest))))
    return list(blobs.collect(wanted, lambda digest: _in_recorder(scope, digest)))


def _in_folder(folder: Path, needle: bytes) -> bool:
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".jsonl") and e.is_file(follow_symlinks=False))
    except OSError:
        return True  # the folder cannot be read: nothing is deleted
    for name in names:
        try:
            fd = open_regular(folder / name, follow=False)
        except FileNotFoundError:
            continue
        except OSError:
            return True
        try:
            size = os.fstat(fd).st_size
            if size and _holds(fd, size, needle):
                return True
        finally:
            os.close(fd)
    return False


def _holds(fd: int, size: int, needle: bytes) -> bool:
    """Does the file hold ``needle``? Read in chunks that overlap by the needle's length (not mapped: a file cut short
    by its writer meanwhile must not kill this process)."""
    offset, tail = 0, b""
    while offset < size:
        chunk = os.pread(fd, CHUNK, offset)
        if not chunk:
            return False
        if needle in tail + chunk:
            return True
        tail, offset = chunk[-len(needle):], offset + len(chunk)
    return False


def _in_recorder(recorder: Any, digest: str) -> bool:
    found = needle(digest)
    if isinstance(recorder, MemoryRecorder):  # memory, popo: the events its sessions read (a deleted one's not)
        return any(found in state for state in recorder.stored_states())
    return True  # a database's own store asks it (``blob_tables.TableBlobs.collect``); anything else keeps its blobs
