"""``sessiontree verify`` and ``sign``: check session files, directories or a repository,
and sign checkpoints of them.

Each log goes through the library's one check, ``sessiontree.audit.verify.verify``:
the header and every line as salvage mode reads it (bad JSON, a bad envelope or body, a
second header, a duplicate id, a parent not on an earlier line), the hash chain of native
logs (an altered, removed, reordered or inserted line is named), and, with ``--key``, the
signed checkpoints kept beside a file. A torn last line and an unchained log are warnings
(``--require-chain`` makes the latter an error). ``--head`` and ``--at-least`` hold a log to
an anchor kept elsewhere (an earlier head digest, a line count), which catches a rollback.

Exit status: 1 when any log has a problem; 3 when none has, but a key was given and some
lines come after the last signed checkpoint (nothing vouches for them); else 0.
"""

from __future__ import annotations

import argparse
import os
from importlib import import_module
from pathlib import Path
from typing import Any

from rich.text import Text

from sessiontree.cli.clip import visible
from sessiontree.cli.output import CliError, error_line, print_json, progress, stdout, warn
from sessiontree.cli.target import feature, local_directory, open_repository, repo_url
from sessiontree.domain.errors import SessionError


def load_key(path: str) -> Any:
    """A checkpoint key from a file: raw HMAC key bytes, or an Ed25519 key in PEM."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read the key file {path}: {exc.strerror or exc}") from None
    if not data.startswith(b"-----BEGIN"):
        return data
    what = "Ed25519 keys (pip install 'sessiontree[signing]')"
    module = "cryptography.hazmat.primitives.serialization"
    private = b"PRIVATE KEY" in data.split(b"\n", 1)[0]
    try:
        if private:
            return feature(module, "load_pem_private_key", what)(data, password=None)
        return feature(module, "load_pem_public_key", what)(data)
    except (ValueError, TypeError) as exc:
        raise CliError(f"{path} is not a usable PEM key: {exc}") from None


def _files(paths: list[str], unread: list[str], *, named: bool = True) -> list[Path]:
    """The session files (and pruned sessions' archives) ``paths`` name, folders searched recursively; what could not be
    read (a folder that cannot be listed, a named folder holding no session file) is added to ``unread``."""
    out: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found: list[Path] = []

            def unreadable(exc: OSError) -> None:
                unread.append(f"{exc.filename}: cannot read the folder ({exc.strerror or exc}): its sessions were not checked")

            for folder, _, names in os.walk(path, onerror=unreadable):
                found += [Path(folder, n) for n in names if n.endswith((".jsonl", ".jsonl.gz"))]
            out.extend(sorted(p for p in found if p.is_file()))
            if named and not found and not any(u.startswith(name) for u in unread):
                unread.append(f"{name}: no session files (*.jsonl) in it")
        elif path.exists():
            out.append(path)
        else:
            raise SessionError("not_found", f"no such file or directory: {name}")
    return out


def _check(verify: Any, target: Any, args: argparse.Namespace, key: Any, where: str, kept: Any, advance: Any = None) -> Any:
    checkpoints = None
    if kept is not None:
        session_id = getattr(target, "id", None) or getattr(target, "session_id", None) or _session_id_of(target)
        checkpoints = [cp for cp in kept if cp.session_id == session_id]
    try:
        return verify(
            target, key=key, require_chain=args.require_chain, checkpoints=checkpoints, head=args.head, at_least=args.at_least,
            progress=advance,
        )
    except ValueError as exc:  # a key of the wrong kind or size, a malformed digest
        raise CliError(f"{where}: {exc}") from None


def _session_id_of(path: Any) -> str | None:
    """The session id a file's header names (None if it has no readable header)."""
    from sessiontree.retention.archive import ArchiveSessionStorage, is_archive
    from sessiontree.storage.jsonl import JsonlSessionStorage

    try:
        storage = ArchiveSessionStorage.open(path) if is_archive(path) else JsonlSessionStorage.open(path, salvage=False)
    except SessionError:
        return None
    storage.close()
    return storage.session_id


def _kept_checkpoints(args: argparse.Namespace) -> Any:
    """The checkpoints of ``--checkpoints FILE`` (None: each file's own sidecar is read)."""
    if args.checkpoints is None:
        return None
    if args.key is None:
        raise CliError("--checkpoints needs --key (the key checks their signatures)")
    parse = feature("sessiontree.audit.checkpoints", "read_checkpoint_file", "signed checkpoints")
    return parse(args.checkpoints)


def cmd_verify(args: argparse.Namespace) -> int:
    verify = feature("sessiontree.audit.verify", "verify", "verification")
    key = load_key(args.key) if args.key else None
    kept = _kept_checkpoints(args)
    reports: list[Any] = []
    unread: list[str] = []  # what could not be read: each is an error
    paths = list(args.paths)
    if not paths:
        directory = local_directory(repo_url(args.repo))
        if directory is not None:
            if not os.path.isdir(directory):
                open_repository(args.repo)  # raises the usual "no session repository" error
            paths = [directory]
    if paths:
        files = _files(paths, unread, named=bool(args.paths))  # an empty repository is no error; an empty folder named is
        one = len(files) == 1  # one file: its lines are counted (a large session takes seconds)
        with progress("verifying lines" if one else "verifying", None if one else len(files)) as advance:
            for path in files:
                try:
                    reports.append(_check(verify, path, args, key, str(path), kept, advance if one else None))
                except SessionError as exc:  # a file that cannot be read: said, counted, and the others checked
                    if exc.code != "storage":
                        raise
                    unread.append(str(exc).removeprefix("storage: "))
                if not one:
                    advance(1)
    else:
        with open_repository(args.repo) as repo:
            infos = repo.list()
            with progress("verifying", len(infos)) as advance:
                for info in infos:
                    with repo.open(info.id) as session:
                        reports.append(_check(verify, session, args, key, info.path, kept))
                    advance(1)
            # lines of a session the listing does not show (its header is gone): checked, so they fail
            listed = {info.id for info in infos}
            for session_id in repo.store.stream_ids():
                if session_id not in listed:
                    storage = repo.store.storage_of(session_id)
                    reports.append(_check(verify, storage, args, key, storage.location, kept))
    return _print(reports, args, unread)


def _print(reports: list[Any], args: argparse.Namespace, unread: list[str]) -> int:
    bad = [r for r in reports if not r.ok]
    errors = sum(len(r.problems) + r.omitted for r in reports) + len(unread)
    if args.json:
        print_json(
            {
                "ok": not bad and not unread,
                "files": len(reports),
                "errors": errors,
                "warnings": sum(len(r.warnings) for r in reports),
                "reports": [r.to_dict() for r in reports],
                "unreadable": unread,
            }
        )
    else:
        console = stdout()
        for report in reports:
            mark = ("✗ ", "bold red") if not report.ok else ("! ", "bold yellow") if report.warnings else ("✓ ", "green")
            kind = "hash-chained" if report.chained else "not chained"
            about = f"  {report.entries} entries, {report.dialect or '?'}, {kind}"
            if report.blobs:  # content kept out of line, each blob checked against its digest
                about += f", {report.blobs} blob(s) match"
            if report.checkpoints:
                about += f", {report.checkpoints} signed checkpoint(s)"
            console.print(Text.assemble(mark, report.source, (about, "dim")))
            if report.head:
                console.print(Text(f"  head {report.head} at line {report.lines} (keep it elsewhere: verify --head)", "dim"))
            for erased in report.redactions:
                what = (f"entry {erased['entry_id']} erased: {erased['reason']!r}, by {erased['by'] or 'unknown'} "
                        f"(the redaction record is line {erased['record_line']})")
                console.print(Text.assemble(f"  {report.source}:{erased['line']}: ", ("redacted", "cyan"), ": ", visible(what)))
            if report.unverified_from is not None:
                lines = f"{report.unverified_from}..{report.lines}"
                why = f": lines {lines} come after the last signed checkpoint (sign again to cover them)"
                console.print(Text.assemble("  ", ("unverified", "yellow"), why))
            findings = [(p, "error", "red") for p in report.problems] + [(w, "warning", "yellow") for w in report.warnings]
            findings.sort(key=lambda f: (f[0].line is None, f[0].line or 0))
            for problem, severity, style in findings:
                where = f"{problem.file}:{problem.line}" if problem.line else problem.file
                console.print(Text.assemble("  ", where, ": ", (severity, style), ": ", problem.message))
            if report.omitted:
                console.print(Text(f"  … {report.omitted} more problem(s) not listed", "dim"))
        for problem in unread:
            console.print(Text.assemble(("✗ ", "bold red"), problem))
        total = sum(r.entries for r in reports)
        console.print(Text(f"checked {len(reports)} session(s), {total:,} entries: {errors} error(s)", "bold"))
    if unread and not bad:
        error_line(f"verify could not read {len(unread)} place(s): {'; '.join(unread)}", code="storage")
        return 1
    if bad:
        more = f", and could not read {len(unread)} place(s)" if unread else ""
        error_line(f"verify found {errors} error(s) in {len(bad)} of {len(reports)} session(s){more}")
        return 1
    unsigned = [r for r in reports if r.unverified_from is not None]
    if unsigned:
        lines = sum(r.unverified_lines for r in unsigned)
        warn(f"{lines} line(s) in {len(unsigned)} session(s) come after the last signed checkpoint: unverified")
        return 3
    return 0


# -- sign -------------------------------------------------------------------------------------


def cmd_sign(args: argparse.Namespace) -> int:
    sign = feature("sessiontree.audit.checkpoints", "sign_checkpoint", "signed checkpoints")
    module = import_module("sessiontree.audit.checkpoints")
    key = load_key(args.key)
    signed: list[tuple[str, Any, Any]] = []  # (where, checkpoint, kept at)
    paths = list(args.paths)
    if not paths:
        directory = local_directory(repo_url(args.repo))
        if directory is not None:
            if not os.path.isdir(directory):
                open_repository(args.repo)
            paths = [directory]
    unread: list[str] = []
    try:
        if paths:
            files = _files(paths, unread, named=bool(args.paths))
            if unread:  # nothing is signed that would leave a session out unsaid
                raise SessionError("storage", "; ".join(unread))
            for path in files:
                checkpoint = sign(path, key, key_id=args.key_id, sequence=_sequence(module, args, path))
                where = module.append_checkpoint(args.out, checkpoint) if args.out else module.save_checkpoint(path, checkpoint)
                signed.append((str(path), checkpoint, where))
        else:
            if not args.out:
                raise CliError("sessions in a database have no file to keep checkpoints beside: pass --out FILE")
            with open_repository(args.repo) as repo:
                for info in repo.list():
                    with repo.open(info.id) as session:
                        checkpoint = sign(session, key, key_id=args.key_id, sequence=_sequence(module, args, None, info.id))
                        signed.append((info.path, checkpoint, module.append_checkpoint(args.out, checkpoint)))
    except ValueError as exc:  # a key of the wrong kind or size
        raise CliError(str(exc)) from None
    if args.json:
        print_json([{"source": src, "kept_in": str(kept), **cp.to_dict()} for src, cp, kept in signed])
        return 0
    console = stdout()
    for src, cp, kept in signed:
        where = f"  checkpoint {cp.sequence} at line {cp.line}, kept in {kept}"
        console.print(Text.assemble(("✓ ", "green"), src, (where, "dim")))
        console.print(Text(f"  head {cp.digest} (keep it elsewhere too: verify --head)", "dim"))
    return 0


def _sequence(module: Any, args: argparse.Namespace, path: Any, session_id: str | None = None) -> int | None:
    """With ``--out``: one more than the checkpoints of that session already in the file."""
    if not args.out:
        return None
    sid = session_id or _session_id_of(path)
    kept = module.read_checkpoint_file(args.out) if os.path.exists(args.out) else []
    return max((cp.sequence or 0 for cp in kept if cp.session_id == sid), default=0) + 1
