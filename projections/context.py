"""The LLM context for a branch (SPEC 3): the messages the model sees and the settings.

``build_session_context`` is a pure function of the branch's entries, as in the seed and
in pi. ``path_to_root_or_compaction`` and ``context_state`` read the entry log directly so
that building a context costs O(context), not O(session): the first stops at the latest
compaction's boundary, the second walks back only until every setting is known.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, MutableSequence, Sequence
from itertools import islice
from typing import Any

import attrs

from sessiontree.domain.events import ContextCompacted, parse_timestamp
from sessiontree.domain.log import EntryLog
from sessiontree.domain.messages import (
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
)

EntryTransform = Callable[[list[Any]], list[Any]]
EntryProjector = Callable[[Any, int, list[Any]], list[Any]]


@attrs.frozen(kw_only=True)
class SessionContextBuildOptions:
    """How to turn a branch into messages, beyond the default rules.

    ``entry_transforms`` run in order after the default compaction transform, each taking
    and returning a list of entries. ``entry_projectors`` map a ``custom`` entry's
    ``custom_type`` to a callable ``(entry, index, entries) -> list of messages``.
    """

    entry_transforms: tuple[EntryTransform, ...] = attrs.field(default=(), converter=tuple)
    entry_projectors: Mapping[str, EntryProjector] = attrs.field(factory=dict, converter=dict)

    def __attrs_post_init__(self) -> None:
        for transform in self.entry_transforms:
            if not callable(transform):
                raise TypeError(f"entry transform {transform!r} is not callable")
        for key, projector in self.entry_projectors.items():
            if not isinstance(key, str) or not callable(projector):
                raise TypeError(f"entry projector {key!r}: {projector!r} is not a callable keyed by str")

    def merged(self, other: SessionContextBuildOptions | None) -> SessionContextBuildOptions:
        """These options followed by ``other``'s: transforms appended, projectors overridden."""
        if other is None:
            return self
        if not isinstance(other, SessionContextBuildOptions):
            raise TypeError(f"options must be SessionContextBuildOptions or None, not {other!r}")
        return SessionContextBuildOptions(
            entry_transforms=self.entry_transforms + other.entry_transforms,
            entry_projectors={**self.entry_projectors, **other.entry_projectors},
        )

    def extends_with(self, entry: Any) -> bool:
        """Can a context built with these options take ``entry`` by appending it?

        True when there are no projectors (they may look at any entry of the list) and every
        transform declares ``incremental(entry)`` true: appending ``entry`` leaves the
        transform's earlier output unchanged and passes the entry through as it is.
        """
        if self.entry_projectors:
            return False
        for transform in self.entry_transforms:
            incremental = getattr(transform, "incremental", None)
            if incremental is None or not incremental(entry):
                return False
        return True

    @property
    def cacheable(self) -> bool:
        """Can a context built with these options be kept and extended on append at all?"""
        return not self.entry_projectors and all(
            getattr(t, "incremental", None) is not None for t in self.entry_transforms
        )


DEFAULT_OPTIONS = SessionContextBuildOptions()


@attrs.frozen(kw_only=True)
class ContextState:
    """The settings in force at the end of a branch."""

    thinking_level: str = "off"
    model: Mapping[str, str] | None = None
    active_tool_names: tuple[str, ...] | None = None


class ContextMessages(MutableSequence[Any]):
    """The messages of a built context: a list-like snapshot, taken in O(1).

    A session keeps the messages of its current context and appends to them as entries
    are appended. Building the context hands out that list and a length instead of a copy
    (a 40k-message context would otherwise be copied on every call): later appends extend
    the session's list past the snapshot's end, and a rebuild makes a new list, so the
    snapshot never changes under its holder. It behaves as a list: index, slice, iterate,
    ``==`` with a list, ``+``, and every list mutator (``append``, ``extend``, ``insert``,
    ``pop``, item assignment, ``sort``...), the first of which copies the messages into a
    list of its own (copy on write); the session's list is never changed through it.
    """

    __slots__ = ("_items", "_len", "_own")

    def __init__(self, items: Iterable[Any] = (), length: int | None = None) -> None:
        if isinstance(items, list) and length is not None:
            if not 0 <= length <= len(items):
                raise ValueError(f"length {length} is outside the {len(items)} messages")
            self._own = False  # shared with the session: copy before the first change
        else:
            items = list(items)
            length = len(items)
            self._own = True
        self._items: list[Any] = items
        self._len: int = length

    def _mine(self) -> list[Any]:
        if not self._own:
            self._items = self._items[: self._len]
            self._own = True
        return self._items

    # -- reading ----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._items) if self._own else self._len

    def _view(self) -> list[Any]:
        return self._items if self._own or self._len == len(self._items) else self._items[: self._len]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self._view()[index]
        if not self._own:
            if index < 0:
                index += self._len
            if not 0 <= index < self._len:
                raise IndexError("list index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items) if self._own else islice(self._items, self._len)

    def _as_list(self, other: object) -> list[Any] | None:
        if isinstance(other, ContextMessages):
            return other._view()
        if isinstance(other, list):
            return other
        return None  # like a list: a tuple or another sequence is never equal, nor ordered

    def __eq__(self, other: object) -> bool:
        theirs = self._as_list(other)
        return NotImplemented if theirs is None else self._view() == theirs  # type: ignore[return-value]

    def __lt__(self, other: object) -> bool:
        theirs = self._as_list(other)
        return NotImplemented if theirs is None else self._view() < theirs  # type: ignore[return-value]

    def __le__(self, other: object) -> bool:
        theirs = self._as_list(other)
        return NotImplemented if theirs is None else self._view() <= theirs  # type: ignore[return-value]

    def __gt__(self, other: object) -> bool:
        theirs = self._as_list(other)
        return NotImplemented if theirs is None else self._view() > theirs  # type: ignore[return-value]

    def __ge__(self, other: object) -> bool:
        theirs = self._as_list(other)
        return NotImplemented if theirs is None else self._view() >= theirs  # type: ignore[return-value]

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Iterable[Any]) -> list[Any]:
        if not isinstance(other, (list, ContextMessages)):
            return NotImplemented  # type: ignore[return-value]  # as list + tuple: TypeError
        return [*self, *other]

    def __radd__(self, other: Iterable[Any]) -> list[Any]:
        if not isinstance(other, list):
            return NotImplemented  # type: ignore[return-value]
        return [*other, *self]

    def __mul__(self, count: int) -> list[Any]:
        return self._view() * count

    __rmul__ = __mul__

    def copy(self) -> list[Any]:
        """The messages as a new list."""
        return list(self)

    def __reduce__(self) -> Any:
        return (ContextMessages, (list(self),))

    def __repr__(self) -> str:
        return repr(list(self))

    # -- changing (copy on write) -----------------------------------------------------

    def __setitem__(self, index: Any, value: Any) -> None:
        self._mine()[index] = value

    def __delitem__(self, index: Any) -> None:
        del self._mine()[index]

    def insert(self, index: int, value: Any) -> None:
        self._mine().insert(index, value)

    def append(self, value: Any) -> None:
        self._mine().append(value)

    def extend(self, values: Iterable[Any]) -> None:
        if values is self:
            values = list(self)  # (iterating itself while it grows would never end)
        self._mine().extend(values)

    def __iadd__(self, values: Iterable[Any]) -> ContextMessages:  # type: ignore[override,misc]
        self.extend(values)
        return self

    def __imul__(self, count: int) -> ContextMessages:
        mine = self._mine()
        mine[:] = mine * count
        return self

    def pop(self, index: int = -1) -> Any:
        return self._mine().pop(index)

    def clear(self) -> None:
        self._items, self._len, self._own = [], 0, True

    def reverse(self) -> None:
        self._mine().reverse()

    def sort(self, *, key: Any = None, reverse: bool = False) -> None:
        self._mine().sort(key=key, reverse=reverse)


@attrs.frozen(kw_only=True)
class SessionContext:
    """What the model sees: the messages, and the settings in force."""

    messages: MutableSequence[Any] = attrs.field(converter=lambda v: v if isinstance(v, ContextMessages) else ContextMessages(v))
    thinking_level: str = "off"
    model: Mapping[str, str] | None = None
    active_tool_names: list[str] | None = None


def timestamp_ms(entry: Any) -> int:
    """An entry's ISO timestamp as Unix milliseconds (summary messages carry these)."""
    try:
        return int(parse_timestamp(entry.timestamp).timestamp() * 1000)
    except (ValueError, TypeError):
        return 0


# -- settings ----------------------------------------------------------------------------


def derive_state(path_entries: Iterable[Any]) -> ContextState:
    """Settings from a whole branch, root first: the latest change of each kind wins."""
    thinking = "off"
    model = None
    tools = None
    for entry in path_entries:
        kind = entry.type
        if kind == "thinking_level_change":
            thinking = entry.thinking_level
        elif kind == "model_change":
            model = {"provider": entry.provider, "model_id": entry.model_id}
        elif kind == "message" and isinstance(entry.message, AssistantMessage):
            model = {"provider": entry.message.provider, "model_id": entry.message.model}
        elif kind == "active_tools_change":
            tools = tuple(entry.active_tool_names)
    return ContextState(thinking_level=thinking, model=model, active_tool_names=tools)


_SETTING_KINDS = ("thinking_level_change", "model_change", "message", "active_tools_change")


def context_state(log: EntryLog, leaf_id: str | None, limit: int | None = None) -> ContextState:
    """The same settings as :func:`derive_state`, found by walking back from the leaf."""
    thinking = model = tools = None
    # A setting with no entry of its kind anywhere before ``limit`` keeps its default, and the
    # walk can stop below the first entry of every kind still wanted (positions per type are
    # indexed): a session that never changes its tools is not walked to the root for them.
    firsts = {kind: log.positions_of(kind, limit)[:1] for kind in _SETTING_KINDS}
    found_thinking = not firsts["thinking_level_change"]
    found_model = not firsts["model_change"] and not firsts["message"]
    found_tools = not firsts["active_tools_change"]
    wanted = [
        kinds
        for kinds, found in (
            (("thinking_level_change",), found_thinking),
            (("model_change", "message"), found_model),
            (("active_tools_change",), found_tools),
        )
        if not found
    ]
    floor = min((firsts[k][0] for kinds in wanted for k in kinds if firsts[k]), default=0)
    start = log.position(leaf_id, limit) if leaf_id is not None else None
    pos = -1 if start is None else start
    types, ppos = log.links()
    while pos >= floor and not (found_thinking and found_model and found_tools):
        kind = types[pos]
        if kind == "thinking_level_change" and not found_thinking:
            thinking, found_thinking = log.get(pos).thinking_level, True  # type: ignore[attr-defined]
        elif kind == "model_change" and not found_model:
            entry = log.get(pos)
            model, found_model = {"provider": entry.provider, "model_id": entry.model_id}, True  # type: ignore[attr-defined]
        elif kind == "message" and not found_model:
            message = log.get(pos).message  # type: ignore[attr-defined]
            if isinstance(message, AssistantMessage):
                model, found_model = {"provider": message.provider, "model_id": message.model}, True
        elif kind == "active_tools_change" and not found_tools:
            tools, found_tools = tuple(log.get(pos).active_tool_names), True  # type: ignore[attr-defined]
        pos = ppos[pos]
    return ContextState(thinking_level=thinking or "off", model=model, active_tool_names=tools)


# -- the path the context needs ------------------------------------------------------------


def path_to_root_or_compaction(
    log: EntryLog, leaf_id: str | None, limit: int | None = None
) -> list[int]:
    """Positions, root first, of the shortest branch suffix the context needs.

    Walking back from the leaf, the first compaction met is the latest: with a retained
    tail the path stops there; otherwise it goes on to its ``first_kept_entry_id`` (or
    stops at the compaction when that is null). A kept id that is not on the branch
    means a walk to the root; the context then keeps nothing before the compaction.
    """
    out: list[int] = []
    if leaf_id is None:
        return out
    start = log.position(leaf_id, limit)
    if start is None:
        return out
    types, ppos = log.links()
    pos = start
    append = out.append
    # First the walk down to the latest compaction (the common case: no compaction at all,
    # or one near the leaf), with only type tests per step.
    while pos >= 0:
        kind = types[pos]
        if kind == "compaction":
            break
        if kind != "leaf":
            append(pos)
        pos = ppos[pos]
    if pos < 0:
        out.reverse()
        return out
    append(pos)
    compaction = log.get(pos)
    if compaction.retained_tail is not None or compaction.first_kept_entry_id is None:  # type: ignore[attr-defined]
        out.reverse()
        return out
    stop_at = log.position(compaction.first_kept_entry_id)  # type: ignore[attr-defined]
    pos = ppos[pos]
    while pos >= 0:
        if types[pos] != "leaf":
            append(pos)
        if pos == stop_at:
            break
        pos = ppos[pos]
    out.reverse()
    return out


def branch_positions(log: EntryLog, leaf_id: str | None, limit: int | None = None) -> list[int]:
    """Positions of the whole root-to-leaf path (``leaf`` side records left out)."""
    return [p for p in log.path_positions(leaf_id, limit) if log.type_of(p) != "leaf"]


# -- entries to messages ----------------------------------------------------------------------


def default_compaction_transform(path_entries: Sequence[Any]) -> list[Any]:
    """Apply the latest compaction on the branch: its entry, the kept range, the rest."""
    last = None
    for index in range(len(path_entries) - 1, -1, -1):
        if isinstance(path_entries[index], ContextCompacted):
            last = index
            break
    if last is None:
        return list(path_entries)
    compaction = path_entries[last]
    out = [compaction]
    if compaction.retained_tail is None and compaction.first_kept_entry_id is not None:
        start = None
        for index in range(last):
            if path_entries[index].id == compaction.first_kept_entry_id:
                start = index
                break
        if start is not None:
            out.extend(e for e in path_entries[start:last] if not isinstance(e, ContextCompacted))
    out.extend(path_entries[last + 1 :])
    return out


def entry_to_messages(
    entry: Any, index: int, entries: list[Any], options: SessionContextBuildOptions
) -> list[Any]:
    """The messages one context entry contributes (SPEC 3)."""
    kind = entry.type
    if kind == "message":
        return [entry.message]
    if kind == "custom_message":
        return [
            CustomMessage(
                custom_type=entry.custom_type,
                content=entry.content,
                display=entry.display,
                details=entry.details,
                timestamp=timestamp_ms(entry),
            )
        ]
    if kind == "compaction":
        out: list[Any] = [
            CompactionSummaryMessage(
                summary=entry.summary,
                tokens_before=int(entry.tokens_before),
                timestamp=timestamp_ms(entry),
            )
        ]
        if entry.retained_tail is not None:
            out.extend(entry.retained_tail)
        return out
    if kind == "branch_summary":
        if not entry.summary:
            return []
        return [
            BranchSummaryMessage(
                summary=entry.summary, from_id=entry.from_id, timestamp=timestamp_ms(entry)
            )
        ]
    if kind == "custom":
        projector = options.entry_projectors.get(entry.custom_type)
        if projector is not None:
            return list(projector(entry, index, entries))
    return []


def context_entries(path_entries: Sequence[Any], options: SessionContextBuildOptions) -> list[Any]:
    entries = default_compaction_transform(path_entries)
    for transform in options.entry_transforms:
        entries = list(transform(entries))
    return entries


def build_session_context(
    path_entries: Sequence[Any],
    options: SessionContextBuildOptions | None = None,
    state: ContextState | None = None,
) -> SessionContext:
    """The context of a branch given its entries, root first (a suffix is enough when the
    settings are passed in as ``state``)."""
    opts = options or DEFAULT_OPTIONS
    if state is None:
        state = derive_state(path_entries)
    entries = context_entries(path_entries, opts)
    messages: list[Any] = []
    for index, entry in enumerate(entries):
        messages.extend(entry_to_messages(entry, index, entries, opts))
    return SessionContext(
        messages=messages,
        thinking_level=state.thinking_level,
        model=dict(state.model) if state.model is not None else None,
        active_tool_names=list(state.active_tool_names) if state.active_tool_names is not None else None,
    )
