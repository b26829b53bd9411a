"""The hot path of the codec: straight-line functions generated from the reference codec.

The cattrs converter in ``codec.py`` is the reference for the format. This module reads the
same metadata (attrs fields, the dialect's wire names, tags and omit rules) and generates,
per class, one plain Python function that decodes a parsed JSON object or encodes a value,
without cattrs' per-value dispatch and without attrs validators (it checks the same types
itself). That is what makes opening and appending fast (docs/performance.md).

Semantics are the reference's: a decode that fails here is re-run through the reference,
so errors are the reference's own errors, and property tests check that both paths give
equal objects and byte-identical lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import orjson

from sessiontree.domain import messages as m
from sessiontree.domain.events import Entry, UnknownEntryAppended

from sessiontree.adapters.codec import field_annotation
from sessiontree.adapters.speedups import compiled as _speedups

if TYPE_CHECKING:
    from sessiontree.adapters.codec import Codec

# Whether new codecs use the compiled encoders (adapters/speedups.py): the generated Python
# encoders are the same plan, run by the interpreter.
COMPILED = _speedups is not None

_NOTHING = attrs.NOTHING


class _Invalid(Exception):
    """Raised inside generated code; the caller re-runs the reference decoder."""


# How a field's value is checked or converted, by its annotation in the domain classes.
_CHECKS = {
    "str": "if type(v) is not str: raise _Invalid",
    "int": "if type(v) is not int: raise _Invalid",
    "float": "if type(v) is not int and type(v) is not float: raise _Invalid",
    "bool": "if type(v) is not bool: raise _Invalid",
    "str | None": "if v is not None and type(v) is not str: raise _Invalid",
    "Any": "",
    "Mapping[str, Any]": "if type(v) is not dict: raise _Invalid",
    "Usage": "v = _usage(v)",
    "Usage | None": "if v is not None: v = _usage(v)",
    "Cost": "v = _cost(v)",
    "tuple[Content, ...]": "if type(v) is not list: raise _Invalid\n{i}v = tuple([_block(b) for b in v])",
    "str | tuple[Content, ...]": (
        "if type(v) is not str:\n{i}    if type(v) is not list: raise _Invalid\n"
        "{i}    v = tuple([_block(b) for b in v])"
    ),
    "Message": "v = _message(v)",
    "tuple[Message, ...] | None": (
        "if v is not None:\n{i}    if type(v) is not list: raise _Invalid\n"
        "{i}    v = tuple([_message(x) for x in v])"
    ),
    "tuple[str, ...]": (
        "if type(v) is not list or not all(type(x) is str for x in v): raise _Invalid\n{i}v = tuple(v)"
    ),
}
# How an encoder writes a value of these annotations: through the value's own generated
# encoder, looked up by class (``_u``, the generic path, makes missing ones and handles
# Unknown* values); one call per value instead of two.
_ONE = "(_enc.get({x}.__class__) or _u)({x})"
_ENCODE = {
    "Usage": _ONE.format(x="v"),
    "Cost": _ONE.format(x="v"),
    "Message": _ONE.format(x="v"),
    "Usage | None": "None if v is None else " + _ONE.format(x="v"),
    "tuple[Content, ...]": f"[{_ONE.format(x='b')} for b in v]",
    "str | tuple[Content, ...]": f"v if isinstance(v, str) else [{_ONE.format(x='b')} for b in v]",
    "tuple[Message, ...] | None": f"None if v is None else [{_ONE.format(x='x')} for x in v]",
    "tuple[str, ...]": "list(v)",
}
# The same, as operations of a compiled encoder's plan (adapters/_speedups.c, OP_*).
_OPS = {
    "Usage": 3,
    "Cost": 3,
    "Message": 3,
    "Usage | None": 4,
    "tuple[Content, ...]": 5,
    "str | tuple[Content, ...]": 6,
    "tuple[Message, ...] | None": 7,
    "tuple[str, ...]": 8,
}
_OP_CONST, _OP_ATTR, _OP_ATTR_CALL, _OP_GENERIC, _OP_ATTR_FLOAT, _OP_ATTR_VALUE = 0, 1, 2, 9, 10, 11
# Annotations of free-form values (a dialect may lay out their numbers: Dialect.value_writer).
_FREE = {"Any", "Mapping[str, Any]"}
# Annotations whose values are written as they are (everything else goes through _u).
_PLAIN = {"str", "int", "float", "bool", "str | None", "Any", "Mapping[str, Any]"}


def absent_value(index: int, default: Any, ns: dict[str, Any], fail: str) -> str:
    """The generated line that gives field ``index`` its value when the wire leaves it out:
    its default (bound into ``ns``), a new one from its factory, or ``raise fail``."""
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        ns[f"_f{index}"] = default.factory  # type: ignore[union-attr]
        return f"        v = _f{index}()"
    if default is _NOTHING:
        return f"        raise {fail}"
    ns[f"_d{index}"] = default
    return f"        v = _d{index}"


def finish_object(cls: type, ns: dict[str, Any], *, entry: bool, timestamp: str, id: str, parent: str) -> list[str]:
    """The generated lines that end a decoder: an entry made from the named expressions
    (:func:`make_entry`, with ``sid`` and ``version``), or the value ``o`` given the local
    ``extra``; then ``return o``."""
    if entry:
        lines = make_entry(cls, sid="sid", version="version", timestamp=timestamp, id=id, parent=parent)
    else:
        ns["_sx"] = cls.__dict__["extra"].__set__
        lines = ["    _sx(o, extra)"]
    return [*lines, "    return o"]


def make_entry(cls: type, *, sid: str, version: str, timestamp: str, id: str, parent: str) -> list[str]:
    """Generated lines that make entry ``o`` of ``cls`` from the named expressions, the
    local ``extra`` and locals ``v_<field>`` for its own fields.

    The attributes are set one by one in the class's field order, as its __init__ sets them:
    the instance then keeps them in CPython's compact shared-key layout (~180 bytes an
    entry) rather than a dict of its own (~370). Every path that makes entries must keep
    this order, and nothing should read an entry's ``__dict__``.
    """
    values = {"originator_id": sid, "originator_version": version, "timestamp": timestamp, "id": id, "parent_id": parent, "extra": "extra"}
    lines = ["    o = _new(_cls)"]
    for a in attrs.fields(cls):
        lines.append(f"    _sa(o, {a.name!r}, {values.get(a.name, 'v_' + a.name)})")
    return lines


class FastCodec:
    """Generated decoders and encoders for one dialect, derived from ``codec``.

    ``compiled``: encode through the compiled encoders (default: :data:`COMPILED`); they
    follow the plan the generated Python encoders are written from.
    """

    def __init__(self, codec: Codec, *, compiled: bool | None = None) -> None:
        if compiled and _speedups is None:
            raise RuntimeError("the compiled encoders are not available (sessiontree.adapters.speedups)")
        self.compiled = COMPILED if compiled is None else compiled
        self.codec = codec
        self.parent_key = codec.dialect.parent_key
        self._decoders: dict[type, Any] = {}
        self._encoders: dict[type, Any] = {}
        self._ns: dict[str, Any] = {
            "_Invalid": _Invalid,
            "_new": object.__new__,
            "_sa": object.__setattr__,
            "_M": _NOTHING,
            "Extra": m.Extra,
            "_shared": m.shared_extra,
            "_E": m.shared_extra(),
            "_block": self._block,
            "_message": self._message,
            "_u": self.unstructure,
            "_enc": self._encoders,
            "Unknown": UnknownEntryAppended,
        }
        # Cost before Usage: each generated function binds the ones it calls. Everything else
        # is generated the first time it is needed (a session uses a few of the ~25 classes,
        # and generating costs ~0.1 ms each, which a small session's first open would feel).
        self._ns["_cost"] = self._decoders[m.Cost] = self._generate_decoder(m.Cost, entry=False)
        self._ns["_usage"] = self._decoders[m.Usage] = self._generate_decoder(m.Usage, entry=False)
        self._blocks: dict[Any, Any] = {}
        self._messages: dict[Any, Any] = {}
        self._entries: dict[Any, Any] = {}
        self._entry_classes = frozenset(codec._entry_by_type.values())

    def _new_decoder(self, cache: dict[Any, Any], classes: dict[str, type], tag: Any, *, entry: bool = False) -> Any:
        """The decoder of the class ``classes`` names by ``tag`` (None: no such class),
        generated now and kept in ``cache`` (and by class, for a value class)."""
        cls = classes.get(tag) if type(tag) is str else None
        if cls is None:
            return None
        decoder = cache[tag] = self._generate_decoder(cls, entry=entry)
        if not entry:
            self._decoders[cls] = decoder
        return decoder

    def _new_encoder(self, cls: type) -> Any:
        if cls in self._entry_classes:
            encoder = self._generate_encoder(cls, entry=True)
        elif cls in (m.Cost, m.Usage) or cls in self.codec._block_by_tag.values() or cls in self.codec._message_by_role.values():
            encoder = self._generate_encoder(cls, entry=False)
        else:
            return None
        self._encoders[cls] = encoder
        return encoder

    # -- code generation --------------------------------------------------------------

    def _fields(self, cls: type) -> list[tuple[str, str, str, Any]]:
        names = self.codec._wire[cls]
        out = []
        for a in attrs.fields(cls):
            if a.name in names:
                out.append((names[a.name], a.name, field_annotation(cls, a.name), a.default))
        return out

    def _tag(self, cls: type) -> tuple[str, str] | None:
        if hasattr(cls, "role") and isinstance(getattr(cls, "role", None), str):
            return ("role", self.codec.dialect.role(cls.role))
        if cls in self.codec._block_by_tag.values():
            return ("type", self.codec.dialect.block_type(cls.type))
        return None

    def _compile(self, name: str, lines: list[str], extra_ns: dict[str, Any]) -> Any:
        ns = dict(self._ns)
        ns.update(extra_ns)
        exec(compile("\n".join(lines), f"<sessiontree fastcodec {name}>", "exec"), ns)  # noqa: S102
        return ns[name]

    def _generate_decoder(self, cls: type, *, entry: bool) -> Any:
        fields = self._fields(cls)
        known = {w for w, _, _, _ in fields}
        tag = None if entry else self._tag(cls)
        ns: dict[str, Any] = {"_cls": cls}
        fn = f"decode_{cls.__name__}"
        if entry:
            known |= {"type", "id", self.parent_key, "timestamp"}
            lines = [f"def {fn}(data, sid, version, eid, parent, ts):", "    missing = []"]
        else:
            if tag:
                known.add(tag[0])
            lines = [f"def {fn}(data):", "    if type(data) is not dict: raise _Invalid", "    missing = []", "    o = _new(_cls)"]
        ns["_known"] = frozenset(known)
        for index, (wire, name, annotation, default) in enumerate(fields):
            check = _CHECKS.get(annotation)
            if check is None:
                raise TypeError(f"fastcodec has no rule for {cls.__name__}.{name}: {annotation}")
            setter = f"v_{name} = v" if entry else f"_s{index}(o, v)"
            if not entry:
                ns[f"_s{index}"] = cls.__dict__[name].__set__
            lines.append(f"    v = data.get({wire!r}, _M)")
            lines.append("    if v is _M:")
            lines.append(f"        missing.append({wire!r})")
            lines.append(absent_value(index, default, ns, "_Invalid"))
            if check:
                lines.append("    else:")
                first, *rest = check.split("\n")
                lines.append("        " + first)
                lines.extend(part.format(i="        ") for part in rest)
            lines.append(f"    {setter}")
        count = len(known) - (0 if entry or tag else 0)
        lines.append(f"    if missing or len(data) != {count} - len(missing):")
        lines.append("        unknown = data.keys() - _known")
        lines.append("        if unknown:")
        lines.append("            extra = Extra({k: data[k] for k in data if k in unknown}, frozenset(missing))")
        lines.append("        else:")
        lines.append("            extra = _shared(frozenset(missing))")
        lines.append("    else:")
        lines.append("        extra = _E")
        lines.extend(finish_object(cls, ns, entry=entry, timestamp="ts", id="eid", parent="parent"))
        return self._compile(fn, lines, ns)

    def _generate_encoder(self, cls: type, *, entry: bool) -> Any:
        """One function that writes a ``cls`` value as the dict of its wire object.

        Keys come in the dialect's order for the class (``Dialect.key_order``), else: the
        tag (or an entry's envelope), the fields in class order; then the unknown fields of
        ``extra``. The dict is built as one literal; a field omitted when None, or marked
        absent in ``extra``, is deleted afterwards, which keeps the order of the others.

        The same plan gives a compiled encoder (``self.compiled``): each key with where its
        value comes from (a constant, an attribute as it is or through a dialect's writer,
        a nested value's own encoder), the keys omitted when None, and the same handling
        of ``extra``.
        """
        dialect = self.codec.dialect
        fields = self._fields(cls)
        fn = f"encode_{cls.__name__}"
        omit = {self.codec._wire[cls][n] for n in dialect.omit_none(cls)}
        ns: dict[str, Any] = {
            "_order": dialect.key_order(cls),
            "_fw": dialect.float_writer,
            "_vw": dialect.value_writer,
            "_iw": dialect.items_writer,
        }
        order = ns["_order"]
        plain = dialect.plain_floats
        # (wire key, Python expression, compiled operation, its argument, its converter)
        items: list[tuple[str, str, int, Any, Any]] = []
        if entry:
            tag = dialect.entry_type(cls.type)  # type: ignore[attr-defined]
            # Attributes, not o.__dict__: reading __dict__ would give the entry a dict of its
            # own instead of its compact shared-key layout (see wiredecode.py).
            items.append(("type", repr(tag), _OP_CONST, tag, None))
            items += [(key, f"o.{name}", _OP_ATTR, name, None) for key, name in (("id", "id"), (self.parent_key, "parent_id"), ("timestamp", "timestamp"))]
        else:
            value_tag = self._tag(cls)
            if value_tag:
                items.append((value_tag[0], repr(value_tag[1]), _OP_CONST, value_tag[1], None))

        lines = [f"def {fn}(o):"]
        nested = []  # the items computed before the literal, in field order
        for index, (wire, name, annotation, _) in enumerate(fields):
            if annotation not in _PLAIN:
                lines.append(f"    v = o.{name}")
                lines.append(f"    c{index} = {_ENCODE.get(annotation, '_u(v)')}")
                items.append((wire, f"c{index}", _OPS.get(annotation, _OP_GENERIC), name, None))
                nested.append(items[-1])
            elif annotation == "float" and ns["_fw"] is not None:
                op, conv = (_OP_ATTR_CALL, ns["_fw"]) if plain is None else (_OP_ATTR_FLOAT, (ns["_fw"], *plain))
                items.append((wire, f"_fw(o.{name})", op, name, conv))
            elif annotation in _FREE and ns["_vw"] is not None:
                op, conv = (_OP_ATTR_CALL, ns["_vw"]) if plain is None else (_OP_ATTR_VALUE, (ns["_vw"], *plain))
                items.append((wire, f"_vw(o.{name})", op, name, conv))
            else:
                items.append((wire, f"o.{name}", _OP_ATTR, name, None))
        if order:
            rank = {key: i for i, key in enumerate(order)}
            items.sort(key=lambda item: rank.get(item[0], len(order)))  # stable: unnamed keys keep their order
        omitted = tuple(wire for wire, _, _, _ in fields if wire in omit)
        ns["_fields"] = frozenset(wire for wire, _, _, _ in fields)
        reorder: Any = None
        reorder_arg: Any = None
        if dialect.orders_keys:
            # Unknown fields may hold what the dialect orders (a key it names, a nested
            # message or usage): the dialect's own ordering of the whole object, as the
            # reference path does. Rare: a producer's unknown fields.
            if entry:
                reorder, reorder_arg = dialect.order_entry, tag
            else:
                reorder = dialect.order_value
        if self.compiled:
            return _speedups.Encoder(
                cls,
                fn,
                [(wire, op, arg, conv) for wire, _, op, arg, conv in items],
                tuple(items.index(item) for item in nested),  # the same order of evaluation
                omitted,
                ns["_fields"],
                ns["_iw"],
                reorder,
                reorder_arg,
                self._encoders,
                self.unstructure,
            )
        lines.append("    out = {" + ", ".join(f"{wire!r}: {expr}" for wire, expr, _, _, _ in items) + "}")
        for wire in omitted:
            lines.append(f"    if out[{wire!r}] is None:")
            lines.append(f"        del out[{wire!r}]")
        lines.append("    extra = o.extra")
        lines.append("    if extra.__class__ is not dict:")
        lines.append("        absent = getattr(extra, 'absent', None)  # absent_fields(extra)")
        lines.append("        if absent:  # fields the producer left out: not written back")
        lines.append("            for key in absent:")
        lines.append("                if key in _fields and key in out:")
        lines.append("                    del out[key]")
        lines.append("    if extra:")
        lines.append("        out.update(extra)" if ns["_iw"] is None else "        out.update(_iw(extra))")
        if reorder is not None:
            ns["_reorder"] = reorder
            if entry:
                ns["_kind"] = reorder_arg
                lines.append("        out = _reorder(_kind, out)")
            else:
                lines.append("        out = _reorder(o, out)")
        lines.append("    return out")
        return self._compile(fn, lines, ns)

    # -- decoding ---------------------------------------------------------------------

    def _block(self, data: Any) -> Any:
        if type(data) is not dict:
            raise _Invalid
        tag = data.get("type")
        decoder = self._blocks.get(tag) or self._new_decoder(self._blocks, self.codec._block_by_tag, tag)
        if decoder is None:
            if type(tag) is not str:
                raise _Invalid
            return m.UnknownContent(type=tag, data=dict(data))
        return decoder(data)

    def _message(self, data: Any) -> Any:
        if type(data) is not dict:
            raise _Invalid
        role = data.get("role")
        decoder = self._messages.get(role) or self._new_decoder(self._messages, self.codec._message_by_role, role)
        if decoder is None:
            if type(role) is not str:
                raise _Invalid
            return m.UnknownMessage(role=role, data=dict(data))
        return decoder(data)

    def decode_entry(self, data: Any, session_id: str, version: int) -> Entry:
        """Exactly ``Codec.decode_entry`` (same objects, same errors), faster."""
        try:
            if type(data) is dict:
                tag = data.get("type")
                entry_id = data.get("id")
                parent = data.get(self.parent_key, _NOTHING)
                timestamp = data.get("timestamp")
                if (
                    type(entry_id) is str
                    and entry_id
                    and (parent is None or type(parent) is str)
                    and type(timestamp) is str
                ):
                    decoder = self._entries.get(tag) or self._new_decoder(
                        self._entries, self.codec._entry_by_type, tag, entry=True
                    )
                    if decoder is not None:
                        return decoder(data, session_id, version, entry_id, parent, timestamp)  # type: ignore[no-any-return]
        except (_Invalid, TypeError, ValueError, KeyError, AttributeError):
            pass
        return self.codec.decode_entry(data, session_id, version)

    def decode_message(self, data: Any) -> Any:
        try:
            return self._message(data)
        except (_Invalid, TypeError, ValueError, KeyError, AttributeError):
            return self.codec.structure_message(data)

    # -- encoding ---------------------------------------------------------------------

    def unstructure(self, value: Any) -> Any:
        if value is None:
            return None
        t = type(value)
        if t is tuple:
            u = self.unstructure
            return [u(v) for v in value]
        encoder = self._encoders.get(t) or self._new_encoder(t)
        if encoder is not None:
            return encoder(value)
        # no generated encoder (an Unknown* value, a subclass): the reference, in key order
        return self.codec.dialect.order_value(value, self.codec.unstructure_value(value))

    def encode_entry(self, event: Any) -> bytes:
        encoder = self._encoders.get(type(event)) or self._new_encoder(type(event))
        if encoder is None:
            return self.codec.reference_encode(event)
        try:
            return orjson.dumps(encoder(event))
        except TypeError:
            return self.codec.reference_encode(event)  # raises the reference's error


def fast_codec(codec: Codec) -> FastCodec:
    """The generated fast path of ``codec`` (built once per codec)."""
    fast = codec.__dict__.get("_fast")
    if fast is None:
        fast = FastCodec(codec)
        codec.__dict__["_fast"] = fast
    return fast


__all__ = ["FastCodec", "fast_codec"]
