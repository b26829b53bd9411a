"""``sessiontree import`` and ``sessiontree export``.

``import`` copies session files (pi's dialect, any version pi wrote, or ours) into the
repository with the same session id, header and entries, through the repository's own
``copy_from``: every field is kept, and the copy is native from then on. ``export`` writes
a session back out as a pi file (pi's dialect, version 3; a ``leaf`` entry becomes the
custom marker pi tolerates, see docs/pi.md), as a native JSONL file, or writes one branch
as Markdown or HTML for sharing.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from typing import Any

from rich.text import Text

from sessiontree.adapters.repo import SessionInfo, SessionRepo
from sessiontree.adapters.storage import SessionStorage
from sessiontree.cli import share
from sessiontree.cli.output import CliError, print_json, progress, stdout
from sessiontree.cli.target import feature, open_repository, session_for
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted


class _OneFile(SessionRepo):
    """A read-only "repository" holding one opened file: the source of ``copy_from``."""

    def __init__(self, storage: SessionStorage) -> None:
        super().__init__()
        self._storage = storage

    def _store_header(self, header: SessionStarted) -> SessionStorage:
        raise SessionError("storage", f"{self._storage.location} is an import source, not a repository")

    def _attach(self, session_id: str) -> SessionStorage:
        return self._storage

    def _remove(self, session_id: str) -> None:
        return None

    def _infos(self, cwd: str | None) -> Iterable[SessionInfo]:
        return ()


def cmd_import(args: argparse.Namespace) -> int:
    storage_class = feature("sessiontree.adapters.jsonl", "JsonlSessionStorage", "reading JSONL session files")
    for name in args.files:
        if not os.path.isfile(name):
            raise SessionError("not_found", f"no such session file: {name}")
    imported = []
    with open_repository(args.repo, create=True) as repo, progress("importing", len(args.files)) as advance:
        for name in args.files:
            storage = storage_class.open(name)
            dialect = storage.codec.dialect.name
            session = repo.copy_from(_OneFile(storage), storage.session_id)
            try:
                imported.append(
                    {"file": name, "dialect": dialect, "session_id": session.id, "location": session.storage.location, "entries": len(session)}
                )
            finally:
                session.close()
            advance(1)
    if args.json:
        print_json(imported)
        return 0
    console = stdout()
    for item in imported:
        console.print(
            Text.assemble(
                f"imported {item['file']} ({item['dialect']}, {item['entries']} entries) as ",
                (item["session_id"], "bold cyan"),
                f" → {item['location']}",
            )
        )
    return 0


def _codec(kind: str) -> Any:
    if kind == "pi":
        return feature("sessiontree.adapters.pi", "pi_codec", "the pi dialect")()
    return feature("sessiontree.adapters.codec", "native_codec", "the native codec")()


def session_lines(session: Any, kind: str) -> bytes:
    """The whole session (header and every entry) as JSONL in the ``kind`` dialect."""
    if kind == "pi":
        for entry in session.find_entries("compaction"):
            if entry.retained_tail is not None:
                raise SessionError(
                    "invalid_entry",
                    f"compaction {entry.id!r} of session {session.id} keeps a retained_tail, which pi "
                    "cannot represent; export it as native instead",
                )
    codec = _codec(kind)
    lines = [codec.encode_event(session.header)]
    lines.extend(codec.encode_event(entry) for entry in session.get_entries())
    return b"\n".join(lines) + b"\n"


def _write(data: bytes, output: str | None) -> None:
    if output is None or output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    if os.path.exists(output):
        raise SessionError("already_exists", f"{output} already exists; choose another --output")
    with open(output, "xb") as handle:
        handle.write(data)


def cmd_export(args: argparse.Namespace) -> int:
    if args.json:
        raise CliError("export writes its own format; --json does not apply (use --format native for JSON lines)")
    if args.leaf is not None and args.format in ("pi", "native"):
        raise CliError("--leaf applies to markdown and html exports; pi and native exports keep the whole tree")
    with session_for(args.repo, args.session) as session:
        if args.format in ("pi", "native"):
            data = session_lines(session, args.format)
        else:
            document = share.branch_document(session, args.leaf)
            text = share.to_markdown(document) if args.format == "markdown" else share.to_html(document)
            data = text.encode("utf-8")
    _write(data, args.output)
    if args.output not in (None, "-"):
        stdout().print(Text(f"wrote {args.format} export to {args.output} ({len(data):,} bytes)"))
    return 0


__all__ = ["cmd_export", "cmd_import"]
