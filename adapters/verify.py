"""Verify a session log: every line's structure and, when the log is chained, its hash chain.

``verify(target)`` takes a session file path, a storage (JSONL or any database storage),
or a ``Session``, and returns a :class:`VerifyReport`. It reads the log once, in order
(O(size)), and never writes. A file is read from the disk, not from any copy in memory.

* **Structure**: the header, then each line as salvage mode reads it (valid, bounded JSON;
  a good envelope; a parent on an earlier line; a new id; a body the codec accepts).
* **Chain** (``adapters/chain.py``): each line's digest must equal
  ``sha256(digest of the line before || the line without its chain field)``. A line is
  checked against the digest the line before it *records*, so damage is pinned to the lines
  it touches: an altered line fails itself, a removed or moved line makes the next line
  fail, an inserted line fails (or, if whoever inserted it also forged its digest, the line
  after it fails).
* **Signed checkpoints** (``adapters/checkpoints.py``): a checkpoint signs the chain digest
  at one line; with the key, verify checks the signature and that the log still has that
  digest at that line, which also catches lines removed from the end (a plain chain cannot).

Files without a chain (written before chaining, by other producers, or in pi's dialect)
are reported as ``chained=False`` with a warning; their structure is still checked.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import attrs

from sessiontree.adapters import chain, jsontext
from sessiontree.adapters.chain_check import check_chain
from sessiontree.adapters.codec import Codec, native_codec
from sessiontree.adapters.files import is_whole_line, open_regular
from sessiontree.adapters.jsonl_scan import envelope_problem, read_header, tree_problem
from sessiontree.adapters.jsontext import duplicate_key, line_problem, parse
from sessiontree.domain.errors import SessionError

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

    ``head`` is the chain digest of the log as it now is (hex; None if not chained): write
    it down, or sign it (``sign_checkpoint``), to detect later changes, truncation included.
    ``warnings`` are findings that do not make the log untrustworthy (a torn last line left
    by a crash, an unchained file, lines after the last signed checkpoint).
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
        out["problems"] = [p._asdict() for p in self.problems]
        out["warnings"] = [p._asdict() for p in self.warnings]
        out["ok"] = self.ok
        out["first_bad_line"] = self.first_bad_line
        out["unverified_lines"] = self.unverified_lines
        return out

    def summary(self) -> str:
        """One line for people: the verdict, what was checked and the first problem."""
        kind = "hash-chained" if self.chained else "NOT chained (structure only)"
        what = f"{self.lines} lines, {self.entries} entries, {kind}"
        if self.ok:
            signed = f", {self.checkpoints} signed checkpoint(s) match" if self.checkpoints else ""
            if self.unverified_from is not None:
                signed += f"; lines {self.unverified_from}..{self.lines} come after the last one: UNVERIFIED"
            head = f"; head {self.head}" if self.head else ""
            return f"{self.source}: ok ({what}{signed}){head}"
        count = len(self.problems) + self.omitted
        return f"{self.source}: {count} problem(s) ({what}); first: {self.problems[0]}"


def verify(
    target: Any,
    *,
    key: Any = None,
    checkpoints: Iterable[Any] | None = None,
    require_chain: bool = False,
    head: str | None = None,
    at_least: int | None = None,
) -> VerifyReport:
    """Check a session log (see the module documentation) and report what is wrong.

    ``target``: a path to a session file, a ``JsonlSessionStorage`` (its file is read
    again), a database or in-memory storage, or a ``Session``. ``key`` (HMAC key bytes or an
    Ed25519 key) checks ``checkpoints``; for a file, ``checkpoints=None`` with a key reads
    the file's sidecar (``<file>.checkpoints``). With ``require_chain`` an unchained log is
    a problem, not a warning. Raises ``SessionError`` only when the log cannot be reached
    (``not_found``, ``storage``); everything wrong inside it is in the report.

    Anchors kept outside the log catch a rollback (the log cut back, or cut back and
    re-extended) that a chain alone, and checkpoints kept beside the file, cannot:
    ``head`` (a head digest an earlier ``verify`` or ``sign`` printed) must be the log's
    digest at some line, and ``at_least`` is the fewest lines the log may have.
    """
    from sessiontree.adapters import checkpoints as cps

    storage = getattr(target, "storage", target)  # a Session
    path = getattr(storage, "path", None) if not isinstance(storage, (str, os.PathLike)) else storage
    if path is None and not (hasattr(storage, "recorder") and hasattr(storage, "session_id")):
        raise TypeError(f"verify needs a session file path, a storage or a Session, not {target!r}")
    if checkpoints is None and key is not None and path is not None:
        checkpoints = cps.load_checkpoints(path)
    signed = cps.parse_all(checkpoints or ())
    wanted = {cp.line for cp in signed}
    anchor = _anchor(head)
    report = _verify_file(Path(path), wanted, anchor) if path is not None else _verify_records(storage, wanted, anchor)
    if not report.chained:
        message = (
            "pi-dialect file: pi's format has no chain, so it is not tamper-evident; structure checked"
            if report.dialect == "pi"
            else "no chain: this log is not tamper-evident (written before chaining, or by another "
            "producer); structure checked"
        )
        (report.problem if require_chain else report.warn)(None, message)
    cps.check_checkpoints(report, signed, key)
    _check_anchors(report, head, at_least)
    report.problems.sort(key=lambda p: (p.line is None, p.line or 0))
    return report


def _anchor(head: str | None) -> bytes | None:
    if head is None:
        return None
    if not isinstance(head, str) or len(head) != 64 or head.strip("0123456789abcdef"):
        raise ValueError(f"a head digest is 64 lowercase hex digits (what verify and sign print), not {head!r}")
    return bytes.fromhex(head)


def _check_anchors(report: VerifyReport, head: str | None, at_least: int | None) -> None:
    if head is not None and report.anchored_at is None:
        report.problem(
            None,
            f"the log never has the head {head} it was anchored to: it was rolled back (cut, or cut "
            "and extended again) or rewritten since that head was taken",
        )
    if at_least is not None and report.lines < at_least:
        report.problem(
            report.lines + 1,
            f"the log has {report.lines} lines, fewer than the {at_least} it is known to have had: "
            f"lines {report.lines + 1}..{at_least} were removed",
        )


# -- sources --------------------------------------------------------------------------------


def _verify_file(path: Path, wanted: set[int], anchor: bytes | None) -> VerifyReport:
    report = VerifyReport(str(path))
    try:
        fd = open_regular(path)
        try:
            data = _read_all(fd)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise SessionError("not_found", "no session file there", path=str(path)) from None
    except OSError as exc:
        raise SessionError("storage", f"cannot read the file: {exc.strerror or exc}", path=str(path)) from exc
    lines = data.split(b"\n")
    tail = lines.pop()
    if tail and is_whole_line(tail):
        lines.append(tail)  # a last line without a newline (another producer's habit)
    elif tail:
        report.warn(
            len(lines) + 1,
            f"torn last line ({len(tail)} bytes, an append interrupted by a crash): not part of the "
            "log; the next append removes it",
        )
    if not lines:
        report.problem(1, "the file is empty: no session header")
        return report
    _check(lines, report, path, wanted, anchor)
    return report


def _read_all(fd: int) -> bytes:
    """The whole file behind ``fd`` (a regular file: its size bounds the read)."""
    size = os.fstat(fd).st_size
    parts = [os.pread(fd, size, 0)]
    offset = len(parts[0])
    while more := os.pread(fd, 1 << 20, offset):  # it grew meanwhile
        parts.append(more)
        offset += len(more)
    return b"".join(parts)


def _verify_records(storage: Any, wanted: set[int], anchor: bytes | None) -> VerifyReport:
    report = VerifyReport(storage.location, session_id=storage.session_id)
    from eventsourcing.persistence import PersistenceError

    try:
        stored = storage.recorder.select_events(storage.session_id)
    except PersistenceError as exc:
        raise SessionError("storage", f"could not read session {storage.session_id}: {exc}") from exc
    if not stored:
        raise SessionError("not_found", f"session {storage.session_id} not found at {storage.location}")
    lines = []
    for expected, item in enumerate(stored, 1):
        if item.originator_version != expected:
            report.problem(expected, f"version {expected} is missing (the next stored is {item.originator_version})")
            break
        lines.append(bytes(item.state))
    if lines:
        _check(lines, report, storage.location, wanted, anchor)
    return report


# -- the checks -----------------------------------------------------------------------------


def _check(lines: list[bytes], report: VerifyReport, where: Any, wanted: set[int], anchor: bytes | None) -> None:
    report.lines = len(lines)
    codec = native_codec()
    try:
        if len(lines[0]) > jsontext.MAX_LINE_BYTES:
            raise SessionError("corrupt", f"the header line of {len(lines[0])} bytes is over the size limit")
        header, codec = read_header(lines[0], where)
        report.session_id = header.originator_id
        report.dialect = codec.dialect.name
    except SessionError as exc:
        report.problem(1, exc.message)
    if report.dialect == "pi":
        _check_pi(Path(where), report)
        for lineno, line in enumerate(lines, 1):  # pi reads the last value: a warning, not damage
            key = duplicate_key(line)
            if key is not None:
                report.warn(lineno, f"key {key!r} appears twice in one object; its last value is read, as pi does")
    else:
        _check_entries(lines, report, codec)
    _check_chain(lines, report, wanted, anchor)  # pi files have none, unless a native header was damaged


def _loads(line: bytes) -> Any:
    problem = line_problem(line)
    if problem is not None:
        raise ValueError(problem)
    try:
        return parse(chain.strip(line))
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"invalid JSON ({exc})") from None


def _check_entries(lines: Sequence[bytes], report: VerifyReport, codec: Codec) -> None:
    """Every entry line as salvage mode reads it; a bad line is reported, then skipped."""
    parent_key = codec.dialect.parent_key
    sid = report.session_id or "?"
    ids: set[str] = set()
    for index in range(1, len(lines)):
        lineno = index + 1
        try:
            obj = _loads(lines[index])
        except ValueError as exc:
            report.problem(lineno, str(exc))
            continue
        problem = envelope_problem(obj, parent_key) or tree_problem(obj, parent_key, ids)
        if problem is None:
            try:
                codec.decode_entry(obj, sid, lineno)
            except SessionError as exc:
                problem = exc.message
            except RecursionError:
                problem = "nested too deeply to decode"
        if problem is not None:
            report.problem(lineno, problem)
            continue
        ids.add(obj["id"])
        report.entries += 1


def _check_pi(path: Path, report: VerifyReport) -> None:
    """A pi file, read by the pi storage (salvage mode; strict for versions it cannot salvage)."""
    from sessiontree.adapters.jsonl import JsonlSessionStorage

    try:
        storage = JsonlSessionStorage.open(path, salvage=True)
    except SessionError as exc:
        if exc.code != "unsupported_version":
            report.problem(exc.line, exc.message)
            return
        try:
            storage = JsonlSessionStorage.open(path)
        except SessionError as inner:
            report.problem(inner.line, inner.message)
            return
        try:
            _, log = storage.load()
            report.entries = len(list(log))  # every entry decoded
        except SessionError as inner:
            report.problem(inner.line, inner.message)
        finally:
            storage.close()
        return
    try:
        _, entries = storage.load()
        report.entries = len(entries)
        for lineno, reason in storage.skipped:
            if not reason.startswith("torn last line"):
                report.problem(lineno, reason)
    finally:
        storage.close()


def _check_chain(lines: Sequence[bytes], report: VerifyReport, wanted: set[int], anchor: bytes | None) -> None:
    found = check_chain(lines, wanted, anchor)
    report.anchored_at = found.anchored_at
    report.chained = report.chained or found.chained
    for line, message in found.problems:
        report.problem(line, message)
    report.digests.update(found.digests)
    if found.head is not None:
        report.head = found.head.hex()


__all__ = ["Problem", "VerifyReport", "verify"]
