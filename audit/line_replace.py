"""Rewriting one stored line in place (erasure, docs/audit.md): a file is replaced whole and atomically (a database row
is updated by ``row_replace.py``). Nothing else in the package rewrites a stored line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sessiontree.audit import chain
from sessiontree.storage import leftovers
from sessiontree.storage.files import write_atomic
from sessiontree.storage.jsonl_file import StaleFileError, append_error


def sealed_stub(canonical: bytes, digest_hex: str | None) -> bytes:
    """The stored form of a rewritten line: its canonical bytes with the chain digest the original recorded (so every
    later line still chains), or as they are in an unchained log."""
    if digest_hex is None:
        return canonical
    if len(digest_hex) != chain.DIGEST_HEX or canonical[-1:] != b"}":
        raise ValueError(f"cannot seal {canonical[:40]!r} with digest {digest_hex!r}")
    return canonical[:-1] + b',"' + chain.CHAIN_KEY.encode() + b'":"' + digest_hex.encode("ascii") + b'"}'


def replace_in_file(file: Any, version: int, line: bytes) -> None:
    """Replace line ``version`` of a log file (an ``AppendingFile``): under its lock, the whole file is written anew
    beside it, synced, locked (so no append slips in before this object knows the new file) and renamed over it. A
    writer that waited for the old file's lock finds it replaced and is told to reopen it."""
    path: Path = file.path
    with file.locked():
        file.catch_up()
        file.repair()
        # copies an earlier rewrite left when its process died: they can hold content erased since (the lock is
        # held, so no other rewrite of this file is under way; a live writer's is kept all the same)
        leftovers.remove(leftovers.dead(leftovers.rewrites(path)))
        lines, tail, _ = file.read_split(0)
        if tail or not 1 <= version <= len(lines):
            raise StaleFileError(f"{path} has no line {version} to rewrite")
        lines[version - 1] = line
        data = b"\n".join(lines) + b"\n"
        temp = path.with_name(f".{path.name}.{os.getpid()}.rewrite")
        mode = os.fstat(file.fd).st_mode & 0o777
        # kept open and locked: no append slips in before this object knows the new file
        fd = write_atomic(path, data, temp=temp, mode=mode, fsync=True, keep_open=True)
        old, file.fd = file.fd, fd
        os.close(old)
        file._identity = None  # the new file's, looked at again
        file.size, file.count, file.torn, file.needs_newline = len(data), len(lines), b"", False


class FileLines:
    """A JSONL storage's lines rewritten one at a time (a mixin: the storage keeps ``_file``, ``path``, ``_live``)."""

    can_replace_lines = True

    def replace_line(self, version: int, canonical: bytes, digest: str | None) -> None:
        storage: Any = self
        storage.check_writable()
        try:
            replace_in_file(storage._file, version, sealed_stub(canonical, digest))
        except (StaleFileError, OSError) as exc:
            raise append_error(exc, storage.session_id, str(storage.path)) from None
        storage._live = None  # its lines are the old file's


__all__ = ["FileLines", "replace_in_file", "sealed_stub"]
