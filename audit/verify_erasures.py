"""What verify reports of erasures (docs/audit.md, *Erasure*): each stub the chain let through is checked to hold
nothing but the placeholder, then listed with its record's reason and author; recorded erasures not applied, and
erasures made after the last signed checkpoint, are warnings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sessiontree.audit.chain import split
from sessiontree.audit.verify_report import VerifyReport
from sessiontree.domain.erasure import erased, stub_problem
from sessiontree.domain.errors import SessionError
from sessiontree.wire.codec import Codec
from sessiontree.wire.jsontext import loads


def note_erasures(lines: Sequence[bytes], report: VerifyReport, found: Any, codec: Codec) -> None:
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


def check_signed_erasures(report: VerifyReport, signed_lines: int) -> None:
    """An erasure whose stub a checkpoint signed but whose record none did: the signature vouches for what the line
    held, not for its erasure, until the log is signed again."""
    for erasure in report.redactions:
        if erasure["line"] <= signed_lines < erasure["record_line"]:
            report.warn(erasure["line"], f"erased after the last signed checkpoint (record on line {erasure['record_line']}):"
                                         " the erasure is not signed yet; sign again to cover it")
