"""Reading, the complete case: a parsed line (dicts and lists) into domain objects.

Driven by the same schemas as ``wire.py``, it reads what the typed path refuses: unknown
fields (kept in ``extra``), unknown roles, block and entry types (kept whole in the Unknown*
classes), and values of the wrong type, for which it raises ``SessionError("corrupt")``
naming the entry and the field. Known fields the line leaves out are remembered (``absent``)
and so are ``null``s the dialect's writer would have left out (``nulls``), so that writing
the value back gives the line again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessiontree.domain import messages as m
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import ENTRY_CLASSES, Entry, UnknownEntryAppended
from sessiontree.wire.schema import BLOCK_CLASSES, MESSAGE_CLASSES, Field, Schema, default_of


class Malformed(Exception):
    """A value of the wrong type, or a missing field (turned into ``corrupt`` by the caller)."""


_SCALARS = {"str": (str,), "int": (int,), "bool": (bool,), "number": (int, float), "opt_str": (str, type(None))}
_WHAT = {"str": "a string", "int": "an integer", "bool": "a boolean", "number": "a number", "opt_str": "a string or null",
         "object": "an object", "names": "a list of strings"}


class Structurer:
    """Dicts to domain objects for one dialect (see the module documentation)."""

    def __init__(self, schemas: Mapping[type, Schema], parent_key: str) -> None:
        self._schemas = schemas
        self._parent_key = parent_key
        self._blocks = {schemas[c].tag: schemas[c] for c in BLOCK_CLASSES}
        self._messages = {schemas[c].tag: schemas[c] for c in MESSAGE_CLASSES}
        self._entries = {schemas[c].tag: schemas[c] for c in ENTRY_CLASSES}

    def entry(self, data: Any, session_id: str, version: int) -> Entry:
        """An entry event from a parsed line (``version``: its place in the log)."""
        tag, entry_id = self._envelope(data)
        schema = self._entries.get(tag)
        if schema is None:
            return UnknownEntryAppended(
                originator_id=session_id, originator_version=version, timestamp=data["timestamp"], id=entry_id,
                parent_id=data[self._parent_key], type=tag, data=data,
            )
        try:
            fields, extra = self._fields(schema, data)
        except Malformed as exc:
            raise SessionError("corrupt", f"{tag} entry {entry_id!r} is malformed: {exc}") from None
        # the ignore below: schema.cls is a plain type; it makes an Entry
        return schema.cls(originator_id=session_id, originator_version=version, extra=extra, **fields)  # type: ignore[no-any-return]

    def _envelope(self, data: Any) -> tuple[str, str]:
        if not isinstance(data, dict):
            raise SessionError("corrupt", "an entry line must be a JSON object")
        tag, entry_id, pk = data.get("type"), data.get("id"), self._parent_key
        if not isinstance(tag, str):
            raise SessionError("corrupt", "entry has no string 'type'")
        if not isinstance(entry_id, str) or not entry_id:
            raise SessionError("corrupt", f"{tag} entry has no string 'id'")
        if pk not in data or (data[pk] is not None and not isinstance(data[pk], str)):
            raise SessionError("corrupt", f"entry {entry_id!r} has no '{pk}' (string or null)")
        if not isinstance(data.get("timestamp"), str):
            raise SessionError("corrupt", f"entry {entry_id!r} has no string 'timestamp'")
        return tag, entry_id

    def value(self, cls: type, data: Any) -> Any:
        schema = self._schemas[cls]
        if not isinstance(data, dict):
            raise Malformed(f"expected an object for {cls.__name__}, got {data!r:.80}")
        fields, extra = self._fields(schema, data)
        try:
            return cls(**fields, extra=extra)
        except (TypeError, ValueError) as exc:
            raise Malformed(str(exc)) from None

    def block(self, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise Malformed(f"content block must be an object with a string 'type': {data!r:.80}")
        schema = self._blocks.get(data["type"])
        return m.UnknownContent(type=data["type"], data=dict(data)) if schema is None else self.value(schema.cls, data)

    def message(self, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("role"), str):
            raise Malformed(f"message must be an object with a string 'role': {data!r:.80}")
        schema = self._messages.get(data["role"])
        return m.UnknownMessage(role=data["role"], data=dict(data)) if schema is None else self.value(schema.cls, data)

    def content(self, data: Any, *, allow_str: bool = True) -> Any:
        if isinstance(data, str) and allow_str:
            return data
        if not isinstance(data, list):
            raise Malformed(f"content must be {'a string or ' if allow_str else ''}a list: {data!r:.80}")
        return tuple(self.block(b) for b in data)

    def _fields(self, schema: Schema, data: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        out: dict[str, Any] = {}
        absent, nulls = [], []
        for f in schema.fields:
            if f.wire not in data:
                if f.required:
                    raise Malformed(f"no '{f.wire}'")
                if not f.omit_none:  # left out is how its writer writes None: nothing to remember
                    absent.append(f.name)
                out[f.name] = default_of(f)
                continue
            value = data[f.wire]
            if value is None and f.omit_none:
                nulls.append(f.name)
            out[f.name] = self._field(f, value)
        unknown = data.keys() - schema.known
        if not (unknown or absent or nulls):
            return out, m.NO_EXTRA
        return out, m.Extra({k: data[k] for k in data if k in unknown}, frozenset(absent), frozenset(nulls))

    def _field(self, f: Field, value: Any) -> Any:
        kind = f.kind
        if kind in _SCALARS or kind == "envelope_parent":
            number = kind == "number" and type(value) in (int, float)
            if value.__class__ not in _SCALARS.get(kind, (str, type(None))) and not number:
                raise Malformed(f"'{f.wire}' must be {_WHAT.get(kind, 'a string or null')}, not {value!r:.40}")
            return value
        if kind == "free":
            return value
        if kind == "object":
            if not isinstance(value, dict):
                raise Malformed(f"'{f.wire}' must be an object, not {value!r:.40}")
            return value
        if kind == "names":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise Malformed(f"'{f.wire}' must be a list of strings")
            return tuple(value)
        if kind == "value" or (kind == "opt_value" and value is not None):
            # the ignore below: value fields always name their nested class (schema.py)
            return self.value(f.nested, value)  # type: ignore[arg-type]
        if kind in ("blocks", "content"):
            return self.content(value, allow_str=kind == "content")
        if kind == "message":
            return self.message(value)
        if kind == "messages" and value is not None:
            if not isinstance(value, list):
                raise Malformed(f"'{f.wire}' must be a list or null")
            return tuple(self.message(v) for v in value)
        return value  # a None opt_value or messages
