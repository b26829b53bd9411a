"""Deleting content no line refers to any more: after an erasure (the erased entry's blobs, unless another entry
still refers to them) and after pruning (the pruned sessions' blobs).

Whether a blob is still referred to is asked of every log that shares its store: the native session files of the
folder (``.blobs`` is the folder's), or every stored event of the database. The digest's hex is looked for in the
stored bytes; a line that merely quotes it keeps the blob, which errs on the side of keeping content. A folder's
blobs are deleted while its lock is held for collecting, so no writer can put one to use meanwhile; in memory and in
a database a writer puts its blobs again once its line is stored, and the check and the deletion are one step
(``blob_stores.py``, ``blob_tables.py``).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sessiontree.adapters.blobs import check_ref, refs
from sessiontree.adapters.files import open_regular


def digests_of(lines: Iterable[bytes]) -> list[str]:
    """The digests of the blobs these stored lines refer to."""
    return list(dict.fromkeys(ref["sha256"] for line in lines for ref in refs(line) if check_ref(ref) is None))


def collect(blobs: Any, scope: Any, digests: Iterable[str]) -> list[str]:
    """Delete the blobs among ``digests`` that no log in ``scope`` (a folder of session files, or a recorder) refers
    to; the ones deleted."""
    wanted = list(digests)
    if blobs is None or not wanted:
        return []
    if isinstance(scope, (str, os.PathLike)):
        return list(blobs.collect(wanted, lambda digest: _in_folder(Path(scope), digest.encode("ascii"))))
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
    with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mapped:
        return mapped.find(needle) >= 0


def _in_recorder(recorder: Any, digest: str) -> bool:
    needle = digest.encode("ascii")
    index = getattr(recorder, "_stored_events_index", None)
    if index is not None:  # eventsourcing's POPO recorder: a list of events, indexed by session (a deleted one unindexed)
        stored = recorder._stored_events
        with recorder._database_lock:
            return any(needle in bytes(stored[i].state) for versions in index.values() for i in versions.values())
    return True  # a database's own store asks it (``blob_tables.TableBlobs.collect``); anything else keeps its blobs
