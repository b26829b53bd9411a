"""Tamper evidence: a SHA-256 hash chain over a session's lines (docs/audit.md, file-format.md).

Each native line ends with ``"chain":"<64 hex>"``, the digest of ``digest of the line before
|| the line without that field`` (the header's: of itself alone). A line is chained if and
only if the line before it is. Here: pure functions on bytes, the :class:`ChainHead` a storage
keeps (so an append never re-reads the file), and :func:`check_chain`, the walk ``verify`` makes.
"""

from __future__ import annotations

import hashlib
from binascii import hexlify
from collections.abc import Collection, Sequence
from typing import Any

from sessiontree.domain.erasure import RECORD_TYPE, STUB_KEY
from sessiontree.wire.jsontext import DECODE_ERRORS, loads
from sessiontree.wire.schema import line_of

CHAIN_KEY = "chain"
DIGEST_HEX = 64
_HEAD = b',"' + CHAIN_KEY.encode() + b'":"'
_TAIL = b'"}'
SUFFIX_LEN = len(_HEAD) + DIGEST_HEX + len(_TAIL)
GENESIS = b""  # what the header's digest is chained to
_HEX_DIGITS = b"0123456789abcdef"
_sha256 = hashlib.sha256


def split(line: bytes) -> tuple[bytes, bytes | None]:
    """``(canonical bytes, recorded digest as hex bytes)``; ``(line, None)`` without a chain field. Only a
    well-formed suffix counts: the key last, then exactly 64 lowercase hex digits."""
    n = len(line)
    if n > SUFFIX_LEN and line.endswith(_TAIL) and line[n - SUFFIX_LEN : n - SUFFIX_LEN + len(_HEAD)] == _HEAD:
        digest = line[n - DIGEST_HEX - 2 : n - 2]
        if not digest.translate(None, _HEX_DIGITS):  # lowercase hex only
            return line[: n - SUFFIX_LEN] + b"}", digest
    return line, None


def strip(line: bytes) -> bytes:
    """The line without its chain field (the bytes the codec decodes and the chain hashes)."""
    if line.endswith(_TAIL) and len(line) > SUFFIX_LEN:
        return split(line)[0]
    return line


def recorded(line: bytes) -> bytes | None:
    """The digest a line records (32 raw bytes), or None if it carries no chain field."""
    digest = split(line)[1]
    return bytes.fromhex(digest.decode("ascii")) if digest is not None else None


def link(previous: bytes, canonical: bytes) -> bytes:
    """``sha256(previous || canonical)``: the digest of a line (32 raw bytes)."""
    h = _sha256(previous)
    h.update(canonical)
    return h.digest()


def seal(canonical: bytes, previous: bytes) -> tuple[bytes, bytes]:
    """The line with its chain field appended, and its digest (raw bytes); ``canonical`` is an encoded JSON object
    with at least one key (every session line is)."""
    sealed, digest = seal_lines([canonical], previous)
    return sealed[0], digest


def seal_lines(lines: list[bytes], digest: bytes = GENESIS) -> tuple[list[bytes], bytes]:
    """Canonical lines sealed one after the other, the first after ``digest`` (a whole new log
    starts from ``GENESIS``); the sealed lines and the digest of the last."""
    out = []
    for canonical in lines:
        if len(canonical) < 3 or canonical[-1] != 125:  # 125: b"}"
            raise ValueError(f"cannot chain {canonical[:40]!r}: not a non-empty JSON object")
        h = _sha256(digest)
        h.update(canonical)  # no copy of the line to hash it after the previous digest
        digest = h.digest()
        out.append(b"".join((canonical[:-1], _HEAD, hexlify(digest), _TAIL)))
    return out, digest


class ChainHead:
    """What a storage knows of its log's chain: the digest of line ``version``.

    ``digest`` is that line's digest (raw bytes), or None when the log is not chained; ``version`` is 0 while the
    storage has not looked (it then asks its medium for the line before the one it appends, once). Keeping the
    version makes the head safe to use only for the very next line: any other append is stale and fails as a conflict.
    """

    __slots__ = ("chained", "digest", "version")

    def __init__(self) -> None:
        self.digest: bytes | None = None
        self.version = 0
        self.chained = False  # the header carries a chain: every later line must too

    def set(self, version: int, digest: bytes | None) -> None:
        self.version = version
        self.digest = digest
        if version == 1 and digest is not None:
            self.chained = True

    def observe(self, version: int, line: bytes, header: bytes | None = None) -> None:
        """Take the head from line ``version`` of the log (its last complete line);
        ``header`` (line 1) tells whether the log is chained at all."""
        self.set(version, recorded(line))
        if header is not None:
            self.chained = split(header)[1] is not None


_NO_DIGEST = (f'no valid chain digest in a chained log (the last field must be "{CHAIN_KEY}" with 64 lowercase hex '
              "digits): the line was inserted or rewritten by a writer that does not chain, or its digest was removed or damaged")


class ChainCheck:
    """The result of :func:`check_chain`: its digests are of the log as it is, trusting no recorded one."""

    __slots__ = ("anchored_at", "chained", "digests", "head", "problems", "redactions", "unapplied")

    def __init__(self) -> None:
        self.chained = False
        self.redactions: list[tuple[int, str, int]] = []  # (stub line, entry id, line of its record): erasures verified
        self.unapplied: list[tuple[str, int]] = []  # (entry id, record line): recorded erasures whose line still holds content
        self.problems: list[tuple[int, str]] = []  # (line, message), in line order
        self.head: bytes | None = None  # the digest of the whole log as it is
        self.digests: dict[int, bytes] = {}  # the same, at the lines asked for
        self.anchored_at: int | None = None  # the line whose digest is the anchor asked for


def check_chain(lines: Sequence[bytes], wanted: Collection[int] = (), anchor: bytes | None = None) -> ChainCheck:
    """Walk the chain of ``lines`` (line 1 the header) once; an unchained log gives ``chained=False``.

    Each line is checked against the digest the line before it *records*, so damage is pinned
    to the lines it touches: an altered line fails itself, a removed or moved line makes the
    next one fail, an inserted line fails (or, if its digest was forged, the line after it
    says so). ``anchor``: a digest the log is expected to have at some line (``anchored_at``)."""
    out = ChainCheck()
    if split(lines[0])[1] is None:
        problem = _header_problem(lines)
        if problem is None:
            return out  # an unchained log
        out.problems.append((1, problem))
    out.chained = True
    previous: bytes | None = GENESIS  # what the line before records (None: unknown)
    before_previous: bytes | None = None
    true = GENESIS
    erasures = Erasures()
    for lineno, line in enumerate(lines, 1):
        canonical, digest_hex = split(line)
        true = link(true, canonical)
        if lineno in wanted:
            out.digests[lineno] = true
        if true == anchor:
            out.anchored_at = lineno
        if digest_hex is None:
            if lineno == 1:
                previous = None
            else:
                out.problems.append((lineno, _NO_DIGEST))
            continue  # the next line must chain to the line before this one
        digest = bytes.fromhex(digest_hex.decode("ascii"))
        if previous is None or link(previous, canonical) == digest:
            erasures.see(lineno, canonical)  # only a line that chains can hold a record
        elif lineno > 1 and erasures.stub(lineno, canonical, digest_hex):
            true = digest  # an erased line keeps the digest of what it held (checked against its record below)
            if lineno in wanted:
                out.digests[lineno] = true
        else:
            out.problems.append((lineno, _mismatch(lineno, canonical, digest, before_previous)))
        before_previous, previous = previous, digest
    erasures.settle(out)
    out.head = true
    return out


class Erasures:
    """The erased lines of a chained log and the redaction records that must vouch for them (docs/audit.md): a stub,
    a line whose top-level ``redacted`` is true, keeps the digest of what it held; it passes only if a later record
    (a ``custom`` entry of type ``sessiontree.redaction``, on a line that chains) names its entry, its line and that
    digest. That the stub holds nothing but the placeholder is checked by verify, which can decode it."""

    def __init__(self) -> None:
        self.stubs: list[tuple[int, str, str]] = []  # (line, entry id, digest hex)
        self.records: dict[str, tuple[str, int, Any]] = {}  # entry id -> (digest hex, record line, version named)

    def see(self, lineno: int, canonical: bytes) -> None:
        if _RECORD_TAG not in canonical:
            return
        entry = line_of(_object(canonical))
        data = entry.data if entry is not None and entry.type == "custom" and entry.custom_type == RECORD_TYPE else None
        if isinstance(data, dict) and isinstance(data.get("entry_id"), str) and isinstance(data.get("digest"), str):
            self.records[data["entry_id"]] = (data["digest"], lineno, data.get("version"))

    def stub(self, lineno: int, canonical: bytes, digest_hex: bytes) -> bool:
        """Is this mismatching line a stub (to be vouched for by a record later)?"""
        if _STUB_TAG not in canonical:
            return False
        obj = _object(canonical)
        if obj.get(STUB_KEY) is not True or not isinstance(obj.get("id"), str):
            return False
        self.stubs.append((lineno, obj["id"], digest_hex.decode("ascii")))
        return True

    def settle(self, out: ChainCheck) -> None:
        vouched = set()
        for lineno, entry_id, digest in self.stubs:
            record = self.records.get(entry_id)
            if record is not None and record[0] == digest and record[1] > lineno and record[2] == lineno:
                out.redactions.append((lineno, entry_id, record[1]))
                vouched.add(entry_id)
            else:
                out.problems.append((lineno, f"is erased (entry {entry_id}) but no later redaction record names it with "
                                             "its digest: the line was changed"))
        out.unapplied = [(entry_id, line) for entry_id, (_, line, _) in self.records.items() if entry_id not in vouched]
        out.problems.sort(key=lambda problem: problem[0])


_RECORD_TAG = b'"' + RECORD_TYPE.encode() + b'"'
_STUB_TAG = b'"' + STUB_KEY.encode() + b'":true'


def _object(canonical: bytes) -> dict[str, Any]:
    try:
        obj = loads(canonical)
    except DECODE_ERRORS:
        return {}
    return obj if isinstance(obj, dict) else {}


def _header_problem(lines: Sequence[bytes]) -> str | None:
    """What is wrong with a header that has no valid chain digest (None: the log is simply unchained)."""
    later = next((n for n in range(2, len(lines) + 1) if split(lines[n - 1])[1] is not None), None)
    if later is not None:
        return (f"the header has no valid chain digest but line {later} has one: the header was "
                "replaced, or its chain field removed or damaged")
    if _has_chain_key(lines[0]):
        return f"the header's {CHAIN_KEY!r} field is not a valid digest: it was damaged"
    return None


def _mismatch(lineno: int, canonical: bytes, digest: bytes, before_previous: bytes | None) -> str:
    if before_previous is not None and link(before_previous, canonical) == digest:
        return f"does not chain to line {lineno - 1}, but to the line before it: line {lineno - 1} was inserted"
    if lineno == 1:
        return "the header does not match its chain digest: the header was changed"
    return "does not match its chain digest: this line was changed, or a line before it was removed, inserted or moved"


def _has_chain_key(line: bytes) -> bool:  # a top-level chain field at all, well formed or not
    if b'"' + CHAIN_KEY.encode() + b'"' not in line:
        return False
    try:
        obj = loads(line)
    except DECODE_ERRORS:
        return False
    return isinstance(obj, dict) and CHAIN_KEY in obj


__all__ = [
    "CHAIN_KEY", "GENESIS", "ChainCheck", "ChainHead", "check_chain", "link", "recorded", "seal", "seal_lines", "split", "strip",
]
