"""``sessiontree import`` and ``sessiontree export``.

Both go through the pi conversion (``sessiontree.adapters.pi_convert``), which re-encodes
every entry in the other dialect with the same ids, parents, timestamps and unknown
fields, and keeps fields a producer left out left out. ``import`` converts each file to
the native dialect and copies it into the repository with the repository's own
``copy_from`` (same session id and header, any backend). ``export`` writes a whole session
as a pi file (version 3; a ``leaf`` entry becomes the marker pi tolerates, docs/pi.md) or
a native file, or one branch as Markdown or HTML for sharing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.text import Text

from sessiontree.adapters.storage import SessionStorage
from sessiontree.adapters.store import SessionInfo, SessionStore
from sessiontree.cli import share
from sessiontree.cli.output import CliError, print_json, progress, stdout, warn
from sessiontree.cli.target import feature, open_repository, session_for
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import SessionStarted
from sessiontree.repository import SessionRepo


class _OneFile(SessionStore):
    """A read-only store holding one opened file: the source of ``copy_from``."""

    def __init__(self, storage: SessionStorage) -> None:
        self._storage = storage

    def store_header(self, header: SessionStarted) -> SessionStorage:
        raise SessionError("storage", f"{self._storage.location} is an import source, not a repository")

    store_lines = store_header  # type: ignore[assignment]

    def attach(self, session_id: str) -> SessionStorage:
        if session_id != self._storage.session_id:
            held = self._storage.session_id
            raise SessionError("not_found", f"{self._storage.location} holds session {held}, not {session_id}")
        return self._storage

    def remove(self, session_id: str) -> None:
        raise SessionError("storage", f"{self._storage.location} is an import source: nothing is deleted from it")

    def infos(self, cwd: str | None) -> Iterable[SessionInfo]:
        return ()


def _converter() -> Any:
    return feature("sessiontree.adapters.pi_convert", "convert", "conversion between the pi and native dialects")


def _codec(kind: str) -> Any:
    if kind == "pi":
        return feature("sessiontree.adapters.pi", "pi_codec", "the pi dialect")()
    return feature("sessiontree.adapters.codec", "native_codec", "the native codec")()


def cmd_import(args: argparse.Namespace) -> int:
    storage_class = feature("sessiontree.adapters.jsonl", "JsonlSessionStorage", "reading JSONL session files")
    convert = _converter()
    for name in args.files:
        if not os.path.isfile(name):
            raise SessionError("not_found", f"no such session file: {name}")
    imported = []
    with open_repository(args.repo, create=True) as repo, progress("importing", len(args.files)) as advance:
        for name in args.files:
            with tempfile.TemporaryDirectory() as tmp:
                # Convert to the native dialect first (keeps fields pi left out as left out),
                # then copy into the repository through its own API, whatever its backend.
                conversion = convert(name, os.path.join(tmp, "native.jsonl"), _codec("native"))
                storage = storage_class.open(conversion.dest)
                session = repo.copy_from(SessionRepo(_OneFile(storage)), storage.session_id)
            try:
                imported.append(
                    {
                        "file": name,
                        "dialect": conversion.source_dialect,
                        "session_id": session.id,
                        "location": session.storage.location,
                        "entries": len(session),
                        "notes": list(conversion.notes),
                    }
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


def _convert_out(session: Any, kind: str, output: str | None) -> tuple[bytes | None, Any]:
    """Write the session in dialect ``kind`` to ``output`` (or return the bytes for stdout)."""
    convert = _converter()
    with _as_file(session) as source, tempfile.TemporaryDirectory() as tmp:
        dest = os.path.join(tmp, "export.jsonl") if output in (None, "-") else output
        conversion = convert(source, dest, _codec(kind))
        data = Path(dest).read_bytes() if output in (None, "-") else None
    return data, conversion


def cmd_export(args: argparse.Namespace) -> int:
    if args.json:
        raise CliError("export writes its own format; --json does not apply (use --format native for JSON lines)")
    if args.leaf is not None and args.format in ("pi", "native"):
        raise CliError("--leaf applies to markdown and html exports; pi and native exports keep the whole tree")
    if args.output not in (None, "-") and os.path.exists(args.output):
        raise SessionError("already_exists", f"{args.output} already exists; choose another --output")
    size = None
    with session_for(args.repo, args.session) as session:
        if args.format in ("pi", "native"):
            data, conversion = _convert_out(session, args.format, args.output)
            for note in conversion.notes:
                warn(note)
            if data is None:
                size = os.path.getsize(args.output)
        else:
            document = share.branch_document(session, args.leaf)
            text = share.to_markdown(document) if args.format == "markdown" else share.to_html(document)
            data = text.encode("utf-8")
    if data is not None:
        size = _write(data, args.output)
    if args.output not in (None, "-"):
        stdout().print(Text(f"wrote {args.format} export to {args.output} ({size:,} bytes)"))
    return 0


def _write(data: bytes, output: str | None) -> int:
    if output is None or output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return len(data)
    # Exports hold the conversation: private, like every file sessiontree creates.
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with open(fd, "wb") as handle:
        handle.write(data)
    return len(data)


__all__ = ["cmd_export", "cmd_import"]
