"""Shared by the codec-path tests (tests/wire/test_codec_paths*.py): the codecs of both dialects, the bookkeeping
of decoded values, and the check that the typed and the dict path agree on a line."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import sessiontree_strategies as strat
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from sessiontree.domain import events as ev
from sessiontree.domain import messages as m
from sessiontree.pi.pi import pi_codec
from sessiontree.wire.codec import Codec, native_codec
from sessiontree.wire.jsontext import parse
from sessiontree.wire.schema import BLOCK_CLASSES, MESSAGE_CLASSES

SID = strat.SESSION_ID
VERSION = 5
CODECS = {"native": native_codec(), "pi": pi_codec()}
DIALECTS = pytest.mark.parametrize("dialect", sorted(CODECS))
UNKNOWN_KEY, UNKNOWN_VALUE = "xNew", [1, {"a": None}]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- the bookkeeping of decoded values -----------------------------------------------------------


def bookkeeping(value: Any, path: str = "$") -> list[tuple[str, str, frozenset[str], frozenset[str], tuple[str, ...]]]:
    """``(path, class, absent, nulls, unknown keys)`` of every attrs value under ``value`` (itself
    included) that has an ``extra``: the entry, its message(s), content blocks, usage, cost."""
    found: list[tuple[str, str, frozenset[str], frozenset[str], tuple[str, ...]]] = []
    if not attrs.has(type(value)):
        return found
    if "extra" in attrs.fields_dict(type(value)):
        extra = value.extra
        found.append((
            path, type(value).__name__, frozenset(getattr(extra, "absent", ())), frozenset(getattr(extra, "nulls", ())),
            tuple(extra),
        ))
    for a in attrs.fields(type(value)):
        if a.name == "extra":
            continue
        item = getattr(value, a.name)
        if isinstance(item, tuple):
            for i, x in enumerate(item):
                found += bookkeeping(x, f"{path}.{a.name}[{i}]")
        else:
            found += bookkeeping(item, f"{path}.{a.name}")
    return found


def assert_paths_agree(codec: Codec, line: bytes) -> tuple[Any, Any]:
    """Decode ``line`` both ways; the events, their classes and their bookkeeping must agree.
    Returns (what ``decode_line`` gave, what the dict path gave)."""
    typed = codec.decode_line(line, SID, VERSION)
    # parsed as the library parses: integers beyond 64 bits stay exact, as on the typed path (orjson makes them floats)
    via_dict = codec.decode_entry(parse(line), SID, VERSION)
    assert type(typed) is type(via_dict)
    assert typed == via_dict
    assert bookkeeping(typed) == bookkeeping(via_dict)
    return typed, via_dict


def typed_accepts(codec: Codec, line: bytes) -> bool:
    """Does the typed path itself (not the fallback) decode this line?"""
    return (codec._wire or codec._typed()).decode(line, SID, VERSION) is not None


# -- events the typed path must accept -------------------------------------------------------


def plain(value: Any) -> Any:
    """``value`` without anything the typed path refuses: every ``extra`` emptied, unknown
    blocks and messages dropped from lists, an unknown message replaced by a user message."""
    if isinstance(value, tuple):
        return tuple(plain(x) for x in value if not isinstance(x, (m.UnknownContent, m.UnknownMessage)))
    if isinstance(value, m.UnknownMessage):
        return m.UserMessage(content="stood in for an unknown role", timestamp=1)
    if not attrs.has(type(value)):
        return value
    changes: dict[str, Any] = {}
    for a in attrs.fields(type(value)):
        if not a.init:
            continue
        changes[a.name] = {} if a.name == "extra" else plain(getattr(value, a.name))
    return attrs.evolve(value, **changes)


known_entries = strat.entry_events(version=VERSION).filter(lambda e: not isinstance(e, ev.UnknownEntryAppended))
plain_entries = known_entries.map(plain)
# Half the draws are messages: they hold most of the nested values (blocks, usage, cost).
message_heavy = st.one_of(strat.entry_strategies(version=VERSION)[ev.MessageAppended], known_entries)


# -- the wire objects of a parsed line (the producers' and the fixtures' mutations) -------------------------


def _tag_classes(codec: Codec, classes: tuple[type, ...]) -> dict[str, type]:
    return {codec.schemas[c].tag: c for c in classes}  # type: ignore[misc]


def wire_objects(codec: Codec, data: Any, cls: type, path: str = "$") -> list[tuple[str, type, dict[str, Any]]]:
    """``(path, class, dict)`` of every object of a known class in a parsed line: the entry,
    message(s), blocks, usage, cost (objects of unknown tags hold no bookkeeping: skipped)."""
    if not isinstance(data, dict):
        return []
    found = [(path, cls, data)]
    blocks, msgs = _tag_classes(codec, BLOCK_CLASSES), _tag_classes(codec, MESSAGE_CLASSES)
    for f in codec.schemas[cls].fields:
        value = data.get(f.wire)
        where = f"{path}.{f.wire}"
        if f.kind in ("value", "opt_value"):
            found += wire_objects(codec, value, f.nested, where)  # type: ignore[arg-type]
        elif f.kind == "message" and isinstance(value, dict) and value.get("role") in msgs:
            found += wire_objects(codec, value, msgs[value["role"]], where)
        elif f.kind in ("blocks", "content", "messages") and isinstance(value, list):
            tags, key = (msgs, "role") if f.kind == "messages" else (blocks, "type")
            for i, x in enumerate(value):
                if isinstance(x, dict) and x.get(key) in tags:
                    found += wire_objects(codec, x, tags[x[key]], f"{where}[{i}]")
    return found


def entry_class(codec: Codec, data: dict[str, Any]) -> type:
    return {codec.schemas[c].tag: c for c in ev.ENTRY_CLASSES}[data["type"]]  # type: ignore[return-value]


def rewrite(codec: Codec, cls: type, data: dict[str, Any], drop: set[str], null: set[str], add: bool) -> None:
    """Change one wire object in place, as another producer would have written it: the known
    keys in the writer's order (the tag first), ``drop`` left out, ``null`` written as null,
    the unknown keys after them and ``xNew`` last when ``add``."""
    schema = codec.schemas[cls]
    known = ([schema.tag_key] if schema.tag_key else []) + [f.wire for f in schema.fields]
    out: dict[str, Any] = {}
    for key in known:
        if key in drop:
            continue
        if key in null:
            out[key] = None
        elif key in data:
            out[key] = data[key]
    out.update((k, v) for k, v in data.items() if k not in schema.known)
    if add:
        out[UNKNOWN_KEY] = UNKNOWN_VALUE
    data.clear()
    data.update(out)


def ordered(value: Any) -> Any:
    """A parsed JSON value with its key order made part of equality."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [ordered(x) for x in value]
    return value
