"""Conversion between pi's dialect and the native one (``sessiontree import`` / ``export``).

Each entry is decoded and written again by the other dialect's codec: same ids, parents,
timestamps and unknown fields; what a producer left out stays out; unknown entry types are
copied but for their parent key; a ``leaf`` entry becomes pi's leaf marker and back. pi's own
files come back byte for byte after an import then an export (docs/pi.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import attrs

from sessiontree.audit.chain import GENESIS, seal_lines
from sessiontree.content.blob_stores import folder_for
from sessiontree.content.blobs import outline
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import ContextCompacted, Entry, SessionStarted, UnknownEntryAppended
from sessiontree.domain.log import EntryLog
from sessiontree.pi.pi import PiCodec, pi_codec, rename_parent_key
from sessiontree.storage.jsonl import JsonlSessionStorage
from sessiontree.wire.codec import Codec, native_codec

BATCH, BATCH_BYTES = 256, 4 << 20  # entries encoded and written together, at most


@attrs.frozen
class Conversion:
    """What a conversion did: where from and to, the dialects, how many entries, and notes
    about anything pi will read differently (empty when there is none)."""

    source: str
    dest: str
    source_dialect: str
    dest_dialect: str
    entries: int
    notes: tuple[str, ...] = ()


def _convert_entry(entry: Entry, src: Codec, dst: Codec) -> Entry:
    """The entry to write in ``dst``'s dialect: itself, or for a type neither side knows, a copy
    whose verbatim data has its parent key renamed."""
    if isinstance(entry, UnknownEntryAppended) and src.dialect.name != dst.dialect.name:
        return attrs.evolve(entry, data=rename_parent_key(entry.data, src.dialect.parent_key, dst.dialect.parent_key))
    return entry


def _notes(entry: Entry, dst: Codec) -> list[str]:
    if isinstance(dst, PiCodec) and isinstance(entry, ContextCompacted) and entry.retained_tail is not None:
        return [
            f"compaction {entry.id!r} has a retained_tail: it is kept as 'retainedTail', which pi "
            "ignores (pi keeps the entries from firstKeptEntryId instead)"
        ]
    if isinstance(dst, PiCodec) and entry.type == "active_tools_change":
        return [f"active_tools_change {entry.id!r} is kept; pi ignores it (no tools in its context)"]
    return []


def convert(
    src_path: str | os.PathLike[str], dest_path: str | os.PathLike[str], dst: Codec,
    advance: Callable[[int], None] | None = None, *, out_of_line: bool = False,
) -> Conversion:
    """Write the session of ``src_path`` as a new file ``dest_path`` in ``dst``'s dialect, entry by entry: memory
    follows a batch of entries, not the file (an older pi file, migrated whole, excepted). ``advance(n)`` is told of
    each batch of ``n`` entries written. On any error no file is left at ``dest_path``. Content is written inline (an
    export), or with ``out_of_line`` as a native repository writes it, large content in ``.blobs`` beside the file (an
    import: converting such a file again gives the same bytes)."""
    dest = Path(dest_path)
    source = JsonlSessionStorage.open(Path(src_path))
    try:
        src = source.codec
        log = source.load()[1]
        try:
            out = open(dest, "xb", opener=_private)  # noqa: SIM115  # closed below, removed on failure
        except FileExistsError:
            raise SessionError("already_exists", "a file already exists there", path=str(dest)) from None
        except OSError as exc:
            raise _write_error(dest, exc) from exc
        try:
            with out:
                store = folder_for(dest) if out_of_line and dst.dialect.name == "native" else None
                notes = _write_entries(out, source.header, log, src, dst, advance, store)
        except BaseException as exc:
            dest.unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise _write_error(dest, exc) from exc
            raise
    finally:
        source.close()
    return Conversion(
        source=str(src_path), dest=str(dest), source_dialect=src.dialect.name, dest_dialect=dst.dialect.name,
        entries=len(log), notes=tuple(dict.fromkeys(notes)),
    )


def _write_entries(
    out: BinaryIO, header: SessionStarted, log: EntryLog, src: Codec, dst: Codec, advance: Callable[[int], None] | None,
    store: Any = None,
) -> list[str]:
    """The header (an older pi file's comes out migrated) and every entry of ``log`` in ``dst``'s dialect, a batch at
    a time (large content put into ``store``, when given); a new native file is hash-chained (audit/chain.py)."""
    chained = dst.dialect.name == "native"
    digest = GENESIS
    notes: list[str] = []
    lines = [dst.encode_event(attrs.evolve(header, version=3))]
    size = 0
    for entry in log.stream():
        converted = _convert_entry(entry, src, dst)
        notes.extend(_notes(converted, dst))
        line = dst.encode_event(converted)
        lines.append(line if store is None else outline(line, store))
        size += len(lines[-1])
        if len(lines) >= BATCH or size >= BATCH_BYTES:
            digest = _flush(out, lines, digest if chained else None, advance)
            lines, size = [], 0
    _flush(out, lines, digest if chained else None, advance)
    return notes


def _flush(out: BinaryIO, lines: list[bytes], digest: bytes | None, advance: Callable[[int], None] | None) -> bytes:
    if digest is not None:
        lines, digest = seal_lines(lines, digest)
    for line in lines:  # one by one: joining would copy a batch of long lines again
        out.write(line)
        out.write(b"\n")
    if advance is not None:
        advance(len(lines))
    return digest or GENESIS


def _write_error(dest: Path, exc: OSError) -> SessionError:
    return SessionError("storage", f"cannot write the file: {exc.strerror or exc}", path=str(dest))


def _private(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW, 0o600)  # session files are private, as the storage makes them


def import_pi(src_path: str | os.PathLike[str], dest_path: str | os.PathLike[str]) -> Conversion:
    """Convert a pi session file (any version) into a new native file."""
    return convert(src_path, dest_path, native_codec())


def export_pi(src_path: str | os.PathLike[str], dest_path: str | os.PathLike[str]) -> Conversion:
    """Convert a session file (native, or pi of any version) into a new pi version 3 file."""
    return convert(src_path, dest_path, pi_codec())


__all__ = ["Conversion", "convert", "export_pi", "import_pi"]
