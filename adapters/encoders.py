"""The encoders of one dialect: each class's wire dict, made from its schema.

One function per class, generated once: a dict literal with the wire keys in the schema's
order, nested values through their own encoders, then the fields the dialect omits when None
and, for a value read from the wire, what its producer left out or added. docs/architecture.md
says why it is generated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sessiontree.adapters.schema import Field, Schema, default_of
from sessiontree.domain import messages as m

Encode = Callable[[Any], Any]


class Writers:
    """How a dialect hands plain values to orjson (pi lays out its numbers as JavaScript does)."""

    number: Encode | None = None  # a float field's value
    plain: tuple[float, float] | None = None  # floats lo <= |f| < hi that ``number`` leaves as they are
    free: Encode | None = None  # a free-form value (details, data, arguments)
    items: Encode | None = None  # the unknown fields of an object


class Encoders:
    """The encoders of one dialect: ``encode(value)`` gives the wire form of any value."""

    def __init__(self, schemas: Mapping[type, Schema], writers: Writers | None = None) -> None:
        self._writers = writers or Writers()
        self._schemas = schemas
        self._by_class: dict[type, Encode] = {}  # made on first use: a process that only reads makes none

    def encoder_of(self, cls: type) -> Encode:
        encoder = self._by_class.get(cls)
        if encoder is None:
            encoder = self._by_class[cls] = self._make(self._schemas[cls])
        return encoder

    def encode(self, value: Any) -> Any:
        """The wire form of a message, block, usage, cost or entry."""
        encoder = self._by_class.get(value.__class__)
        return encoder(value) if encoder is not None else self._generic(value)

    def _generic(self, value: Any) -> Any:
        if value.__class__ in self._schemas:
            return self.encoder_of(value.__class__)(value)
        if isinstance(value, (m.UnknownContent, m.UnknownMessage)):
            return self._free(dict(value.data))
        for cls in self._schemas:
            if isinstance(value, cls):  # an app's subclass of a block or a message: written as its class
                return self.encoder_of(cls)(value)
        raise TypeError(f"cannot write {type(value).__name__} values")

    def _free(self, value: Any) -> Any:
        writer = self._writers.free
        return value if writer is None else writer(value)

    def _value_expression(self, f: Field, ns: dict[str, Any]) -> str:
        attr, kind = f"o.{f.name}", f.kind
        if kind in ("value", "opt_value"):
            # the ignore below: value fields always name their nested class (schema.py)
            ns[f"_e_{f.name}"] = self.encoder_of(f.nested)  # type: ignore[arg-type]
            call = f"_e_{f.name}({attr})"
            return call if kind == "value" else f"(None if {attr} is None else {call})"
        if kind == "message":
            return f"_by({attr}.__class__, _e)({attr})"
        if kind == "blocks":
            return f"[_by(b.__class__, _e)(b) for b in {attr}]"
        if kind == "content":
            return f"({attr} if {attr}.__class__ is str else [_by(b.__class__, _e)(b) for b in {attr}])"
        if kind == "messages":
            return f"(None if {attr} is None else [_by(x.__class__, _e)(x) for x in {attr}])"
        if kind == "names":
            return f"list({attr})"
        if kind == "number" and self._writers.number is not None:
            if self._writers.plain is None:
                return f"_number({attr})"
            ns["_LO"], ns["_HI"] = self._writers.plain  # the common value needs no call
            return f"(x if (x := {attr}).__class__ is not float or _LO <= x < _HI or -_HI < x <= -_LO else _number(x))"
        if kind in ("free", "object") and self._writers.free is not None:
            return f"_free({attr})"
        return attr

    def _make(self, schema: Schema) -> Encode:
        ns: dict[str, Any] = {
            "_e": self.encode, "_by": self._by_class.get, "_NONE": m.NO_EXTRA, "_number": self._writers.number,
            "_free": self._writers.free, "_finish": _finisher(schema, self._writers),
        }
        items = [f"{schema.tag_key!r}: {schema.tag!r}"] if schema.tag_key else []
        items += [f"{f.wire!r}: {self._value_expression(f, ns)}" for f in schema.fields]
        lines = [
            "def encode(o):",
            f"    out = {{{', '.join(items)}}}",
            "    extra = o.extra",
            "    if extra is not _NONE and (extra.__class__ is not dict or extra):",
            "        return _finish(out, extra, o)",
        ]
        lines += [f"    if out[{f.wire!r}] is None:\n        del out[{f.wire!r}]" for f in schema.fields if f.omit_none]
        lines.append("    return out")
        exec(compile("\n".join(lines), f"<sessiontree encoder {schema.cls.__name__}>", "exec"), ns)
        # the ignore below: exec fills the namespace with the generated function
        return ns["encode"]  # type: ignore[no-any-return]


def _finisher(schema: Schema, writers: Writers) -> Callable[[dict[str, Any], Any, Any], dict[str, Any]]:
    """The end of an encoder for a value read from the wire (or made with unknown fields):
    None-valued fields left out unless the line had them as null, fields the producer left
    out left out again while they hold their default (a value changed since is written),
    unknown fields added."""
    omit = [(f.wire, f.name) for f in schema.fields if f.omit_none]
    optional = {f.name: (f.wire, default_of(f)) for f in schema.fields if not f.required}
    items = writers.items

    def finish(out: dict[str, Any], extra: Any, value: Any) -> dict[str, Any]:
        nulls = getattr(extra, "nulls", ())
        for wire, name in omit:
            if out[wire] is None and name not in nulls:
                del out[wire]
        for name in getattr(extra, "absent", ()):
            key, default = optional.get(name, (None, None))
            if key is not None and getattr(value, name) == default:
                out.pop(key, None)
        if extra:
            out.update(extra if items is None else items(extra))
        return out

    return finish
