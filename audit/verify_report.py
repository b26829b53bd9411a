"""What :func:`~sessiontree.audit.verify.verify` returns: the findings about one log, by line."""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs

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
    by a crash, an unchained file, a key repeated in a pi line).
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
        out["problems"] = [p._asdict() for p in self.problems]
        out["warnings"] = [p._asdict() for p in self.warnings]
        out["ok"] = self.ok
        out["first_bad_line"] = self.first_bad_line
        out["unverified_lines"] = self.unverified_lines
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


__all__ = ["Problem", "VerifyReport"]
