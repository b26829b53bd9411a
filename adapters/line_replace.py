"""Rewriting one stored line in place (erasure, docs/audit.md): a file is replaced whole and atomically, a database
row is updated. Nothing else in the package rewrites a stored line."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import Any

from sessiontree.adapters import chain, jsontext
from sessiontree.adapters.files import fsync_dir, is_whole_line
from sessiontree.adapters.jsonl_append import append_error
from sessiontree.adapters.jsonl_file import StaleFileError
from sessiontree.adapters.jsonl_scan import corrupt
from sessiontree.domain.errors import SessionError


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
        lines, tail, _ = file.read_split(0)
        if tail or not 1 <= version <= len(lines):
            raise StaleFileError(f"{path} has no line {version} to rewrite")
        lines[version - 1] = line
        data = b"\n".join(lines) + b"\n"
        temp = path.with_name(f".{path.name}.{os.getpid()}.rewrite")
        mode = os.fstat(file.fd).st_mode & 0o777
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                if written <= 0:
                    raise OSError(errno.EIO, "short write")
                view = view[written:]
            os.fsync(fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.replace(temp, path)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise
        fsync_dir(path.parent)
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


def replace_recorded(recorder: Any, session_id: str, version: int, line: bytes) -> None:
    """Replace the state of one stored event (the line of ``version``) in an eventsourcing recorder's table."""
    kinds = {cls.__module__ for cls in type(recorder).__mro__}  # ours may subclass eventsourcing's recorders
    if hasattr(recorder, "_stored_events_index"):  # POPO: the list the recorder reads from
        from eventsourcing.persistence import StoredEvent  # not imported by a JSONL storage that never needs it

        with recorder._database_lock:
            index = recorder._stored_events_index[session_id].get(version)
            if index is None:
                raise LookupError(f"session {session_id} has no version {version}")
            old = recorder._stored_events[index]
            recorder._stored_events[index] = StoredEvent(old.originator_id, old.originator_version, old.topic, line)
        return
    if "eventsourcing.sqlite" in kinds:
        statement = f"UPDATE {recorder.events_table_name} SET state = ? WHERE originator_id = ? AND originator_version = ?"
        with recorder.datastore.transaction(commit=True) as cursor:
            cursor.execute(statement, (line, session_id, version))
            cursor.execute("SELECT changes()")
            if cursor.fetchone()[0] != 1:
                raise LookupError(f"session {session_id} has no version {version}")
        return
    if "eventsourcing.postgres" in kinds:
        from psycopg.sql import SQL, Identifier

        query = SQL("UPDATE {}.{} SET state = %s WHERE originator_id = %s AND originator_version = %s").format(
            Identifier(recorder.datastore.schema), Identifier(recorder.events_table_name)
        )
        with recorder.datastore.transaction(commit=True) as cursor:
            cursor.execute(query, (line, session_id, version))
            if cursor.rowcount != 1:
                raise LookupError(f"session {session_id} has no version {version}")
        return
    raise SessionError("storage", f"session {session_id}: a {type(recorder).__name__} cannot rewrite a stored line")


__all__ = ["FileLines", "replace_in_file", "replace_recorded", "sealed_stub"]
