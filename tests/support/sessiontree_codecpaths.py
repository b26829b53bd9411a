"""Shared by the codec-path tests (tests/adapters/test_codec_paths*.py): the codecs of both dialects, the bookkeeping
of decoded values, and the check that the typed and the dict path agree on a line."""

from __future__ import annotations

from typing import Any

import attrs
import orjson
import pytest
import sessiontree_strategies as strat
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from sessiontree.adapters.codec import Codec, native_codec
from sessiontree.adapters.pi import pi_codec
from sessiontree.domain import events as ev
from sessiontree.domain import messages as m

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
    via_dict = codec.decode_entry(orjson.loads(line), SID, VERSION)
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
