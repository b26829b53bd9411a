"""Conversion between pi's dialect and the native one (``sessiontree import`` / ``export``).

Each entry is decoded and written again by the other dialect's codec: same ids, parents,
timestamps and unknown fields; what a producer left out stays out; unknown entry types are
copied but for their parent key; a ``leaf`` entry becomes pi's leaf marker and back. pi's own
files come back byte for byte after an import then an export (docs/pi.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from sessiontree.adapters.blob_stores import folder_for
from sessiontree.adapters.blobs import outline
from sessiontree.adapters.chain import seal_lines
from sessiontree.adapters.codec import Codec, native_codec
from sessiontree.adapters.jsonl import JsonlSessionStorage
from sessiontree.adapters.pi import PiCodec, pi_codec, rename_parent_key
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import ContextCompacted, Entry, UnknownEntryAppended


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
    src_path: str | os.PathLike[str], dest_path: str | os.PathLike[str], dst: Codec, *, out_of_line: bool = False,
) -> Conversion:
    """Write the session of ``src_path`` as a new file ``dest_path`` in ``dst``'s dialect: whole, its content inline
    (an export), or with ``out_of_line`` as a native repository writes it, large content in ``.blobs`` beside it (an
    import: converting such a file again gives the same bytes)."""
    dest = Path(dest_path)
    source = JsonlSessionStorage.open(Path(src_path))
    try:
        src = source.codec
        lines = [dst.encode_event(attrs.evolve(source.header, version=3))]  # an older pi file comes out migrated
        notes: list[str] = []
        for entry in source.load()[1]:
            converted = _convert_entry(entry, src, dst)
            notes.extend(_notes(converted, dst))
            lines.append(dst.encode_event(converted))
    finally:
        source.close()
    if dst.dialect.name == "native":  # a new native file is hash-chained (adapters/chain.py)
        if out_of_line:
            store = folder_for(dest)
            lines = [outline(line, store) for line in lines]
        lines = seal_lines(lines)[0]
    data = b"\n".join(lines) + b"\n"
    try:
        with open(dest, "xb", opener=_private) as out:
            out.write(data)
    except FileExistsError:
        raise SessionError("already_exists", "a file already exists there", path=str(dest)) from None
    except OSError as exc:
        raise SessionError("storage", f"cannot write the file: {exc.strerror or exc}", path=str(dest)) from exc
    return Conversion(
        source=str(src_path), dest=str(dest), source_dialect=src.dialect.name, dest_dialect=dst.dialect.name,
        entries=len(lines) - 1, notes=tuple(dict.fromkeys(notes)),
    )


def _private(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW, 0o600)  # session files are private, as the storage makes them


def import_pi(src_path: str | os.PathLike[str], dest_path: str | os.PathLike[str]) -> Conversion:
    """Convert a pi session file (any version) into a new native file."""
    return convert(src_path, dest_path, native_codec())


def export_pi(src_path: str | os.PathLike[str], dest_path: str | os.PathLike[str]) -> Conversion:
    """Convert a session file (native, or pi of any version) into a new pi version 3 file."""
    return convert(src_path, dest_path, pi_codec())


__all__ = ["Conversion", "convert", "export_pi", "import_pi"]
