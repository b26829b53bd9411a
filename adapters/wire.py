"""Reading, the common case: a whole line decoded by msgspec into wire structs, then into
domain objects.

The structs are derived from the schemas (wire names, tags, ``UNSET`` for a field the wire may
leave out, unknown fields forbidden); msgspec checks the JSON and every type, and a generated
converter sets the domain object's slots. A line outside that shape goes to ``structure.py``,
which reads it the same way and names what is wrong (``tests/adapters/test_codec_paths.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Union

import attrs
import msgspec
from msgspec import UNSET

from sessiontree.adapters.schema import BLOCK_CLASSES, MESSAGE_CLASSES, Field, Schema, default_of
from sessiontree.domain import messages as m
from sessiontree.domain.events import Entry

_PLAIN: dict[str, Any] = {
    "str": str, "int": int, "number": Union[int, float], "bool": bool, "opt_str": Union[str, None],  # noqa: UP007
    "free": Any, "object": dict[str, Any], "names": list[str], "envelope_parent": Union[str, None],  # noqa: UP007
}


# Each value of a list ``v`` through its converter; one or two values (most contents) without a comprehension's call.
_EACH = ("(_C[v[0].__class__](v[0]),) if len(v) == 1 else (_C[v[0].__class__](v[0]), _C[v[1].__class__](v[1])) "
         "if len(v) == 2 else tuple([_C[x.__class__](x) for x in v])")


class WireDecoder:
    """Typed decoding of one dialect's entry lines (see the module documentation)."""

    def __init__(self, schemas: Mapping[type, Schema], chain_key: str | None) -> None:
        self._schemas = schemas
        self._structs: dict[type, type] = {}
        self._convert: dict[type, Callable[..., Any]] = {}
        self._chain_key = chain_key
        self._sources: list[tuple[type, str, str, dict[str, Any]]] = []  # converters, compiled once all are made
        self._blocks = Union[tuple(self._struct(c) for c in BLOCK_CLASSES)]  # noqa: UP007 - a union built at run time
        self._messages = Union[tuple(self._struct(c) for c in MESSAGE_CLASSES)]  # noqa: UP007 - a union built at run time
        entries = [self._struct(cls) for cls in schemas if issubclass(cls, Entry)]
        self._decode = msgspec.json.Decoder(Union[tuple(entries)]).decode  # noqa: UP007 - a union built at run time
        for struct, source, filename, ns in self._sources:
            exec(compile(source, filename, "exec"), ns)
            self._convert[struct] = ns["convert"]
        for _, _, _, ns in self._sources:  # a nested value's converter, called directly
            ns.update({key: self._convert[value] for key, value in ns.items() if key.startswith("_nested")})
        del self._sources

    def decode(self, line: bytes, session_id: str, version: int) -> tuple[Any, Any] | None:
        """The entry a line holds and its struct, or None when it is outside the typed shape."""
        try:
            struct = self._decode(line)
        except (msgspec.DecodeError, RecursionError):
            return None
        if not struct.id:  # an empty id is corrupt: the complete reading says so
            return None
        return self._convert[type(struct)](struct, session_id, version), struct

    def _type(self, field: Field) -> Any:
        kind = field.kind
        if kind in _PLAIN:
            return _PLAIN[kind]
        if kind == "value":
            # the ignore below: value fields always name their nested class; the next line too
            return self._struct(field.nested)  # type: ignore[arg-type]
        if kind == "opt_value":
            return Union[self._struct(field.nested), None]  # type: ignore[arg-type]  # noqa: UP007
        if kind == "blocks":
            # the ignore below: a type made at run time, which msgspec reads
            return list[self._blocks]  # type: ignore[name-defined]
        if kind == "content":
            return Union[str, list[self._blocks]]  # type: ignore[name-defined]  # noqa: UP007
        if kind == "message":
            return self._messages
        return Union[list[self._messages], None]  # type: ignore[name-defined]  # noqa: UP007  # "messages"

    def _struct(self, cls: type) -> type:
        found = self._structs.get(cls)
        if found is not None:
            return found
        schema = self._schemas[cls]
        fields: list[Any] = [
            (f.name, self._type(f)) if f.required else (f.name, self._type(f), UNSET) for f in schema.fields
        ]
        if issubclass(cls, Entry) and self._chain_key:
            fields.append(("chain_", str, UNSET))  # the hash chain's field, read past here
        options: dict[str, Any] = {"tag_field": schema.tag_key, "tag": schema.tag} if schema.tag_key else {}
        rename = {f.name: f.wire for f in schema.fields}
        if issubclass(cls, Entry) and self._chain_key:
            rename["chain_"] = self._chain_key
        struct = msgspec.defstruct(
            f"Wire{cls.__name__}", fields, rename=rename, forbid_unknown_fields=True, kw_only=True, **options
        )
        self._structs[cls] = struct
        self._sources.append((struct, *self._converter(schema)))
        return struct

    def _expression(self, f: Field, ns: dict[str, Any], i: int) -> str:
        """The conversion of a field's struct value ``v`` (nested values through their converters, called directly)."""
        kind = f.kind
        if kind in ("value", "opt_value"):
            # the ignore below: value fields always name their nested class
            ns[f"_nested{i}"] = self._struct(f.nested)  # type: ignore[arg-type]  # its converter, once there is one
            return f"_nested{i}(v)"
        if kind == "message":
            return "_C[v.__class__](v)"
        if kind == "names":
            return "tuple(v)"
        if kind in ("blocks", "messages"):
            return _EACH
        if kind == "content":
            return f"v if v.__class__ is str else ({_EACH})"
        return "v"

    def _converter(self, schema: Schema) -> tuple[str, str, dict[str, Any]]:
        """The source (and its name and namespace) of a function from the struct to the domain object: slots set one by
        one in field order
        (``object.__new__``: the types were checked by msgspec), defaults for what the line left
        out, and the shared ``extra`` that records what was left out or written as null."""
        cls, entry = schema.cls, issubclass(schema.cls, Entry)
        extras = _SharedExtras()
        ns: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_U": UNSET, "_C": self._convert,
                              "_extra": extras.get, "_E": extras.get(frozenset(), frozenset()), "_default": default_of}
        tracked = any(not f.required or f.omit_none for f in schema.fields)
        lines = ["def convert(s, sid='', version=0):", "    o = _new(_cls)"]
        if tracked:
            lines.append("    gone = nulls = ()")
        for i, f in enumerate(schema.fields):
            ns[f"_s{i}"] = _slot(cls, f.name)
            expression = self._expression(f, ns, i)
            nullable = not f.required or f.kind in ("opt_value", "messages") or f.omit_none
            if not nullable:
                direct = f"    _s{i}(o, s.{f.name})"
                lines.append(direct if expression == "v" else f"    v = s.{f.name}\n    _s{i}(o, {expression})")
                continue
            lines.append(f"    v = s.{f.name}")
            if not f.required:
                if isinstance(f.default, attrs.Factory):  # type: ignore[arg-type]
                    ns[f"_d{i}"] = f
                    lines.append(f"    if v is _U:\n        v = _default(_d{i})")
                else:  # an immutable default: the value itself
                    ns[f"_k{i}"] = f.default
                    lines.append(f"    if v is _U:\n        v = _k{i}")
                if not f.omit_none:
                    lines.append(f"        gone += ({f.name!r},)")
                lines.append("    elif v is None:" if f.omit_none else "")
            else:
                lines.append("    if v is None:" if f.omit_none else "")
            if f.omit_none:
                lines.append(f"        nulls += ({f.name!r},)")
            if expression != "v":
                test = "else:" if f.omit_none else "elif v is not None:" if not f.required else "if v is not None:"
                lines.append(f"    {test}\n        v = {expression}")
            lines.append(f"    _s{i}(o, v)")
        ns["_sx"] = _slot(cls, "extra")
        if tracked:
            lines.append("    _sx(o, _extra(frozenset(gone), frozenset(nulls)) if gone or nulls else _E)")
        else:
            lines.append("    _sx(o, _E)")
        if entry:
            ns["_sid"], ns["_sver"] = _slot(cls, "originator_id"), _slot(cls, "originator_version")
            lines.append("    _sid(o, sid)\n    _sver(o, version)")
        lines.append("    return o")
        return "\n".join(line for line in lines if line), f"<sessiontree converter {cls.__name__}>", ns


def _slot(cls: type, name: str) -> Callable[[Any, Any], None]:
    """The setter of an attrs slot (set directly: a frozen class refuses ``setattr``)."""
    # the ignore below: a slot's member descriptor is typed Any
    return next(k.__dict__[name] for k in cls.__mro__ if name in k.__dict__).__set__  # type: ignore[no-any-return]


class _SharedExtras:
    """One read-only empty ``extra`` per set of absent and null fields (most values share one)."""

    def __init__(self) -> None:
        self._made: dict[tuple[frozenset[str], frozenset[str]], m.FrozenExtra] = {}

    def get(self, absent: frozenset[str], nulls: frozenset[str]) -> Any:
        if not absent and not nulls:
            return m.NO_EXTRA
        key = (absent, nulls)
        found = self._made.get(key)
        if found is None:
            found = m.FrozenExtra((), absent, nulls)
            if len(self._made) < 1024:  # sets of absent fields are few; never grow without bound
                self._made[key] = found
        return found
