"""Conversion between pi's dialect and the native one (``sessiontree import`` / ``export``).

``import_pi(src, dest)`` writes the session in ``src`` (a pi file, or any file this library
reads) as a new native file; ``export_pi(src, dest)`` writes it as a new pi file (version
3; an older pi file comes out migrated). Every field is kept: each entry is decoded and
written again by the other dialect's codec, with the same ids, parents, timestamps and
unknown fields; known fields a producer left out stay left out (their names are carried
over to the other dialect); entry types neither side knows are copied verbatim except
for their parent key. A ``leaf`` entry becomes pi's leaf marker and back (docs/pi.md).

pi files written by pi come back byte for byte after ``import_pi`` then ``export_pi``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs

from sessiontree.adapters.chain import seal_lines
from sessiontree.adapters.codec import Codec, native_codec
from sessiontree.adapters.jsonl import JsonlSessionStorage
from sessiontree.adapters.pi import PiCodec, PiExtra, pi_codec, rename_parent_key
from sessiontree.domain import messages as m
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import ContextCompacted, Entry, SessionStarted, UnknownEntryAppended


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


_PLAIN = (str, int, float, bool, type(None), dict, list)
_VALUE_TYPES = ("Message", "Content", "Usage", "Cost")


def _may_nest(annotation: Any) -> bool:
    """Can a field with this annotation hold messages, blocks or usage (objects with extras)?"""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    return any(name in text for name in _VALUE_TYPES)
_NO_PLAN = object()


class _Retarget:
    """Rewrites the names of absent fields from ``src``'s dialect to ``dst``'s, recursively.

    Objects are changed only where needed, by copying them (no validators run again: the
    values were valid when they were read).
    """

    def __init__(self, src: Codec, dst: Codec) -> None:
        self.src = src
        self.dst = dst
        self._plans: dict[type, Any] = {}

    def _plan(self, cls: type) -> Any:
        plan = self._plans.get(cls)
        if plan is None:
            names = self.src._wire.get(cls)
            if names is None:
                plan = _NO_PLAN
            else:
                by_wire = {wire: name for name, wire in names.items()}
                fields = attrs.fields_dict(cls)
                # A field the domain requires (pi's omitted label/name) is written out as null.
                required = {name for name, a in fields.items() if a.default is attrs.NOTHING}
                nested = tuple(name for name in names if _may_nest(fields[name].type))
                plan = (nested, by_wire, self.dst._wire[cls], required, tuple(fields))
            self._plans[cls] = plan
        return plan

    def __call__(self, value: Any) -> Any:
        kind = type(value)
        if kind in _PLAIN:
            return value
        if kind is tuple:
            out = None
            for index, item in enumerate(value):
                new = self(item)
                if new is not item:
                    out = out or list(value)
                    out[index] = new
            return value if out is None else tuple(out)
        plan = self._plan(kind)
        if plan is _NO_PLAN:
            return value
        names, by_wire, target, required, slots = plan
        changes: dict[str, Any] = {}
        for name in names:
            item = getattr(value, name)
            new = self(item)
            if new is not item:
                changes[name] = new
        extra = value.extra
        absent = m.absent_fields(extra)
        if absent or isinstance(extra, PiExtra):  # pi's explicit nulls mean nothing elsewhere
            moved = frozenset(
                target.get(by_wire.get(wire, ""), wire) for wire in absent if by_wire.get(wire) not in required
            )
            changes["extra"] = m.Extra(dict(extra), moved)
        if not changes:
            return value
        copied = object.__new__(kind)
        if hasattr(value, "__dict__"):
            copied.__dict__.update(value.__dict__)
        else:
            for name in slots:
                object.__setattr__(copied, name, getattr(value, name))
        for name, new in changes.items():
            object.__setattr__(copied, name, new)
        return copied


def _convert_entry(entry: Entry, src: Codec, dst: Codec, retarget: _Retarget) -> Entry:
    if src.dialect.name == dst.dialect.name:
        return entry
    if isinstance(entry, UnknownEntryAppended):
        old, new = src.dialect.parent_key, dst.dialect.parent_key
        return attrs.evolve(entry, data=rename_parent_key(entry.data, old, new))
    return retarget(entry)  # type: ignore[no-any-return]


def _header(header: SessionStarted) -> SessionStarted:
    """The header of the copy: version 3 (an older pi file's entries come out migrated)."""
    return attrs.evolve(header, version=3) if header.version != 3 else header


def _entries(storage: JsonlSessionStorage) -> Iterable[Entry]:
    _, entries = storage.load()
    for item in entries:
        yield item if isinstance(item, Entry) else item.load()


def _notes(entry: Entry, dst: Codec) -> list[str]:
    if isinstance(dst, PiCodec) and isinstance(entry, ContextCompacted) and entry.retained_tail is not None:
        return [
            f"compaction {entry.id!r} has a retained_tail: it is kept as 'retainedTail', which pi "
            "ignores (pi keeps the entries from firstKeptEntryId instead)"
        ]
    if isinstance(dst, PiCodec) and entry.type == "active_tools_change":
        return [f"active_tools_change {entry.id!r} is kept; pi ignores it (no tools in its context)"]
    return []


def convert(src_path: str | os.PathLike[str], dest_path: str | os.PathLike[str], dst: Codec) -> Conversion:
    """Write the session of ``src_path`` as a new file ``dest_path`` in ``dst``'s dialect."""
    dest = Path(dest_path)
    source = JsonlSessionStorage.open(src_path)
    try:
        src = source.codec
        lines = [dst.encode_event(_header(source.header))]
        notes: list[str] = []
        retarget = _Retarget(src, dst)
        for entry in _entries(source):
            converted = _convert_entry(entry, src, dst, retarget)
            notes.extend(_notes(converted, dst))
            lines.append(dst.encode_event(converted))
    finally:
        source.close()
    if dst.dialect.name == "native":  # a new native file is hash-chained (adapters/chain.py)
        lines = seal_lines(lines)
    data = b"\n".join(lines) + b"\n"
    try:
        with open(dest, "xb", opener=_private) as out:
            out.write(data)
    except FileExistsError:
        raise SessionError("already_exists", "a file already exists there", path=str(dest)) from None
    except OSError as exc:
        raise SessionError("storage", f"cannot write the file: {exc.strerror or exc}", path=str(dest)) from exc
    return Conversion(
        source=str(src_path),
        dest=str(dest),
        source_dialect=src.dialect.name,
        dest_dialect=dst.dialect.name,
        entries=len(lines) - 1,
        notes=tuple(dict.fromkeys(notes)),
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
