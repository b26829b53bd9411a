"""The fastest read path: a whole entry line decoded by msgspec into typed wire structs.

``fastcodec.py`` turns a parsed JSON object (orjson's dicts) into domain objects. Building
those dicts costs about as much again as the domain objects themselves, so for the entries
a context is made of this module goes one step further: from the reference codec's metadata
(the same wire names, tags, defaults and field types) it defines, per dialect, ``msgspec``
struct classes that mirror the wire format exactly, one tagged union of entry types, and
per class one generated function that turns a struct into the domain object.

msgspec then checks the line's JSON, every field's type and that no field is unknown, in C,
while it builds the structs. Anything outside that narrow, common shape (an unknown field,
a block type or role this library does not know, a field of the wrong type, a chain field
that is not a seal, an entry type a dialect reads with extra rules) makes :meth:`decode`
return None, and the caller takes the dict path, whose results and errors are the
reference's. So this path never decides anything the reference would decide differently;
property tests check both give equal objects (``tests/adapters/test_wiredecode.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Union

import attrs
import msgspec
import orjson
from msgspec import UNSET, UnsetType

from sessiontree.adapters.chain import CHAIN_KEY, is_sealed
from sessiontree.adapters.codec import field_annotation, parse
from sessiontree.adapters.fastcodec import absent_value, finish_object
from sessiontree.domain import messages as m

if TYPE_CHECKING:
    from sessiontree.adapters.codec import Codec

# orjson reads an integer outside this range as a float (which the dict path then refuses
# where an int is wanted), so outside it the dict path decides; msgspec's bounds are int64.
_INT = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class _Fallback(Exception):
    """Raised in generated code: the dict path decides this line."""


class WireDecoder:
    """Typed whole-line decoding for one codec's dialect (see the module docstring)."""

    def __init__(self, codec: Codec, skip_entry_types: frozenset[str] = frozenset()) -> None:
        self.codec = codec
        self._structs: dict[type, type] = {}  # domain class -> its wire struct
        self._converters: dict[type, Any] = {}  # wire struct -> converter (made on first use)
        self._domain: dict[type, type] = {}  # wire struct -> domain class
        self._entry_structs: set[type] = set()
        self._strings: dict[str, str] = {}  # one string object per value of a _REPEATED field
        self._ns: dict[str, Any] = {
            "_U": UNSET,
            "_Fallback": _Fallback,
            "_new": object.__new__,
            "_sa": object.__setattr__,
            "_shared": m.shared_extra,
            "_E": m.shared_extra(),
            "_loads": parse,
            "_same": self._strings.setdefault,
            "_view": memoryview,
        }
        self._ns["_conv"] = self._converters
        self._ns["_make"] = self._make_converter
        blocks = Union[tuple(self._struct(cls, ("type", tag)) for tag, cls in codec._block_by_tag.items())]  # type: ignore[misc]  # noqa: UP007
        self._block_union = blocks
        self._message_union: Any = None
        self._message_union = Union[tuple(self._struct(cls, ("role", role)) for role, cls in codec._message_by_role.items())]  # type: ignore[misc]  # noqa: UP007
        entries = tuple(
            self._struct(cls, ("type", tag), entry=True)
            for tag, cls in codec._entry_by_type.items()
            if tag not in skip_entry_types
        )
        self._decode = msgspec.json.Decoder(Union[entries]).decode  # type: ignore[valid-type]  # noqa: UP007

    # -- the wire structs -------------------------------------------------------------

    def _wire_type(self, annotation: str) -> Any:
        blocks = getattr(self, "_block_union", None)
        usage = lambda: self._structs.get(m.Usage) or self._struct(m.Usage, None)  # noqa: E731
        types: dict[str, Any] = {
            "str": str,
            "int": _INT,
            "float": Union[_INT, float],  # noqa: UP007  (an int stays an int, as in the dict path)
            "bool": bool,
            "str | None": Union[str, None],  # noqa: UP007
            "Any": msgspec.Raw,  # parsed by orjson itself: its numbers are the dict path's
            "Mapping[str, Any]": msgspec.Raw,
            "tuple[Content, ...]": list[blocks],  # type: ignore[valid-type]
            "str | tuple[Content, ...]": Union[str, list[blocks]],  # type: ignore[valid-type]  # noqa: UP007
            "tuple[str, ...]": list[str],
        }
        if annotation in types:
            return types[annotation]
        if annotation == "Cost":
            return self._structs.get(m.Cost) or self._struct(m.Cost, None)
        if annotation == "Usage":
            return usage()
        if annotation == "Usage | None":
            return Union[usage(), None]  # noqa: UP007
        if annotation == "Message":
            return self._message_union
        if annotation == "tuple[Message, ...] | None":
            return Union[list[self._message_union], None]  # type: ignore[name-defined]  # noqa: UP007
        raise TypeError(f"wiredecode has no wire type for {annotation!r}")

    def _fields(self, cls: type) -> list[tuple[str, str, str, Any]]:
        names = self.codec._wire[cls]
        return [
            (names[a.name], a.name, field_annotation(cls, a.name), a.default)
            for a in attrs.fields(cls)
            if a.name in names
        ]

    def _struct(self, cls: type, tag: tuple[str, str] | None, *, entry: bool = False) -> type:
        fields: list[Any] = []
        if entry:
            fields += [
                ("id", str),
                ("parent", Union[str, None], msgspec.field(name=self.codec.dialect.parent_key)),  # noqa: UP007
                ("timestamp", str),
                ("chain", Union[str, UnsetType], msgspec.field(default=UNSET, name=CHAIN_KEY)),  # noqa: UP007
            ]
        for wire, name, annotation, _ in self._fields(cls):
            wire_type = Union[self._wire_type(annotation), UnsetType]  # noqa: UP007
            fields.append((f"f_{name}", wire_type, msgspec.field(default=UNSET, name=wire)))
        options: dict[str, Any] = {"forbid_unknown_fields": True}
        if tag is not None:
            options.update(tag_field=tag[0], tag=tag[1])
        struct = msgspec.defstruct(f"Wire{cls.__name__}", fields, **options)
        if entry:
            self._entry_structs.add(struct)
        self._structs[cls] = struct
        self._domain[struct] = cls
        return struct

    # -- the converters ---------------------------------------------------------------

    def _make_converter(self, struct: type) -> Any:
        cls = self._domain[struct]
        entry = struct in self._entry_structs
        fn = f"convert_{cls.__name__}"
        ns: dict[str, Any] = {"_cls": cls}
        if entry:
            lines = [
                f"def {fn}(w, sid, version):",
                "    if not w.id: raise _Fallback",
                "    missing = 0",
            ]
        else:
            lines = [f"def {fn}(w):", "    missing = 0", "    o = _new(_cls)"]
        for index, (wire, name, annotation, default) in enumerate(self._fields(cls)):
            lines.append(f"    v = w.f_{name}")
            lines.append("    if v is _U:")
            lines.append(f"        missing |= {1 << index}  # {wire}")
            lines.append(absent_value(index, default, ns, "_Fallback"))
            convert = _CONVERT.get(annotation)
            if convert is None:
                raise TypeError(f"wiredecode has no conversion for {cls.__name__}.{name}: {annotation}")
            if (cls.__name__, name) in _REPEATED and annotation in ("str", "str | None"):
                convert = "if v is not None: v = _same(v, v)"
            if convert:
                lines.append("    else:")
                lines.extend("        " + part for part in convert.split("\n"))
            if entry:
                lines.append(f"    v_{name} = v")
            else:
                ns[f"_s{index}"] = cls.__dict__[name].__set__
                lines.append(f"    _s{index}(o, v)")
        lines.append("    if missing:")
        lines.append("        extra = _extras.get(missing)")
        lines.append("        if extra is None:  # (an empty extra is falsy)")
        lines.append("            extra = _extra_for(missing)")
        lines.append("    else:")
        lines.append("        extra = _E")
        wires = [wire for wire, _, _, _ in self._fields(cls)]
        extras: dict[int, Any] = {}

        def extra_for(mask: int) -> Any:
            absent = frozenset(wire for index, wire in enumerate(wires) if mask >> index & 1)
            extra = extras[mask] = m.shared_extra(absent)
            return extra

        ns["_extras"] = extras
        ns["_extra_for"] = extra_for
        lines.extend(finish_object(cls, ns, entry=entry, timestamp="w.timestamp", id="w.id", parent="w.parent"))
        scope = dict(self._ns)
        scope.update(ns)
        exec(compile("\n".join(lines), f"<sessiontree wiredecode {fn}>", "exec"), scope)  # noqa: S102
        converter = self._converters[struct] = scope[fn]
        return converter

    # -- decoding ---------------------------------------------------------------------

    def decode(self, line: bytes, session_id: str, version: int) -> Any:
        """The entry on ``line``, or None: the dict path decides this line."""
        try:
            wire = self._decode(line)
        except (msgspec.DecodeError, RecursionError):
            return None
        if wire.chain is not UNSET and not is_sealed(line):
            return None  # a "chain" key that is not a seal is an unknown field: kept by the dict path
        convert = self._converters.get(wire.__class__) or self._make_converter(wire.__class__)
        if len(self._strings) > STRINGS_KEPT:  # an app with ever-new model or tool names
            self._strings.clear()
        try:
            return convert(wire, session_id, version)
        except (_Fallback, ValueError):  # ValueError: orjson refused a free-form value (1e400)
            return None


# Fields whose few values recur on most lines (the provider and model of every reply, tool
# names, ...): each value is kept as one shared string rather than one per line. Named by
# class, so that free text of the same field name (a session's name) is not kept; the
# strings kept are bounded by STRINGS_KEPT.
_REPEATED = frozenset(
    {
        ("AssistantMessage", "provider"),
        ("AssistantMessage", "model"),
        ("AssistantMessage", "api"),
        ("AssistantMessage", "stop_reason"),
        ("ToolCall", "name"),
        ("ToolResultMessage", "tool_name"),
        ("ImageContent", "mime_type"),
        ("ModelChanged", "provider"),
        ("ModelChanged", "model_id"),
        ("ThinkingLevelChanged", "thinking_level"),
        ("CustomEntryAppended", "custom_type"),
        ("CustomMessageAppended", "custom_type"),
        ("CustomMessage", "custom_type"),
    }
)
STRINGS_KEPT = 4096

# How a struct field's value becomes the domain value, by its annotation in the domain
# classes (the struct already checked its type); "" leaves it as it is.
_ONE = "(_conv.get(v.__class__) or _make(v.__class__))(v)"
_CONVERT = {
    "str": "",
    "int": "",
    "float": "",
    "bool": "",
    "str | None": "",
    "Any": "v = _loads(_view(v))",
    "Mapping[str, Any]": "v = _loads(_view(v))\nif v.__class__ is not dict: raise _Fallback",
    "Cost": f"v = {_ONE}",
    "Usage": f"v = {_ONE}",
    "Usage | None": f"if v is not None: v = {_ONE}",
    "Message": f"v = {_ONE}",
    "tuple[Content, ...]": "v = tuple([(_conv.get(b.__class__) or _make(b.__class__))(b) for b in v])",
    "str | tuple[Content, ...]": (
        "if v.__class__ is not str: v = tuple([(_conv.get(b.__class__) or _make(b.__class__))(b) for b in v])"
    ),
    "tuple[Message, ...] | None": (
        "if v is not None: v = tuple([(_conv.get(x.__class__) or _make(x.__class__))(x) for x in v])"
    ),
    "tuple[str, ...]": "v = tuple(v)",
}


__all__ = ["WireDecoder"]
