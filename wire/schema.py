"""The wire format, described once: every class's wire names, tag, field kinds and omit rules.

A :class:`Dialect` names things (SPEC 2.2's snake_case natively; pi's camelCase and role names in ``pi.py``) and
says which fields its writer leaves out when they are None and in which order it writes keys. :func:`schemas`
derives from it and from the attrs fields of the domain classes one :class:`Schema` per class. Encoding
(``codec.py``) and both ways of decoding (``wire.py``) follow from these schemas; nothing else
in the package knows a wire name.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import attrs

from sessiontree.domain import messages as m
from sessiontree.domain.events import ENTRY_CLASSES, Entry

BLOCK_CLASSES: tuple[type, ...] = (m.TextContent, m.ImageContent, m.ThinkingContent, m.ToolCall)
MESSAGE_CLASSES: tuple[type, ...] = (
    m.UserMessage, m.AssistantMessage, m.ToolResultMessage, m.CustomMessage,
    m.CompactionSummaryMessage, m.BranchSummaryMessage,
)
VALUE_CLASSES: tuple[type, ...] = (m.Cost, m.Usage)
ENVELOPE = ("id", "parent_id", "timestamp")
_NOT_ON_THE_WIRE = frozenset({"originator_id", "originator_version", "extra"})

# A field's kind, from its annotation in the domain classes: how it is checked and written.
_KINDS = {
    "str": "str", "int": "int", "float": "number", "bool": "bool", "str | None": "opt_str", "Any": "free",
    "Mapping[str, Any]": "object", "Usage": "value", "Cost": "value", "Usage | None": "opt_value",
    "tuple[Content, ...]": "blocks", "str | tuple[Content, ...]": "content", "Message": "message",
    "tuple[Message, ...] | None": "messages", "tuple[str, ...]": "names",
}
_NESTED = {"Usage": m.Usage, "Cost": m.Cost, "Usage | None": m.Usage}
# Fields every writer leaves out when they are None (optional extras of a message or block).
_OMIT_NONE = {
    m.ThinkingContent: {"signature"}, m.AssistantMessage: {"api", "usage", "error_message"},
    m.ToolResultMessage: {"details"}, m.CustomMessage: {"details"},
}


class Dialect:
    """Names on the wire. The native dialect is SPEC 2.2 as it is (snake_case)."""

    name = "native"
    parent_key = "parent_id"

    def field_name(self, cls: type, name: str) -> str:
        return name

    def role(self, role: str) -> str:  # a message role's wire name
        return role

    def block_type(self, kind: str) -> str:  # a content block type's wire name
        return kind

    def tag(self, cls: type) -> str:
        """The wire tag of a class: an entry's type, a message's role, a block's type."""
        role = getattr(cls, "role", None)
        if isinstance(role, str):
            return self.role(role)
        # the ignore below: a block class holds its tag as a ClassVar, which ``type`` cannot say
        return cls.type if issubclass(cls, Entry) else self.block_type(cls.type)  # type: ignore[attr-defined]

    def omit_none(self, cls: type) -> frozenset[str]:
        """Fields (attribute names) this dialect's writer leaves out when they are None."""
        return frozenset(_OMIT_NONE.get(cls, ()))

    def optional(self, cls: type) -> frozenset[str]:
        """Fields the domain requires that this dialect may leave out (read as None)."""
        return frozenset()

    def key_order(self, cls: type) -> tuple[str, ...] | None:
        """Wire keys in the order this dialect's writer puts them (None: the class's order)."""
        return None


NATIVE = Dialect()


@attrs.frozen
class Field:
    name: str  # the attribute
    wire: str  # its key on the wire
    kind: str  # see _KINDS; also "envelope_parent" (a parent id: present, str or null)
    nested: type | None  # the class of a "value" / "opt_value" field
    required: bool  # must be on the wire
    default: Any  # the value of a field the wire leaves out (an attrs Factory, or a value)
    omit_none: bool  # the dialect's writer leaves it out when it is None


@attrs.frozen
class Schema:
    cls: type
    tag_key: str | None  # "type" (entries, blocks), "role" (messages), None (usage, cost)
    tag: str | None
    fields: tuple[Field, ...]  # in the dialect's key order (the tag comes before them)
    known: frozenset[str]  # every wire key of the class, the tag included


def annotation(cls: type, name: str) -> str:
    """A field's annotation as written in the domain class (``"str | None"``, ...)."""
    for klass in cls.__mro__:
        found = inspect.get_annotations(klass).get(name)
        if found is not None:
            return found if isinstance(found, str) else getattr(found, "__name__", str(found))
    raise TypeError(f"{cls.__name__}.{name} has no annotation")


def _kind(cls: type, name: str) -> tuple[str, type | None]:
    if issubclass(cls, Entry) and name == "parent_id":
        return "envelope_parent", None
    if name == "tokens_before":  # written by some producers as a float
        return "number", None
    text = annotation(cls, name)
    return _KINDS[text], _NESTED.get(text)


def _schema(cls: type, dialect: Dialect) -> Schema:
    entry = issubclass(cls, Entry)
    omit, optional = dialect.omit_none(cls), dialect.optional(cls)
    fields = []
    for a in attrs.fields(cls):
        if a.name in _NOT_ON_THE_WIRE:
            continue
        kind, nested = _kind(cls, a.name)
        wire = dialect.parent_key if entry and a.name == "parent_id" else dialect.field_name(cls, a.name)
        has_default = a.default is not attrs.NOTHING or a.name in optional
        fields.append(Field(a.name, wire, kind, nested, not has_default, None if a.default is attrs.NOTHING else a.default,
                            a.name in omit))
    if entry:  # the envelope first, as every writer puts it, then the entry's own fields
        fields.sort(key=lambda f: ENVELOPE.index(f.name) if f.name in ENVELOPE else len(ENVELOPE))
    tag_key = "type" if entry or cls in BLOCK_CLASSES else "role" if cls in MESSAGE_CLASSES else None
    tag = dialect.tag(cls) if tag_key else None
    order = dialect.key_order(cls)
    if order:
        rank = {key: i for i, key in enumerate(order)}
        fields.sort(key=lambda f: rank.get(f.wire, len(order)))  # stable: keys it does not name keep their place
    known = frozenset({*(f.wire for f in fields), *((tag_key,) if tag_key else ())})
    return Schema(cls, tag_key, tag, tuple(fields), known)


def schemas(dialect: Dialect) -> Mapping[type, Schema]:
    """The schema of every value and entry class in ``dialect``."""
    return {cls: _schema(cls, dialect) for cls in (*VALUE_CLASSES, *BLOCK_CLASSES, *MESSAGE_CLASSES, *ENTRY_CLASSES)}


def default_of(field: Field) -> Any:
    """A fresh default value for a field the wire leaves out."""
    default = field.default
    # the ignore below: attrs types Factory as a function, not a class, for isinstance
    return default.factory() if isinstance(default, attrs.Factory) else default  # type: ignore[arg-type]


# ---- envelopes ----
# Typed views of a line for the modules that read lines without building domain objects (the scan, the listing
# index, search, blobs, the chain, retention, the recorders): they decode through these structs, so a wire name is
# spelled here (native) or in pi_names.py (pi), and nowhere else (tests/test_wire_names.py).

from typing import TypeVar  # noqa: E402

import msgspec  # noqa: E402  (this section is kept apart from the schemas above)

from sessiontree.wire import pi_names as _pi  # noqa: E402

PARENT_SESSION_KEY = "parent_session"  # the native header's; a pi header never has it
TARGET_ID_KEY = "target_id"  # a leaf's and a label's target
CUSTOM_TYPE_KEY = "custom_type"
TOOL_NAME_KEY = "tool_name"
MIME_TYPE_KEY = "mime_type"
UNSET: Any = msgspec.UNSET  # a key the line does not have
_V = TypeVar("_V", bound=msgspec.Struct)


class NativeEnvelope(msgspec.Struct):
    """A native entry line's envelope: decoding it checks the whole line is JSON but builds only these four."""

    type: str
    id: str
    parent: str | None = msgspec.field(name=NATIVE.parent_key)
    timestamp: str


class PiEnvelope(msgspec.Struct):
    """A pi entry line's envelope (``parentId``)."""

    type: str
    id: str
    parent: str | None = msgspec.field(name=_pi.PARENT_KEY)
    timestamp: str


_ENVELOPES: dict[str, msgspec.json.Decoder[Any]] = {
    NATIVE.parent_key: msgspec.json.Decoder(NativeEnvelope), _pi.PARENT_KEY: msgspec.json.Decoder(PiEnvelope),
}


def envelope_decoder(parent_key: str) -> msgspec.json.Decoder[Any]:
    """The envelope decoder of the dialect whose parent key is ``parent_key``."""
    return _ENVELOPES[parent_key]


class LeafTarget(msgspec.Struct):
    """A native ``leaf`` line's target, as written (checked by the reader)."""

    target: Any = msgspec.field(default=None, name=TARGET_ID_KEY)


LEAF_TARGET = msgspec.json.Decoder(LeafTarget)


def is_pi_header(header: Mapping[str, Any]) -> bool:
    """Is this parsed first line a pi header rather than a native one? The native writer
    always writes ``parent_session``; pi never does (``parentSession``, or ``branchedFrom``)."""
    return header.get("type") == "session" and PARENT_SESSION_KEY not in header


def _either(native: Any, pi: Any) -> Any:
    """The native key's value when the line has it (even null), else pi's, else None."""
    return native if native is not UNSET else None if pi is UNSET else pi


class Header(msgspec.Struct):
    """A header line of either dialect, every field as written (its reader checks the types)."""

    type: Any = None
    id: Any = None
    timestamp: Any = None
    cwd: Any = None
    source: Any = None
    parent_native: Any = msgspec.field(default=UNSET, name=PARENT_SESSION_KEY)
    parent_pi: Any = msgspec.field(default=UNSET, name=_pi.PARENT_SESSION_KEY)

    @property
    def parent_session(self) -> Any:
        return _either(self.parent_native, self.parent_pi)


class Line(msgspec.Struct):
    """An entry line of either dialect, as the listing index, search and retention read it (fields as written)."""

    type: Any = None
    id: Any = None
    timestamp: Any = None
    message: Any = None
    content: Any = None
    summary: Any = None
    label: Any = None
    name: Any = None
    data: Any = None
    parent_native: Any = msgspec.field(default=UNSET, name=NATIVE.parent_key)
    parent_pi: Any = msgspec.field(default=UNSET, name=_pi.PARENT_KEY)
    target_native: Any = msgspec.field(default=UNSET, name=TARGET_ID_KEY)
    target_pi: Any = msgspec.field(default=UNSET, name=_pi.TARGET_ID_KEY)
    custom_type: Any = msgspec.field(default=None, name=CUSTOM_TYPE_KEY)
    custom_type_pi: Any = msgspec.field(default=None, name=_pi.CUSTOM_TYPE_KEY)

    @property
    def parent(self) -> Any:
        return _either(self.parent_native, self.parent_pi)

    @property
    def target(self) -> Any:
        """A label's target (either dialect) or a native leaf's."""
        return _either(self.target_native, self.target_pi)

    def pi_leaf_marker(self) -> bool:
        """Is this pi's ``custom`` entry recording a leaf move (``parentId`` the new leaf, ``data.fromId`` the old)?"""
        data = self.data
        return (self.type == "custom" and self.custom_type_pi == _pi.LEAF_MARKER_TYPE and isinstance(data, Mapping)
                and data.keys() == {_pi.FROM_ID_KEY})

    def moved_from(self) -> Any:
        """The leaf a pi leaf marker moved from (call only when :meth:`pi_leaf_marker`)."""
        return self.data[_pi.FROM_ID_KEY]


class MessageLine(msgspec.Struct):
    """A message of either dialect inside an entry line (fields as written)."""

    role: Any = None
    content: Any = None
    summary: Any = None
    command: Any = None  # pi's bashExecution
    output: Any = None
    tool_name: Any = msgspec.field(default=UNSET, name=TOOL_NAME_KEY)
    tool_name_pi: Any = msgspec.field(default=UNSET, name=_pi.TOOL_NAME_KEY)

    @property
    def name_of_tool(self) -> Any:
        return _either(self.tool_name, self.tool_name_pi)


class ListedMessage(msgspec.Struct):
    """A message as the listing index reads it: its role, its content left undecoded until it is wanted."""

    role: Any = None
    content: msgspec.Raw = msgspec.Raw(b"null")


class Listed(msgspec.Struct):
    """An entry line as the listing index folds it, decoded straight from its bytes (a message that is not an object
    fails it: :data:`LINE` reads that line instead)."""

    type: Any = None
    timestamp: Any = None
    name: Any = None
    message: ListedMessage | None = None


HEADER = msgspec.json.Decoder(Header)
LINE = msgspec.json.Decoder(Line)
LISTED = msgspec.json.Decoder(Listed)


def _view(data: Any, cls: type[_V]) -> _V | None:
    if isinstance(data, cls):  # decoded from the line's bytes already
        return data
    if isinstance(data, dict):
        return msgspec.convert(data, cls)
    return msgspec.convert(dict(data), cls) if isinstance(data, Mapping) else None


def header_of(data: Any) -> Header | None:
    """The header view of a parsed line (or the view itself; None when it is not a JSON object)."""
    return _view(data, Header)


def line_of(data: Any) -> Line | None:
    """The entry view of a parsed line (or the view itself; None when it is not a JSON object)."""
    return _view(data, Line)


def message_of(data: Any) -> MessageLine | None:
    """The view of a parsed message (None when it is not a JSON object)."""
    return _view(data, MessageLine)
