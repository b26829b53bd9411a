"""``sessiontree import`` and ``sessiontree export``.

Both go through the pi conversion (``sessiontree.pi.pi_convert``), which re-encodes
every entry in the other dialect with the same ids, parents, timestamps and unknown
fields, and keeps fields a producer left out left out. ``import`` converts each file (every
``*.jsonl`` under a directory) to the native dialect and copies it into the repository with
the repository's own ``copy_from`` (same session id and header, any backend); a session
already there with the same lines is skipped, so an import can be run again, and a bad file
is reported while the rest go on. ``export`` writes a whole session as a pi file (version 3;
a ``leaf`` entry becomes the marker pi tolerates, docs/pi.md) or a native file, or one
branch as Markdown or HTML for sharing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from rich.text import Text

from sessiontree.cli import share
from sessiontree.cli.destination import OneFile, open_target, refuse_foreign
from sessiontree.cli.output import CliError, error_line, print_json, progress, stdout, warn
from sessiontree.cli.target import feature, repo_url, session_for
from sessiontree.domain.errors import SessionError
from sessiontree.repository import SessionRepo

COPY_CHUNK = 1 << 20


def _converter() -> Any:
    return feature("sessiontree.pi.pi_convert", "convert", "conversion between the pi and native dialects")


def _codec(kind: str) -> Any:
    if kind == "pi":
        return feature("sessiontree.pi.pi", "pi_codec", "the pi dialect")()
    return feature("sessiontree.wire.codec", "native_codec", "the native codec")()


def _sources(names: list[str]) -> Iterator[tuple[str, SessionError | None]]:
    """Each file to import (a directory gives every ``*.jsonl`` under it, pi's sub-folders included), or the error of
    a name that gives none."""
    for name in names:
        if os.path.isdir(name):
            found = sorted(str(p) for p in [*Path(name).rglob("*.jsonl"), *Path(name).rglob("*.jsonl.gz")] if p.is_file())
            if not found:
                yield name, SessionError("not_found", f"no session files (*.jsonl) under {name}")
            for path in found:
                yield path, None
        elif os.path.isfile(name):
            yield name, None
        else:
            where = "pi keeps its sessions there: is pi installed, or are they elsewhere?"
            hint = f" ({where})" if Path(name).parts[-3:] == (".pi", "agent", "sessions") else ""
            yield name, SessionError("not_found", f"no such session file or folder: {name}{hint}")


def _stored_copy(repo: SessionRepo, session_id: str, lines: list[bytes], name: str) -> str | None:
    """Where the session already is in ``repo`` with these lines (appends made there since are fine), or None if it is
    not there. A copy that differs is ``already_exists``: nothing is overwritten."""
    if not repo.exists(session_id):
        return None
    stored = repo.store.attach(session_id)
    try:
        held, location = stored.read_lines(), stored.location
    finally:
        stored.close()
    if held[: len(lines)] == lines:
        return location
    raise SessionError(
        "already_exists",
        f"{name}: session {session_id} is already in the repository ({location}) with different content "
        f"({len(held)} lines there, {len(lines)} here: did the source change since it was imported?); not imported",
    )


def _import_one(repo: SessionRepo, name: str, salvage: bool = False) -> dict[str, Any]:
    try:
        return _import_whole(repo, name)
    except SessionError as exc:
        if exc.code != "corrupt" or not salvage:
            raise
    return _import_salvaged(repo, name)


def _import_whole(repo: SessionRepo, name: str) -> dict[str, Any]:
    storage_class = feature("sessiontree.storage.jsonl", "JsonlSessionStorage", "reading JSONL session files")
    with tempfile.TemporaryDirectory() as tmp:
        # Convert to the native dialect first (keeps fields pi left out as left out), then copy into the
        # repository through its own API, whatever its backend.
        conversion = _converter()(_unpacked(name, tmp), os.path.join(tmp, "native.jsonl"), _codec("native"), out_of_line=True)
        storage = storage_class.open(conversion.dest)
        try:
            sid = storage.session_id
            item = {"file": name, "status": "imported", "dialect": conversion.source_dialect, "session_id": sid}
            there = _stored_copy(repo, sid, storage.read_lines(), name)
            if there is not None:  # imported before: same id, same lines
                return {**item, "status": "already_there", "location": there, "entries": conversion.entries, "notes": []}
            session = repo.copy_from(SessionRepo(OneFile(storage)), sid)
        finally:
            storage.close()
    try:
        location, entries = session.storage.location, len(session)
    finally:
        session.close()
    return {**item, "location": location, "entries": entries, "notes": list(conversion.notes)}


def _import_salvaged(repo: SessionRepo, name: str) -> dict[str, Any]:
    """``--salvage``: a file that fails verify is copied as far as it can be read; the copy's header records the lines
    skipped and the source's head (``source``). Run again on the same file, it is already there."""
    from sessiontree.cli.destination import file_source

    source, sid = file_source(name)
    with source:
        stored = source.store.attach(sid)  # the file's one storage, closed with its source
        dialect = stored.codec.dialect.name
        if repo.exists(sid):
            there = repo.open(sid)
            try:
                record, location = there.header.extra.get("source"), there.storage.location
            finally:
                there.close()
            lines = len(stored.read_lines())
            if isinstance(record, dict) and record.get("lines") == lines:
                return {"file": name, "status": "already_there", "dialect": dialect, "session_id": sid, "location": location,
                        "entries": None, "notes": []}
            raise SessionError("already_exists", f"{name}: session {sid} is already in the repository ({location}) "
                                                 "with other content; not imported")
        session = repo.copy_from(source, sid, salvage=True)
    try:
        location, entries = session.storage.location, len(session)
        skipped = session.header.extra["source"]["skipped"]
    finally:
        session.close()
    shown = ", ".join(map(str, skipped[:10])) + (", ..." if len(skipped) > 10 else "")
    warn(f"{name}: imported what could be read; {len(skipped)} line(s) skipped ({shown}), as the copy's header records "
         f"(`verify {name}` says why)")
    return {"file": name, "status": "imported", "dialect": dialect, "session_id": sid, "location": location,
            "entries": entries, "notes": [], "skipped": skipped}


def _read_transcript(name: str) -> list[dict[str, Any]]:
    """The lines of a Claude Code transcript file (JSON objects, one a line; blank lines skipped)."""
    import msgspec

    lines = []
    with open(name, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                line = msgspec.json.decode(raw)
            except msgspec.DecodeError as exc:
                raise SessionError("corrupt", f"{name}:{number}: not JSON ({exc})") from None
            if not isinstance(line, dict):
                raise SessionError("corrupt", f"{name}:{number}: not a JSON object")
            lines.append(line)
    return lines


def _import_claude_code(repo: SessionRepo, name: str) -> dict[str, Any]:
    """A Claude Code transcript as the session the Claude Agent SDK store would mirror it to: the key is the file's folder
    (the project) and name (the session id), or for a subagent's transcript its place under ``SESSION/subagents/``. A
    session holding these lines already is left as it is; one holding the first of them (the transcript grew since)
    gets the rest; one holding others is refused."""
    from contextlib import closing

    from sessiontree.integrations import claude_code_entries as cc

    lines = _read_transcript(name)
    key = _claude_code_key(Path(name).resolve())
    sid = cc.session_id_for(key)
    item = {"file": name, "status": "imported", "dialect": "claude-code", "session_id": sid, "notes": []}
    if repo.exists(sid):
        session = repo.open(sid)
        with closing(session):
            held = cc.read_lines(session)
            if held != lines[: len(held)]:
                raise SessionError(
                    "already_exists", f"{name}: session {sid} is already in the repository ({session.storage.location}) "
                    "with other lines; not imported")
            if len(held) == len(lines):
                return {**item, "status": "already_there", "location": session.storage.location, "entries": len(session)}
            cc.append_lines(session, lines, [len(held)])
            return {**item, "location": session.storage.location, "entries": len(session)}
    cwd = next((line["cwd"] for line in lines if isinstance(line.get("cwd"), str)), "")
    session = repo.create(cwd, metadata={cc.KEY: key}, session_id=sid)
    with closing(session):
        try:
            cc.append_lines(session, lines)
        except BaseException:
            repo.delete(sid)  # a half-imported transcript is not left behind
            raise
        return {**item, "location": session.storage.location, "entries": len(session)}


def _claude_code_key(path: Path) -> dict[str, str]:
    """The ``SessionKey`` of a transcript file where Claude Code keeps it: ``PROJECT/SESSION.jsonl``, or a subagent's
    ``PROJECT/SESSION/subagents/.../agent-ID.jsonl`` (subpath ``subagents/.../agent-ID``)."""
    parts = path.parts
    stem = path.name.removesuffix(".jsonl")
    if "subagents" in parts[:-1]:
        at = len(parts) - 2 - parts[:-1][::-1].index("subagents")
        if at >= 2:
            return {"project_key": parts[at - 2], "session_id": parts[at - 1],
                    "subpath": "/".join([*parts[at:-1], stem])}
    return {"project_key": path.parent.name or "-", "session_id": stem}


def _claude_code_lines(session: Any) -> bytes:
    """The Claude Code transcript lines a session holds, as a transcript file (compact JSON, one a line)."""
    import msgspec

    from sessiontree.integrations import claude_code_entries as cc

    lines = cc.read_lines(session)
    if not lines and cc.KEY not in session.header.metadata:
        raise CliError(f"session {session.id} holds no Claude Code transcript lines (export --format native keeps it whole)")
    return b"".join(msgspec.json.encode(line) + b"\n" for line in lines)


def _unpacked(name: str, tmp: str) -> str:
    """The file to import: ``name``, or for a pruned session's archive its log written out in ``tmp`` (a restore)."""
    from sessiontree.content.blob_stores import digests_of, folder_for
    from sessiontree.retention.archive import is_archive, read_archive

    if not is_archive(name):
        return name
    restored = os.path.join(tmp, "archived.jsonl")
    lines = read_archive(name)
    with open(restored, "wb") as handle:
        handle.writelines(line + b"\n" for line in lines)
    # the content it keeps out of line went into the archive folder's blob store: the restored log reads it beside it
    folder_for(name).copy_to(folder_for(restored), digests_of(lines))
    return restored


def _failure(name: str, exc: Exception, salvage: bool) -> dict[str, Any]:
    if isinstance(exc, SessionError):
        code, message = exc.code, str(exc)[len(exc.code) + 2 :]  # "path:line: message", without the code
    else:
        code, message = "storage", f"{getattr(exc, 'strerror', None) or exc}"
    if name not in message:
        message = f"{name}: {message}"
    if code == "corrupt" and not salvage:
        message += " (run it again with --salvage to import what can be read; the file is not changed)"
    return {"file": name, "status": "failed", "code": code, "message": message}


def cmd_import(args: argparse.Namespace) -> int:
    url = repo_url(args.repo)
    refuse_foreign(url, "the imported sessions")
    sources = list(_sources(list(args.files)))
    items: list[dict[str, Any]] = []
    repo = open_target(url) if any(error is None for _, error in sources) else None
    try:
        with progress("importing", len(sources)) as advance:
            for name, error in sources:
                try:
                    if error is not None:
                        raise error
                    assert repo is not None  # opened whenever there is a file
                    if args.format == "claude-code":
                        items.append(_import_claude_code(repo, name))
                    else:
                        items.append(_import_one(repo, name, args.salvage))
                except (SessionError, OSError) as exc:
                    items.append(_failure(name, exc, args.salvage))
                advance(1)
    finally:
        if repo is not None:
            repo.close()
    return _report(items, args.json)


def _report(items: list[dict[str, Any]], as_json: bool) -> int:
    counts = {status: sum(1 for i in items if i["status"] == status) for status in ("imported", "already_there", "failed")}
    for item in items:
        if item["status"] == "failed":
            error_line(f"{item['code']}: {item['message']}", code=item["code"])
    if as_json:
        print_json(items)
    else:
        console = stdout()
        for item in items:
            if item["status"] == "imported":
                console.print(Text.assemble(
                    f"imported {item['file']} ({item['dialect']}, {item['entries']} entries) as ",
                    (item["session_id"], "bold cyan"), f" → {item['location']}",
                ))
            elif item["status"] == "already_there":
                console.print(Text(f"already there: {item['file']} as {item['session_id']} ({item['location']})"))
        console.print(Text(
            f"imported {counts['imported']}, already there {counts['already_there']}, failed {counts['failed']}"
        ))
    return 1 if counts["failed"] else 0


@contextmanager
def _as_file(session: Any) -> Iterator[str]:
    """A file holding the session: its own, or a native dump of it (database repositories)."""
    path = getattr(session.storage, "path", None)
    if path is not None and os.path.isfile(path):
        yield str(path)
        return
    codec = _codec("native")
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "session.jsonl")
        with open(dump, "wb") as handle:
            handle.write(codec.encode_event(session.header) + b"\n")
            for entry in session.get_entries():
                handle.write(codec.encode_event(entry) + b"\n")
        yield dump


def _convert_out(session: Any, kind: str, output: str | None) -> tuple[int, Any]:
    """Write the session in dialect ``kind`` to ``output`` (or stdout), entry by entry; the bytes written."""
    convert = _converter()
    with _as_file(session) as source, tempfile.TemporaryDirectory() as tmp:
        dest = os.path.join(tmp, "export.jsonl")
        with progress("exporting", len(session) + 1) as advance:
            conversion = convert(source, dest, _codec(kind), advance)
        with open(dest, "rb") as converted:
            if output in (None, "-"):
                shutil.copyfileobj(converted, sys.stdout.buffer, COPY_CHUNK)
                sys.stdout.flush()
            else:
                with _new_document(output) as out:
                    shutil.copyfileobj(converted, out, COPY_CHUNK)
        return os.path.getsize(dest), conversion


def cmd_export(args: argparse.Namespace) -> int:
    if args.json:
        raise CliError("export writes its own format; --json does not apply (use --format native for JSON lines)")
    if args.leaf is not None and args.format in ("pi", "native", "claude-code"):
        raise CliError("--leaf applies to markdown and html exports; pi, native and claude-code exports keep the whole tree")
    if args.output not in (None, "-") and os.path.exists(args.output):
        raise SessionError("already_exists", f"{args.output} already exists; choose another --output")
    size = None
    with session_for(args.repo, args.session, args) as session:  # --salvage, --leaf by prefix or label
        if args.format == "claude-code":
            data = _claude_code_lines(session)
        elif args.format in ("pi", "native"):
            size, conversion = _convert_out(session, args.format, args.output)
            for note in conversion.notes:
                warn(note)
            data = None
        else:
            document = share.branch_document(session, args.leaf, full=getattr(args, "full", False))
            text = share.to_markdown(document) if args.format == "markdown" else share.to_html(document)
            data = text.encode("utf-8")
    if data is not None:
        size = _write(data, args.output)
    if args.output not in (None, "-"):
        stdout().print(Text(f"wrote {args.format} export to {args.output} ({size:,} bytes)"))
    return 0


@contextmanager
def _new_document(output: str) -> Iterator[BinaryIO]:
    """A new file for an export: never an existing one or a link, its mode from the umask. An export is a document the
    user shares (session logs, the native copies import and fork write, stay 0600)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(output, flags, 0o666)
    except FileExistsError:
        raise SessionError("already_exists", f"{output} already exists; choose another --output") from None
    with open(fd, "wb") as handle:
        yield handle


def _write(data: bytes, output: str | None) -> int:
    if output is None or output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return len(data)
    with _new_document(output) as handle:
        handle.write(data)
    return len(data)


__all__ = ["cmd_export", "cmd_import"]
