"""Walking a log's hash chain once, in order (the chain half of ``verify``).

Each line is checked against the digest the line before it *records*, so damage is pinned
to the lines it touches: an altered line fails itself, a removed or moved line makes the
next line fail, an inserted line fails (or, if its digest was forged, the line after it
fails and says so). Alongside, the walk computes the digest of the log *as it is*, from the
header on, without trusting any recorded digest: that is the head a checkpoint is compared
with, at the lines the checkpoints name.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import orjson

from sessiontree.adapters.chain import CHAIN_KEY, GENESIS, link, split


class ChainCheck:
    """The result of :func:`check_chain`."""

    __slots__ = ("anchored_at", "chained", "digests", "head", "problems")

    def __init__(self) -> None:
        self.chained = False
        self.problems: list[tuple[int, str]] = []  # (line, message), in line order
        self.head: bytes | None = None  # the digest of the whole log as it is
        self.digests: dict[int, bytes] = {}  # the same, at the lines asked for
        self.anchored_at: int | None = None  # the line whose digest is the anchor asked for


def check_chain(lines: Sequence[bytes], wanted: Collection[int] = (), anchor: bytes | None = None) -> ChainCheck:
    """Check the chain of ``lines`` (line 1 the header); an unchained log gives ``chained=False``.

    ``anchor``: a digest the log is expected to have at some line (``anchored_at`` says where)."""
    out = ChainCheck()
    if split(lines[0])[1] is None:
        later = next((n for n in range(2, len(lines) + 1) if split(lines[n - 1])[1] is not None), None)
        if later is not None:
            out.problems.append((1, (
                f"the header has no valid chain digest but line {later} has one: the header was "
                "replaced, or its chain field removed or damaged"
            )))
        elif _has_chain_key(lines[0]):
            out.problems.append((1, f"the header's {CHAIN_KEY!r} field is not a valid digest: it was damaged"))
        else:
            return out  # an unchained log
    out.chained = True
    previous: bytes | None = GENESIS  # what the line before records (None: unknown)
    before_previous: bytes | None = None
    true = GENESIS
    for lineno, line in enumerate(lines, 1):
        canonical, recorded_hex = split(line)
        true = link(true, canonical)
        if lineno in wanted:
            out.digests[lineno] = true
        if true == anchor:
            out.anchored_at = lineno
        if recorded_hex is None:
            if lineno == 1:
                previous = None
            else:
                out.problems.append((lineno, (
                    f'no valid chain digest in a chained log (the last field must be "{CHAIN_KEY}" with 64 '
                    "lowercase hex digits): the line was inserted or rewritten by a writer that does "
                    "not chain, or its digest was removed or damaged"
                )))
            continue  # the next line must chain to the line before this one
        recorded = bytes.fromhex(recorded_hex.decode("ascii"))
        if previous is not None and link(previous, canonical) != recorded:
            out.problems.append((lineno, _mismatch(lineno, canonical, recorded, before_previous)))
        before_previous, previous = previous, recorded
    out.head = true
    return out


def _mismatch(lineno: int, canonical: bytes, recorded: bytes, before_previous: bytes | None) -> str:
    if before_previous is not None and link(before_previous, canonical) == recorded:
        return f"does not chain to line {lineno - 1}, but to the line before it: line {lineno - 1} was inserted"
    if lineno == 1:
        return "the header does not match its chain digest: the header was changed"
    return (
        "does not match its chain digest: this line was changed, or a line before it was "
        "removed, inserted or moved"
    )


def _has_chain_key(line: bytes) -> bool:
    """Does a line carry a top-level chain field at all (well formed or not)?"""
    if b'"' + CHAIN_KEY.encode() + b'"' not in line:
        return False
    try:
        obj = orjson.loads(line)
    except (orjson.JSONDecodeError, RecursionError):
        return False
    return isinstance(obj, dict) and CHAIN_KEY in obj


__all__ = ["ChainCheck", "check_chain"]
