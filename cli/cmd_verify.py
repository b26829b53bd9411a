"""``sessiontree verify``: check session files, directories or a repository.

A file is read the way salvage mode reads it (``JsonlSessionStorage.open(path,
salvage=True)``): every line fully decoded, and every line that cannot be used reported
with its number and the reason (bad JSON, a bad envelope or body, a second header, a
duplicate id, a parent that is not on an earlier line, a torn last line). References that
reading tolerates but that point nowhere (a label, branch summary or compaction naming an
entry the file does not hold) are reported as warnings. A torn last line is a warning
too: reading ignores it and the next append repairs it. Exit status 1 when any error was
found.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import attrs
import orjson
from rich.text import Text

from sessiontree.cli.output import error_line, print_json, progress, stdout
from sessiontree.cli.target import feature, local_directory, open_repository, repo_url
from sessiontree.domain.errors import SessionError


@attrs.frozen
class Problem:
    line: int | None
    severity: str  # "error" or "warning"
    message: str


@attrs.define
class Report:
    path: str
    session_id: str | None = None
    dialect: str | None = None
    entries: int = 0
    problems: list[Problem] = attrs.field(factory=list)

    @property
    def errors(self) -> int:
        return sum(1 for p in self.problems if p.severity == "error")


def _line_ids(path: Path) -> dict[str, int]:
    """Entry id -> line number, from a cheap pass over the raw lines (first occurrence)."""
    out: dict[str, int] = {}
    with open(path, "rb") as handle:
        for lineno, line in enumerate(handle, 1):
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("id"), str) and lineno > 1:
                out.setdefault(obj["id"], lineno)
    return out


def _references(entries: list[Any], lines: dict[str, int]) -> list[Problem]:
    """Warnings for labels, branch summaries and compactions that name missing entries."""
    ids = {e.id for e in entries}
    out = []
    for entry in entries:
        refs = []
        if entry.type == "label":
            refs.append(("label target", entry.target_id))
        elif entry.type == "branch_summary" and entry.from_id != "root":
            refs.append(("branch summary from_id", entry.from_id))
        elif entry.type == "compaction" and entry.first_kept_entry_id is not None:
            refs.append(("compaction first_kept_entry_id", entry.first_kept_entry_id))
        for what, target in refs:
            if target not in ids:
                message = f"{entry.type} entry {entry.id!r}: {what} {target!r} is not in the session"
                out.append(Problem(lines.get(entry.id), "warning", message))
    return out


def verify_file(path: Path) -> Report:
    storage_class = feature("sessiontree.adapters.jsonl", "JsonlSessionStorage", "reading JSONL session files")
    report = Report(str(path))
    try:
        storage = storage_class.open(path, salvage=True)
    except SessionError as exc:
        if exc.code != "unsupported_version" or "salvage" not in exc.message:
            report.problems.append(Problem(exc.line or (1 if exc.code == "corrupt" else None), "error", exc.message))
            return report
        return _verify_strict(storage_class, path, report)  # old pi files: no salvage mode
    try:
        header, entries = storage.load()
        report.session_id = header.originator_id
        report.dialect = storage.codec.dialect.name
        report.entries = len(entries)
        for lineno, reason in storage.skipped:
            severity = "warning" if reason.startswith("torn last line") else "error"
            report.problems.append(Problem(lineno, severity, reason))
        report.problems.extend(_references(list(entries), _line_ids(path)))
        report.problems.sort(key=lambda p: p.line or 0)
    finally:
        storage.close()
    return report


def _verify_strict(storage_class: Any, path: Path, report: Report) -> Report:
    from sessiontree.session import Session

    try:
        with Session(storage_class.open(path)) as session:
            report.session_id = session.id
            report.dialect = session.storage.codec.dialect.name
            entries = session.get_entries()
            report.entries = len(entries)
            report.problems.extend(_references(entries, _line_ids(path)))
    except SessionError as exc:
        report.problems.append(Problem(exc.line, "error", exc.message))
    return report


def verify_repo_session(repo: Any, info: Any) -> Report:
    report = Report(info.path, session_id=info.id)
    try:
        with repo.open(info.id) as session:
            entries = session.get_entries()
            report.entries = len(entries)
            report.problems.extend(_references(entries, {}))
    except SessionError as exc:
        report.problems.append(Problem(exc.line, "error", exc.message))
    return report


def _files(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            out.extend(sorted(p for p in path.rglob("*.jsonl") if p.is_file()))
        elif path.exists():
            out.append(path)
        else:
            raise SessionError("not_found", f"no such file or directory: {name}")
    return out


def cmd_verify(args: argparse.Namespace) -> int:
    reports: list[Report] = []
    paths = list(args.paths)
    if not paths:
        directory = local_directory(repo_url(args.repo))
        if directory is not None:
            if not os.path.isdir(directory):
                open_repository(args.repo)  # raises the usual "no session repository" error
            paths = [directory]
    if paths:
        files = _files(paths)
        with progress("verifying", len(files)) as advance:
            for path in files:
                reports.append(verify_file(path))
                advance(1)
    else:
        with open_repository(args.repo) as repo:
            infos = repo.list()
            with progress("verifying", len(infos)) as advance:
                for info in infos:
                    reports.append(verify_repo_session(repo, info))
                    advance(1)
    return _print(reports, args)


def _print(reports: list[Report], args: argparse.Namespace) -> int:
    errors = sum(r.errors for r in reports)
    bad = sum(1 for r in reports if r.errors)
    if args.json:
        print_json(
            {
                "ok": errors == 0,
                "files": len(reports),
                "errors": errors,
                "warnings": sum(len(r.problems) - r.errors for r in reports),
                "reports": [attrs.asdict(r) for r in reports],
            }
        )
    else:
        console = stdout()
        for report in reports:
            mark = ("✗ ", "bold red") if report.errors else ("! ", "bold yellow") if report.problems else ("✓ ", "green")
            about = f"  {report.entries} entries" + (f", {report.dialect}" if report.dialect else "")
            console.print(Text.assemble(mark, report.path, (about, "dim")))
            for problem in report.problems:
                where = f"{report.path}:{problem.line}" if problem.line else report.path
                style = "red" if problem.severity == "error" else "yellow"
                console.print(Text.assemble("  ", where, ": ", (problem.severity, style), ": ", problem.message))
        total = sum(r.entries for r in reports)
        console.print(Text(f"checked {len(reports)} session(s), {total:,} entries: {errors} error(s)", "bold"))
    if errors:
        error_line(f"verify found {errors} error(s) in {bad} of {len(reports)} session(s)")
        return 1
    return 0
