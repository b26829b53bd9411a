"""Verify a session log: every line's structure and, when the log is chained, its hash chain.

``verify(target)`` reads the log once, in order (O(size)), from the disk (never a copy in memory), and never
writes. Lines are checked as salvage mode reads them (``jsonl_scan.py``), the chain as ``chain.py`` walks it,
and, with a key, each signed checkpoint (``checkpoints.py``): its signature, and that the log still has the signed
digest at that line, which also catches lines removed from the end (a plain chain cannot). Files without a chain
(written before chaining, by other producers, or in pi's dialect) get ``chained=False`` and a warning (docs/audit.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from sessiontree.audit.blob_check import BlobCheck
from sessiontree.audit.chain import check_chain
from sessiontree.audit.checkpoints import load_checkpoints, parse_all
from sessiontree.audit.verify_checkpoints import check_checkpoints
from sessiontree.audit.verify_erasures import check_signed_erasures, note_erasures
from sessiontree.audit.verify_report import Problem, VerifyReport
from sessiontree.audit.verify_sidecar import check_sidecar
from sessiontree.content.blob_stores import folder_for
from sessiontree.domain.errors import SessionError
from sessiontree.pi.pi_migrate import CURRENT as PI_CURRENT
from sessiontree.retention.archive import GZIP_MAGIC, expand_lines
from sessiontree.storage import leftovers
from sessiontree.storage.files import is_whole_line, open_regular
from sessiontree.storage.jsonl_index import offsets_from_lengths
from sessiontree.storage.jsonl_scan import read_entry, read_header
from sessiontree.storage.mapped import MappedLines, line_lengths, map_file, whole_lines_end
from sessiontree.storage.storage import SessionStorage
from sessiontree.wire.codec import Codec, native_codec
from sessiontree.wire.jsontext import MAX_LINE_BYTES, duplicate_key

_UNCHAINED = "no chain: this log is not tamper-evident (written before chaining, or by another producer); structure checked"
_UNCHAINED_PI = "pi-dialect file: pi's format has no chain, so it is not tamper-evident; structure checked"


def verify(
    target: Any, *, key: Any = None, checkpoints: Iterable[Any] | None = None, require_chain: bool = False,
    head: str | None = None, at_least: int | None = None, progress: Callable[[int], None] | None = None,
) -> VerifyReport:
    """Check a session log (see the module documentation) and report what is wrong.

    ``target``: a session file's path, a ``JsonlSessionStorage`` (its file is read again), a database or in-memory
    storage, or a ``Session``. ``key`` (HMAC key bytes or an Ed25519 key) checks ``checkpoints`` (by default, for a
    file, its ``<file>.checkpoints``). With ``require_chain`` an unchained log is a problem, not a warning. Anchors
    kept outside the log catch a rollback (the log cut back, perhaps re-extended) that neither the chain nor
    checkpoints beside the file can: ``head`` (a head digest ``verify`` or ``sign`` printed) must be the log's digest
    at some line; ``at_least`` is the fewest lines the log may have. ``progress(n)`` is told of every ``n`` lines
    checked. Raises ``SessionError`` only when the log cannot be reached (``not_found``, ``storage``); everything
    wrong inside it is in the report.
    """
    storage, path = _source(target)
    if checkpoints is None and key is not None and path is not None:
        checkpoints = load_checkpoints(path)
    signed = parse_all(checkpoints or ())
    wanted = {cp.line for cp in signed}
    anchor = _anchor(head)
    tell = progress or (lambda n: None)
    report = (_verify_file(Path(path), wanted, anchor, tell) if path is not None
              else _verify_records(storage, wanted, anchor, tell))
    if not report.chained:
        (report.problem if require_chain else report.warn)(None, _UNCHAINED_PI if report.dialect == "pi" else _UNCHAINED)
    check_checkpoints(report, signed, key)
    if signed and key is not None:
        check_signed_erasures(report, report.lines if report.unverified_from is None else report.unverified_from - 1)
    _check_anchors(report, head, at_least)
    report.problems.sort(key=lambda p: (p.line is None, p.line or 0))
    return report


def _source(target: Any) -> tuple[Any, Any]:
    """The storage of ``target`` and the path of its file (None: a storage without a file)."""
    storage = getattr(target, "storage", target)  # a Session
    path = storage if isinstance(storage, (str, os.PathLike)) else getattr(storage, "path", None)
    if path is None and not isinstance(storage, SessionStorage):
        raise TypeError(f"verify needs a session file path, a storage or a Session, not {target!r}")
    return storage, path


def _anchor(head: str | None) -> bytes | None:
    if head is None:
        return None
    if not isinstance(head, str) or len(head) != 64 or head.strip("0123456789abcdef"):
        raise ValueError(f"a head digest is 64 lowercase hex digits (what verify and sign print), not {head!r}")
    return bytes.fromhex(head)


def _check_anchors(report: VerifyReport, head: str | None, at_least: int | None) -> None:
    if head is not None and report.anchored_at is None:
        report.problem(None, f"the log never has the head {head} it was anchored to: it was rolled back (cut, or cut "
                       "and extended again) or rewritten since that head was taken")
    if at_least is not None and report.lines < at_least:
        report.problem(report.lines + 1, f"the log has {report.lines} lines, fewer than the {at_least} it is known to "
                       f"have had: lines {report.lines + 1}..{at_least} were removed")


def _verify_file(path: Path, wanted: set[int], anchor: bytes | None, progress: Callable[[int], None]) -> VerifyReport:
    report = VerifyReport(str(path))
    try:
        fd = open_regular(path)
        try:
            lines, tail = _lines(fd, path)
        finally:
            os.close(fd)
    except SessionError as exc:  # an archive that cannot be expanded, or stopped at a line that cannot be a log's
        report.problem(exc.line or 1, exc.message)
        return report
    except FileNotFoundError:
        raise SessionError("not_found", "no session file there", path=str(path)) from None
    except OSError as exc:
        raise SessionError("storage", f"cannot read the file: {exc.strerror or exc}", path=str(path)) from exc
    if tail and is_whole_line(tail):
        lines.extend([tail])  # a last line without a newline (another producer's habit)
    elif tail:
        report.warn(len(lines) + 1, f"torn last line ({len(tail)} bytes, an append interrupted by a crash): not part "
                    "of the log; the next append removes it")
    if not lines:
        report.problem(1, "the file is empty: no session header")
        return report
    blobs = folder_for(path)
    _check(lines, report, path, wanted, anchor, progress, blobs)
    if report.dialect is not None:
        check_sidecar(path, lines, report)
    for link in blobs.links():  # content could be written out of the repository through it
        report.problem(None, link.message)
    _warn_leftovers(report, path, blobs.folder)
    return report


def _warn_leftovers(report: VerifyReport, path: Path, blob_folder: Path) -> None:
    """Files a crash left beside the log that can hold its content (leftovers.py): not part of the log, but content
    erased since may survive in them."""
    for found in leftovers.rewrites(path):
        if not leftovers.running(found[1]):
            report.warn(None, f"{leftovers.describe(found)}: a copy of this file an interrupted erasure left; it may hold "
                        "content erased since: running redact again removes it")
    temps = [found for found in leftovers.blob_temps(blob_folder) if not leftovers.running(found[1])]
    if temps:
        names = ", ".join(leftovers.describe(found) for found in temps[:3]) + (", ..." if len(temps) > 3 else "")
        report.warn(None, f"the blob folder holds {len(temps)} temporary file(s) of blob writes a crash interrupted "
                    f"({names}); they hold content no line refers to: the next erasure or collection removes them")


def _lines(fd: int, path: Path) -> tuple[Any, bytes]:
    """The file's newline-terminated lines and the bytes after the last newline. Read through a mapping, in one
    forward pass whose pages are handed back as it goes, so memory stays bounded whatever the file's size."""
    size = os.fstat(fd).st_size
    if os.pread(fd, len(GZIP_MAGIC), 0) == GZIP_MAGIC:  # a pruned session's archive: the log's bytes, compressed
        log, offsets = expand_lines(_read_all(fd), path)  # each line checked as it is expanded: a bomb stops early
        return MappedLines(log, offsets, []), log[offsets[-1] :]
    end = whole_lines_end(fd, size)  # mapped no further: a torn tail is read plainly (a writer may cut it off)
    mapped = map_file(fd, path, end) if end else None
    if mapped is None:
        lines = _read_all(fd).split(b"\n")
        return lines, lines.pop()
    lengths, _ = line_lengths(mapped, end)
    return MappedLines(mapped, offsets_from_lengths(lengths), []), os.pread(fd, max(0, size - end), end)


def _read_all(fd: int) -> bytes:
    """The whole file behind ``fd`` (a regular file: its size bounds the read)."""
    parts = [os.pread(fd, os.fstat(fd).st_size, 0)]
    offset = len(parts[0])
    while more := os.pread(fd, 1 << 20, offset):  # it grew meanwhile
        parts.append(more)
        offset += len(more)
    return b"".join(parts)


def _verify_records(storage: Any, wanted: set[int], anchor: bytes | None, progress: Callable[[int], None]) -> VerifyReport:
    report = VerifyReport(storage.location, session_id=storage.session_id)
    recorder = getattr(storage, "recorder", None)
    if recorder is None:  # a backend of the port's own: its stored lines
        lines = storage.read_lines()
        if not lines:
            raise SessionError("not_found", f"session {storage.session_id} not found at {storage.location}")
        _check(lines, report, storage.location, wanted, anchor, progress, storage.blobs)
        return report
    from eventsourcing.persistence import PersistenceError

    try:
        stored = recorder.select_events(storage.session_id)
    except PersistenceError as exc:
        raise SessionError("storage", f"could not read session {storage.session_id}: {exc}") from exc
    if not stored:
        raise SessionError("not_found", f"session {storage.session_id} not found at {storage.location}")
    lines = []
    for expected, item in enumerate(stored, 1):  # a row's version is its own: a missing one is a gap
        if item.originator_version != expected:
            what = "the session header (version 1)" if expected == 1 else f"version {expected}"
            report.problem(expected, f"{what} is missing (the next stored is {item.originator_version})")
            break
        lines.append(bytes(item.state))
    if lines:
        _check(lines, report, storage.location, wanted, anchor, progress, storage.blobs)
    return report


def _check(
    lines: Sequence[bytes], report: VerifyReport, where: Any, wanted: set[int], anchor: bytes | None,
    progress: Callable[[int], None], blobs: Any,
) -> None:
    """The structure of every line (with the content it keeps out of line, in ``blobs``), then the chain (a pi file
    has none, unless a native header was damaged)."""
    report.lines = len(lines)
    codec = native_codec()
    version = None
    try:
        if len(lines[0]) > MAX_LINE_BYTES:
            raise SessionError("corrupt", f"the header line of {len(lines[0])} bytes is over the size limit")
        header, codec = read_header(lines[0], where)
        report.session_id = header.originator_id
        report.dialect = codec.dialect.name
        version = header.version
    except SessionError as exc:
        report.problem(1, exc.message)
    if report.dialect == "pi" and version is not None and version < PI_CURRENT:
        _check_old_pi(Path(where), lines, report)
    else:
        _check_entries(lines, report, codec, progress, BlobCheck(blobs, report))
    found = check_chain(lines, wanted, anchor)
    report.chained, report.anchored_at, report.digests = found.chained, found.anchored_at, found.digests
    report.head = found.head.hex() if found.head is not None else None
    for line, message in found.problems:
        report.problem(line, message)
    note_erasures(lines, report, found, codec)


def _check_entries(
    lines: Sequence[bytes], report: VerifyReport, codec: Codec, progress: Callable[[int], None], blobs: BlobCheck,
) -> None:
    """Every entry line as salvage mode reads it, one at a time (nothing kept but the ids; each blob read once); a bad
    line is reported, then skipped. A pi line that repeats a key is a warning: pi reads its last value."""
    ids: set[str] = set()
    pi = codec.dialect.name == "pi"
    if pi:
        _warn_duplicates(report, 1, lines[0])
    for lineno in range(2, len(lines) + 1):
        line = lines[lineno - 1]
        version = report.entries + 2 if pi else lineno  # a pi file: numbered as salvage numbers what it keeps
        blobs.line = lineno
        found = read_entry(line, codec, report.session_id or "?", version, ids, blobs)
        if isinstance(found, str):
            report.problem(lineno, found)
        else:
            ids.add(found.id)
            report.entries += 1
        if pi:
            _warn_duplicates(report, lineno, line)
        if not lineno % 4096:
            progress(4096)
    progress(len(lines) % 4096)


def _warn_duplicates(report: VerifyReport, lineno: int, line: bytes) -> None:
    if (key := duplicate_key(line)) is not None:
        report.warn(lineno, f"key {key!r} appears twice in one object; its last value is read, as pi does")


def _check_old_pi(path: Path, lines: Sequence[bytes], report: VerifyReport) -> None:
    """A pi file of version 1 or 2, read whole by the pi storage: its migration gives entries ids from their lines
    (salvage reads version 3 only)."""
    from sessiontree.storage.jsonl import JsonlSessionStorage

    try:
        storage = JsonlSessionStorage.open(path)
        try:
            report.entries = len(list(storage.load()[1]))  # every entry decoded
        finally:
            storage.close()
    except SessionError as exc:
        report.problem(exc.line, exc.message)
    for lineno, line in enumerate(lines, 1):
        _warn_duplicates(report, lineno, line)


__all__ = ["Problem", "VerifyReport", "verify"]
