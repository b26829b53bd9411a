"""Rewriting one stored line in place (erasure, docs/audit.md): a file is replaced whole and atomically (a database row
is updated by ``row_replace.py``). Nothing else in the package rewrites a stored line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sessiontree.audit import chain
from sessiontree.domain.errors import SessionError
from sessiontree.storage import leftovers
from sessiontree.storage.files import is_whole_line, write_atomic
from sessiontree.storage.jsonl_append import append_error
from sessiontree.storage.jsonl_file import StaleFileError
from sessiontree.storage.jsonl_scan import corrupt
from sessiontree.wire import jsontext


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
    """A JSONL storage's lines as they are on disk: read, and rewritten one at a time (a mixin: the storage keeps
    ``_file``, ``path``, ``_live``)."""

    can_replace_lines = True

    def read_lines(self, count: int | None = None, *, strict: bool = False) -> list[bytes]:
        """The file's whole lines (the first ``count``) as on disk; ``strict``: over-long is ``corrupt``, torn is warned of."""
        storage: Any = self
        parts: list[bytes]
        try:
            if count is None:
                parts, tail, size = storage._file.read_split(0)
                storage._file.observe_lines(0, size, len(parts), tail)
            else:
                data = storage._file.read(0, lines=count)
                parts = data.split(b"\n")
                tail, size = parts.pop(), len(data)
        except OSError as exc:
            raise SessionError("storage", f"cannot read the file: {exc.strerror or exc}", path=str(storage.path)) from exc
        limit = jsontext.MAX_LINE_BYTES
        if strict and size > limit:  # only then can a line be too long
            for number, part in enumerate(parts, 1):
                if len(part) > limit:
                    raise corrupt(storage.path, number, f"line of {len(part)} bytes is over the {limit}-byte line limit")
        if tail and is_whole_line(tail):
            parts.append(tail)
        elif tail and strict and count is None:
            storage._file.warn_torn(len(parts) + 1, tail)
        return parts

    def stamp(self) -> tuple[tuple[int, int], int, int] | None:
        """((device, inode), size, mtime) of the file: a rewrite (erasure) replaces the file, so its identity changes."""
        storage: Any = self
        try:
            st = os.stat(storage.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino), st.st_size, st.st_mtime_ns

    def line_before(self, version: int) -> tuple[bytes, bytes | None]:
        storage: Any = self
        lines = self.read_lines(version - 1)
        if len(lines) < version - 1:
            raise storage.conflict(version, f"there is no version {version - 1} to follow")
        return lines[version - 2], lines[0]

    def replace_line(self, version: int, canonical: bytes, digest: str | None) -> None:
        storage: Any = self
        storage.check_writable()
        try:
            replace_in_file(storage._file, version, sealed_stub(canonical, digest))
        except (StaleFileError, OSError) as exc:
            raise append_error(exc, storage.session_id, str(storage.path)) from None
        storage._live = None  # its lines are the old file's


__all__ = ["FileLines", "replace_in_file", "sealed_stub"]
