"""verify's check of signed checkpoints (``checkpoints.py`` signs and reads them): each is signed by the key, for this
session, and matches the log's chain digest at its line; their sequence has no gap (docs/audit.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiontree.audit.checkpoints import Checkpoint, key_algorithm, signature_valid

if TYPE_CHECKING:
    from sessiontree.audit.verify import VerifyReport


def check_checkpoints(report: VerifyReport, checkpoints: list[Checkpoint], key: Any) -> None:
    """Each checkpoint must be signed by ``key``, for this session, and match the log's digest at its line;
    their sequence must have no gap; the lines after the last one are unverified."""
    if not checkpoints:
        if key is not None:
            report.problem(None, "a key was given but there is no signed checkpoint to check the log against")
        return
    if key is None:
        raise ValueError("checking signed checkpoints needs the key (key=...)")
    good = [cp for cp in checkpoints if _check_one(report, cp, key)]
    report.checkpoints = len(good)
    _check_sequence(report, good)
    last = max((cp.line for cp in good), default=0)
    if good and last < report.lines:
        report.unverified_from = last + 1


def _check_one(report: VerifyReport, cp: Checkpoint, key: Any) -> bool:
    where = f"checkpoint {cp.sequence or ''} of line {cp.line} signed {cp.created}".replace("checkpoint  ", "checkpoint ")
    algorithm = key_algorithm(key)
    if cp.algorithm != algorithm:
        report.problem(None, f"{where} is {cp.algorithm}, but the key given is for {algorithm}")
    elif not signature_valid(key, cp):
        report.problem(None, f"{where}: the signature does not verify with this key (forged, or another key)")
    elif cp.session_id != report.session_id:
        report.problem(None, f"{where} is for session {cp.session_id}, not {report.session_id}")
    elif cp.line > report.lines:
        report.problem(report.lines + 1, f"the log ends at line {report.lines}, but a {where} vouches for {cp.line} "
                       f"lines: lines {report.lines + 1}..{cp.line} were removed")
    elif cp.line not in report.digests:
        report.problem(cp.line, f"{where}: the log has no chain digest at that line")
    elif report.digests[cp.line].hex() != cp.digest:
        report.problem(cp.line, f"the log up to line {cp.line} differs from what the {where} vouches for")
    else:
        return True
    return False


def _check_sequence(report: VerifyReport, good: list[Checkpoint]) -> None:
    """Numbered checkpoints must follow each other (..., 4, 5, 6, ...) with lines that never go back: a gap means
    checkpoints were removed from the middle (an edit of the checkpoint file). A file may keep a later run only
    (from 4 on); cutting off the last ones is a rollback, which only an anchor kept elsewhere shows (docs/audit.md)."""
    numbered = sorted((cp.sequence, cp.line) for cp in good if cp.sequence is not None)
    expected = numbered[0][0] if numbered else 1
    previous_line = 0
    for sequence, line in numbered:
        if sequence > expected:
            missing = f"{expected}" if sequence == expected + 1 else f"{expected}..{sequence - 1}"
            report.problem(None, f"signed checkpoint(s) {missing} are missing (the sequence jumps to {sequence}): "
                           "checkpoints were removed, or the checkpoint file was rolled back")
        if line < previous_line:
            report.problem(line, f"checkpoint {sequence} vouches for line {line}, before the line an earlier one "
                           f"vouches for ({previous_line})")
        expected = max(expected, sequence + 1)
        previous_line = max(previous_line, line)
