"""Tamper evidence: a SHA-256 hash chain over a session's lines (docs/audit.md).

Every line of a native session (header and entries) ends with one extra field,
``"chain":"<64 lowercase hex digits>"``, written last. Its value is

    digest(1) = sha256(canonical(1))                       # the header starts the chain
    digest(n) = sha256(digest(n-1) || canonical(n))        # n > 1; digest(n-1) as 32 raw bytes

where ``canonical(n)`` is line ``n`` exactly as the codec encodes it *without* the chain
field (the same bytes with the suffix ``,"chain":"..."`` cut out). Readers that do not know
the field ignore it (it is an ordinary unknown key); this library strips it before decoding,
so entries compare equal with or without it and re-encoding an entry gives its canonical
bytes. Anyone who edits, removes, inserts or reorders a line breaks the chain at that line.

The rule for writers: a line is chained if and only if the line before it is; a new native
session chains its header. Files written before chaining existed (or by other producers,
or in pi's dialect) have no chain and stay unchained when appended to.

Pure functions on bytes, plus the :class:`ChainHead` a storage keeps (the last digest), so
an append never re-reads the file. Hashing a 600-byte line costs about a microsecond.
"""

from __future__ import annotations

import hashlib
from binascii import hexlify

CHAIN_KEY = "chain"
DIGEST_HEX = 64
_HEAD = b',"' + CHAIN_KEY.encode() + b'":"'
_TAIL = b'"}'
SUFFIX_LEN = len(_HEAD) + DIGEST_HEX + len(_TAIL)
GENESIS = b""  # what the header's digest is chained to
_HEX_DIGITS = b"0123456789abcdef"
_sha256 = hashlib.sha256


def split(line: bytes) -> tuple[bytes, bytes | None]:
    """``(canonical bytes, recorded digest as hex bytes)``; ``(line, None)`` without a chain field.

    Only a well-formed suffix counts: the key last, then exactly 64 lowercase hex digits.
    """
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
    """The line with its chain field appended, and its digest (raw bytes).

    ``canonical`` is an encoded JSON object with at least one key (every session line is).
    """
    if len(canonical) < 3 or canonical[-1] != 125:  # 125: b"}"
        raise ValueError(f"cannot chain {canonical[:40]!r}: not a non-empty JSON object")
    h = _sha256(previous)
    h.update(canonical)  # no copy of the line to hash it after the previous digest
    digest = h.digest()
    return b"".join((canonical[:-1], _HEAD, hexlify(digest), _TAIL)), digest


def seal_lines(lines: list[bytes], digest: bytes = GENESIS) -> tuple[list[bytes], bytes]:
    """Canonical lines sealed one after the other, the first after ``digest`` (a whole new log
    starts from ``GENESIS``); the sealed lines and the digest of the last."""
    out = []
    for line in lines:
        sealed, digest = seal(line, digest)
        out.append(sealed)
    return out, digest


class ChainHead:
    """What a storage knows of its log's chain: the digest of line ``version``.

    ``digest`` is that line's digest (raw bytes), or None when the log is not chained;
    ``version`` is 0 while the storage has not looked (it then asks its medium for the
    line before the one it appends, once). Keeping the version makes the head safe to
    use only for the very next line: any other append is stale and fails as a conflict.
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

    @property
    def hex(self) -> str | None:
        return self.digest.hex() if self.digest else None


__all__ = [
    "CHAIN_KEY",
    "GENESIS",
    "ChainHead",
    "link",
    "recorded",
    "seal",
    "seal_lines",
    "split",
    "strip",
]
