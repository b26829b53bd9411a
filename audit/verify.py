"""Verify a session log: every line's structure and, when the log is chained, its hash chain.

``verify(target)`` reads the log once, in order (O(size)), from the disk (never a copy in memory), and never
writes. Lines are checked as salvage mode reads them (``jsonl_scan.py``), the chain as ``chain.py`` walks it,
and, with a key, each signed checkpoint (``checkpoints.py``): its signature, and that the log still has the signed
digest at that line, which also catches lines removed from the end (a plain chain cannot). Files without a chain
(written before chaining, by other producers, or in pi's dialect) get ``chained=False`` and a warning (docs/audit.md).
Each blob is read once, against its digest; a sidecar index an open would use must agree with every line it covers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import msgspec

from sessiontree.audit.chain import check_chain, split
from sessiontree.audit.checkpoints import check_checkpoints, load_checkpoints, parse_all
from sessiontree.content.blob_stores import BlobStore, folder_for
from sessiontree.content.blobs import PREVIEW, check_ref, fetch
from sessiontree.domain.erasure import erased, stub_problem
from sessiontree.domain.errors import SessionError
from sessiontree.pi.pi import CURRENT as PI_CURRENT
from sessiontree.retention.archive import GZIP_MAGIC, expand_lines
from sessiontree.storage import jsonl_index, leftovers
from sessiontree.storage.files import is_whole_line, open_regular
from sessiontree.storage.jsonl_scan import read_entry, read_header
from sessiontree.storage.mapped import MappedLines, line_lengths, map_file, whole_lines_end
from sessiontree.storage.storage import SessionStorage
from sessiontree.wire.codec import Codec, native_codec
from sessiontree.wire.jsontext import MAX_LINE_BYTES, duplicate_key, loads
from sessiontree.wire.pi_names import PARENT_KEY as PI_PARENT_KEY
from sessiontree.wire.schema import NATIVE, envelope_decoder

MAX_PROBLEMS = 100


class Problem(NamedTuple):
    """One finding: the file (or database location), the line (or version), what is wrong."""

    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}" if self.line else f"{self.file}: {self.message}"


@attrs.define
class VerifyReport:
    """The result of :func:`verify`. ``ok`` is True when ``problems`` is empty.

    ``head`` is the chain digest of the log as it now is (hex; None if not chained): write it down, or sign it
    (``sign_checkpoint``), to detect later changes, truncation included. ``warnings`` are findings that do not make
    the log untrustworthy (a torn last line left by a crash, an unchained file, a key repeated in a pi line).
    """

    source: str
    session_id: str | None = None
    dialect: str | None = None
    chained: bool = False
    lines: int = 0
    entries: int = 0
    head: str | None = None
    checkpoints: int = 0
    problems: list[Problem] = attrs.field(factory=list)
    warnings: list[Problem] = attrs.field(factory=list)
    omitted: int = 0
    # With signed checkpoints: the first line after the last one (None: every line is covered);
    # those lines are consistent with the chain but nothing vouches for them.
    unverified_from: int | None = None
    # With an anchor (``head=``): the line at which the log has that digest.
    anchored_at: int | None = None
    # Erased lines the chain vouches for: {"line", "entry_id", "record_line", "reason", "by"} (docs/audit.md, Erasure).
    redactions: list[dict[str, Any]] = attrs.field(factory=list)
    # Content kept out of line that was checked against its digest (distinct blobs; docs/audit.md).
    blobs: int = 0
    # The chain digest of the log as it is at each line a checkpoint names (raw bytes).
    digests: dict[int, bytes] = attrs.field(factory=dict, repr=False, eq=False)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first_bad_line(self) -> int | None:
        """The first line named by a problem (None when there is none, or none names a line)."""
        lines = [p.line for p in self.problems if p.line is not None]
        return min(lines) if lines else None

    @property
    def unverified_lines(self) -> int:
        """How many lines come after the last signed checkpoint (0 without checkpoints)."""
        return 0 if self.unverified_from is None else self.lines - self.unverified_from + 1

    def problem(self, line: int | None, message: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(Problem(self.source, line, message))
        else:
            self.omitted += 1

    def warn(self, line: int | None, message: str) -> None:
        self.warnings.append(Problem(self.source, line, message))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``--json`` output)."""
        out = attrs.asdict(self, filter=lambda a, _: a.name != "digests", recurse=False)
        out.update(problems=[p._asdict() for p in self.problems], warnings=[p._asdict() for p in self.warnings],
                   ok=self.ok, first_bad_line=self.first_bad_line, unverified_lines=self.unverified_lines)
        return out

    def summary(self) -> str:
        """One line for people: the verdict, what was checked and the first problem."""
        kind = "hash-chained" if self.chained else "NOT chained (structure only)"
        what = f"{self.lines} lines, {self.entries} entries, {kind}" + (f", {self.blobs} blob(s) match" if self.blobs else "")
        if self.ok:
            signed = f", {self.checkpoints} signed checkpoint(s) match" if self.checkpoints else ""
            if self.unverified_from is not None:
                signed += f"; lines {self.unverified_from}..{self.lines} come after the last one: UNVERIFIED"
            head = f"; head {self.head}" if self.head else ""
            return f"{self.source}: ok ({what}{signed}){head}"
        count = len(self.problems) + self.omitted
        return f"{self.source}: {count} problem(s) ({what}); first: {self.problems[0]}"


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
    if signed and key is not None:  # an erasure whose stub a checkpoint signed but whose record none did
        signed_lines = report.lines if report.unverified_from is None else report.unverified_from - 1
        for erased_line in report.redactions:  # the signature vouches for what the line held, not for its erasure
            if erased_line["line"] <= signed_lines < erased_line["record_line"]:
                report.warn(erased_line["line"], f"erased after the last signed checkpoint (record on line "
                            f"{erased_line['record_line']}): the erasure is not signed yet; sign again to cover it")
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
    if head is not None and (not isinstance(head, str) or len(head) != 64 or head.strip("0123456789abcdef")):
        raise ValueError(f"a head digest is 64 lowercase hex digits (what verify and sign print), not {head!r}")
    return None if head is None else bytes.fromhex(head)


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
    return MappedLines(mapped, jsonl_index.offsets_from_lengths(lengths), []), os.pread(fd, max(0, size - end), end)


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
    stored: Sequence[Any]
    if recorder is None:  # a backend of the port's own: its stored lines
        stored = lines = storage.read_lines()
    else:
        from eventsourcing.persistence import PersistenceError

        try:
            stored = recorder.select_events(storage.session_id)
        except PersistenceError as exc:
            raise SessionError("storage", f"could not read session {storage.session_id}: {exc}") from exc
        lines = []
        for expected, item in enumerate(stored, 1):  # a row's version is its own: a missing one is a gap
            if item.originator_version != expected:
                what = "the session header (version 1)" if expected == 1 else f"version {expected}"
                report.problem(expected, f"{what} is missing (the next stored is {item.originator_version})")
                break
            lines.append(bytes(item.state))
    if not stored:
        raise SessionError("not_found", f"session {storage.session_id} not found at {storage.location}")
    if lines:
        _check(lines, report, storage.location, wanted, anchor, progress, storage.blobs)
    return report


def _check(lines: Sequence[bytes], report: VerifyReport, where: Any, wanted: set[int], anchor: bytes | None,
           progress: Callable[[int], None], blobs: Any) -> None:
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


def _check_entries(lines: Sequence[bytes], report: VerifyReport, codec: Codec, progress: Callable[[int], None],
                   blobs: BlobCheck) -> None:
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


class BlobCheck:
    """What verify reads out-of-line content with: each blob once, checked against its digest (a missing or altered
    one is a problem of every line that refers to it, ``line``), then each reference against what was read (its size
    and preview); given back as an empty string for the line's structure check (the entry itself stays in the tree)."""

    def __init__(self, store: BlobStore | None, report: Any) -> None:
        self.store = store
        self.report = report
        self.line = 0
        self.seen: dict[str, tuple[str | None, int, bytes]] = {}  # digest: (its problem, its size, its first bytes)

    def __call__(self, ref: dict[str, Any]) -> str:
        problem = check_ref(ref)
        if problem is None:
            digest = ref["sha256"]
            if digest not in self.seen:
                self.seen[digest] = self._read(ref)
                self.report.blobs += self.seen[digest][0] is None
            problem, size, head = self.seen[digest]
            preview = ref.get("preview")
            if problem is None and size != ref["size"]:
                problem = f"content {digest[:12]} is {size} bytes, not the {ref['size']} its reference says"
            elif problem is None and preview and not head.decode("utf-8", "ignore").startswith(preview):
                problem = f"content {digest[:12]}: the preview in the line is not how it starts"
        if problem is not None:
            self.report.problem(self.line, problem)
        return ""

    def _read(self, ref: dict[str, Any]) -> tuple[str | None, int, bytes]:
        if self.store is None:
            return f"content {ref['sha256'][:12]} is out of line, and this log has no content store to read it from", 0, b""
        try:
            data = fetch(self.store, {**ref, "preview": ""})
        except SessionError as exc:
            return exc.message, 0, b""
        return None, len(data), data[: 4 * PREVIEW + 4]


def check_sidecar(path: Any, lines: Sequence[bytes], report: VerifyReport) -> None:
    """Report where the index an open of ``path`` would use disagrees with the file's ``lines``."""
    where = jsonl_index.sidecar_path(path)
    index = jsonl_index.read(where) if where is not None else None
    if index is None or index.dialect != report.dialect or not _in_use(path, index, lines):
        return
    if (found := _disagreement(lines, index)) is not None:
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


def note_erasures(lines: Sequence[bytes], report: VerifyReport, found: Any, codec: Codec) -> None:
    """Each erased line the chain let through must hold only the placeholder (then it is listed with its record's
    reason and author); a recorded erasure not applied is a warning."""
    for line, entry_id, record_line in found.redactions:
        canonical = split(lines[line - 1])[0]
        why = _stub_problem(canonical, codec, report.session_id or "?", line)
        if why is not None:
            report.problem(line, f"is marked erased (entry {entry_id}) but holds more than the placeholder of an erased "
                                 f"entry ({why}): the line was changed")
            continue
        data = loads(split(lines[record_line - 1])[0]).get("data", {})
        report.redactions.append({"line": line, "entry_id": entry_id, "record_line": record_line,
                                  "reason": data.get("reason"), "by": data.get("by")})
    for entry_id, record_line in found.unapplied:
        report.warn(record_line, f"the erasure of entry {entry_id} was recorded here but its line still holds the content "
                                 "(interrupted): run redact again to complete it")


def _stub_problem(canonical: bytes, codec: Codec, session_id: str, line: int) -> str | None:
    """Why this line is not exactly what erasing its entry writes (erasing a stub again changes nothing), with fields
    that carry only names, times and counts; None when it is."""
    try:
        entry = codec.decode_line(canonical, session_id, line)
        if codec.encode_event(erased(entry)) != canonical:
            return "erasing it again changes it"
        return stub_problem(entry)
    except (SessionError, ValueError, TypeError) as exc:
        return f"it cannot be read: {exc}"


__all__ = ["Problem", "VerifyReport", "verify"]
