"""``sessiontree replay --step``'s walk: each event with what it did to the leaf and to the context.

One pass over the log with the entries not kept (``sessiontree.reader.passing``), and the context kept as marks (a role
and a fingerprint per message, :func:`mark_of`) rather than messages, so a replay of any size holds what one step
uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

import msgspec

from sessiontree import reader
from sessiontree.projections.context import entry_to_messages

_REBUILDS = frozenset({"leaf", "compaction"})


def common_prefix(a: list[Any], b: list[Any]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x is not y and x != y:
            break
        n += 1
    return n


Step = tuple[int, Any, str | None, str | None, int, list[str], int]
Mark = tuple[str, int]  # a context message as replay keeps it: its role and a fingerprint of its value


def _events(session: Any, first: int, end: int) -> Iterator[tuple[int, Any, Any]]:
    """``(version, entry, view after it)`` for versions ``first..end`` (2 or more), decoding no entry before ``first``."""
    if first == 2:  # from the start: the session's own replay decodes entries in batches
        for step in islice(session.replay(), 1, end):
            yield step.version, step.event, step.view
        return
    for version, entry in enumerate(islice(reader.entries(session, first - 2), end - first + 1), first):
        yield version, entry, session.at(version)


def steps(session: Any, start: int = 1, end: int | None = None) -> Iterator[Step]:
    """Yield ``(version, event, leaf before, leaf after, removed, roles added, context size)`` for events
    ``start..end``. One pass, entries not kept (``reader.passing``); the context is kept as marks (a role and a
    fingerprint per message), never as messages, so memory follows one step's work, not the session."""
    end = session.version if end is None else end
    options = session.options
    with reader.passing(session):
        if start <= 1:
            yield 1, session.header, None, None, 0, [], 0
            leaf, marks = None, list[Mark]()
        else:  # the session just before ``start``: one build, however many events come before it
            before_start = session.at(start - 1)
            leaf, marks = before_start.leaf_id, _marks(before_start.build_context().messages)
        for version, event, view in _events(session, max(start, 2), end):
            before, leaf = leaf, view.leaf_id
            if event.type not in _REBUILDS and event.parent_id == before and options.extends_with(event):
                # Appended at the leaf: the context grows by this entry's messages.
                removed, added = 0, _marks(entry_to_messages(event, len(marks), [], options))
                marks.extend(added)
            else:
                new = _marks(view.build_context().messages)
                keep = common_prefix(marks, new)
                removed, added = len(marks) - keep, new[keep:]
                marks = new
            yield version, event, before, leaf, removed, [role for role, _ in added], len(marks)


def _marks(messages: Iterable[Any]) -> list[Mark]:
    return [(getattr(message, "role", "?"), mark_of(message)) for message in messages]


def mark_of(message: Any) -> int:
    """A message's fingerprint: of its class and its JSON with keys sorted (encoded in C, so a replay of 100,000
    events spends a fraction of a second on it), or :func:`fingerprint` for a value JSON cannot hold. Messages read
    from a log are equal exactly when these are (numbers as the log has them: 1 is not 1.0 here)."""
    try:
        return hash((type(message), _SORTED.encode(message)))
    except (TypeError, msgspec.EncodeError):
        return fingerprint(message)


_SORTED = msgspec.json.Encoder(order="sorted")


def fingerprint(value: Any) -> int:
    """A hash of ``value`` that equal values share (attrs values by their compared fields, dicts in any order, a list
    apart from a tuple), as ``==`` compares them; unequal values differ but by a 64-bit collision."""
    kind = type(value)
    if kind in _PLAIN:
        return hash(value)
    if kind is list or kind is tuple:
        return hash((kind is list, *map(fingerprint, value)))
    if isinstance(value, dict):
        return hash(frozenset((key, fingerprint(item)) for key, item in value.items()))
    fields = getattr(kind, "__attrs_attrs__", None)
    if fields is not None:
        return hash((kind, *(fingerprint(getattr(value, f.name)) for f in fields if f.eq)))
    try:
        return hash((kind, value))
    except TypeError:
        return hash((kind, repr(value)))


_PLAIN = frozenset({str, int, float, bool, type(None)})


__all__ = ["common_prefix", "fingerprint", "mark_of", "steps"]
