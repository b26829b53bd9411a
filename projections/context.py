"""The LLM context for a branch (SPEC 3): the messages the model sees and the settings.

``build_session_context`` is a pure function of the branch's entries, as in the seed and in pi. The entries come from
walks over the log from a leaf towards the root (:func:`path_to_root_or_compaction`), which follow the log's parent
positions, so building a context costs O(context), not O(session). The settings in force (thinking level, model, active
tools) come from one rule, :func:`setting_of`, used three ways: folded over a whole branch, found by walking back from
a leaf (:func:`settings_at`), and applied on append by :class:`ContextProjection`, which keeps a built context and
extends it like every other projection. A built context's messages are a :class:`ContextMessages` snapshot.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableSequence, Sequence
from itertools import islice
from typing import Any, cast

import attrs

from sessiontree.domain.events import ContextCompacted, parse_timestamp
from sessiontree.domain.log import EntryLog
from sessiontree.domain.messages import AssistantMessage, BranchSummaryMessage, CompactionSummaryMessage, CustomMessage

# The default of a ``leaf_id`` argument: the current leaf. None is a leaf too: before the first entry (SPEC 2.2).
CURRENT_LEAF: Any = type("CurrentLeaf", (), {"__repr__": lambda self: "<current leaf>"})()


def path_to_root_or_compaction(log: EntryLog, leaf_id: str | None, limit: int | None = None) -> list[int]:
    """Positions, root first, of the shortest branch suffix the context needs. Walking back from the leaf, the first
    compaction met is the latest: with a retained tail the path stops there; otherwise it goes on to its
    ``first_kept_entry_id`` (or stops at the compaction when that is null). A kept id that is not on the branch means a
    walk to the root; the context then keeps nothing before the compaction. ``leaf`` records are left out."""
    out: list[int] = []
    start = log.position(leaf_id, limit) if leaf_id is not None else None
    if start is None:
        return out
    types, ppos = log.links()
    pos = start
    while pos >= 0 and types[pos] != "compaction":  # the common case: type tests only
        if types[pos] != "leaf":
            out.append(pos)
        pos = ppos[pos]
    if pos >= 0:
        out.append(pos)
        compaction = cast(ContextCompacted, log.get(pos))
        kept = compaction.first_kept_entry_id
        if compaction.retained_tail is None and kept is not None:
            stop_at = log.position(kept)
            pos = ppos[pos]
            while pos >= 0:
                if types[pos] != "leaf":
                    out.append(pos)
                if pos == stop_at:
                    break
                pos = ppos[pos]
    out.reverse()
    return out


def branch_positions(log: EntryLog, leaf_id: str | None, limit: int | None = None) -> list[int]:
    """Positions of the whole root-to-leaf path (``leaf`` side records left out)."""
    return [p for p in log.path_positions(leaf_id, limit) if log.type_of(p) != "leaf"]


EntryTransform = Callable[[list[Any]], list[Any]]
EntryProjector = Callable[[Any, int, list[Any]], list[Any]]


def _transforms(value: Iterable[EntryTransform] | None) -> tuple[EntryTransform, ...]:
    if isinstance(value, (str, bytes)):
        raise TypeError(f"entry_transforms must be a list of callables, not {value!r:.80}")
    transforms = () if value is None else tuple(value)
    for transform in transforms:
        if not callable(transform):
            raise TypeError(f"entry transform {transform!r} is not callable")
    return transforms


def _projectors(value: Mapping[str, EntryProjector] | None) -> dict[str, EntryProjector]:
    projectors = {} if value is None else dict(value)
    for key, projector in projectors.items():
        if not isinstance(key, str) or not callable(projector):
            raise TypeError(f"entry projector {key!r}: {projector!r} is not a callable keyed by str")
    return projectors


@attrs.frozen
class SessionContextBuildOptions:
    """How to turn a branch into messages, beyond the default rules.

    ``entry_transforms`` run in order after the default compaction transform, each taking and returning a list of
    entries. ``entry_projectors`` map a ``custom`` entry's ``custom_type`` to ``(entry, index, entries) -> messages``.
    None means none of either, so the seed's ``SessionContextBuildOptions(None, None)`` is the default.
    """

    entry_transforms: tuple[EntryTransform, ...] = attrs.field(default=(), converter=_transforms)
    entry_projectors: Mapping[str, EntryProjector] = attrs.field(factory=dict, converter=_projectors)

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
        """Can a context built with these options take ``entry`` by appending it? True when there are no projectors (they
        may look at any entry of the list) and every transform declares ``incremental(entry)`` true: appending ``entry``
        leaves the transform's earlier output unchanged and passes the entry through as it is."""
        if self.entry_projectors:
            return False
        for transform in self.entry_transforms:
            incremental = getattr(transform, "incremental", None)
            if incremental is None or not incremental(entry):
                return False
        return True


DEFAULT_OPTIONS = SessionContextBuildOptions()


@attrs.frozen(kw_only=True)
class ContextState:
    """The settings in force at the end of a branch."""

    thinking_level: str = "off"
    model: Mapping[str, str] | None = None
    active_tool_names: tuple[str, ...] | None = None


def setting_of(entry: Any) -> tuple[str, Any] | None:
    """The setting an entry makes, as ``(ContextState field, value)``, or None: a thinking
    level change, a model change or an assistant reply (its model), a tools change."""
    kind = entry.type
    if kind == "thinking_level_change":
        return "thinking_level", entry.thinking_level
    if kind == "model_change":
        return "model", {"provider": entry.provider, "model_id": entry.model_id}
    if kind == "message" and isinstance(entry.message, AssistantMessage):
        return "model", {"provider": entry.message.provider, "model_id": entry.message.model}
    if kind == "active_tools_change":
        return "active_tool_names", tuple(entry.active_tool_names)
    return None


_SETTING_KINDS = {"thinking_level_change": "thinking_level", "model_change": "model", "message": "model",
                  "active_tools_change": "active_tool_names"}


def settings_at(log: EntryLog, leaf_id: str | None, limit: int | None = None) -> ContextState:
    """The settings in force at ``leaf_id``: walking back from it, the first of each kind wins; the walk stops once every
    setting is known, or below the first entry of each kind still missing (positions per type are indexed: a session
    that never changes its tools is not walked to the root for them)."""
    firsts: dict[str, int] = {}
    for kind, name in _SETTING_KINDS.items():
        positions = log.positions_of(kind, limit)
        if positions:
            firsts[name] = min(firsts.get(name, positions[0]), positions[0])
    found: dict[str, Any] = {}
    pos = log.position(leaf_id, limit) if leaf_id is not None else None
    types, ppos = log.links()
    pos = -1 if pos is None else pos
    wanted = dict(_SETTING_KINDS)
    while firsts:
        floor = min(firsts.values())  # below it no missing setting is left to find
        while pos >= floor and types[pos] not in wanted:
            pos = ppos[pos]
        if pos < floor:
            break
        setting = setting_of(log.get(pos))
        if setting is not None and setting[0] not in found:
            found[setting[0]] = setting[1]
            firsts.pop(setting[0], None)
            wanted = {kind: name for kind, name in wanted.items() if name not in found}
        pos = ppos[pos]
    return ContextState(**found)


def timestamp_ms(entry: Any) -> int:
    """An entry's ISO timestamp as Unix milliseconds (summary messages carry these)."""
    try:
        return int(parse_timestamp(entry.timestamp).timestamp() * 1000)
    except (ValueError, TypeError):
        return 0


def latest_compaction(entries: Sequence[Any]) -> int | None:
    """The index of the last compaction in ``entries``, or None."""
    return next((i for i in range(len(entries) - 1, -1, -1) if isinstance(entries[i], ContextCompacted)), None)


def default_compaction_transform(path_entries: Sequence[Any]) -> list[Any]:
    """Apply the latest compaction on the branch: its entry, the kept range, the rest."""
    last = latest_compaction(path_entries)
    if last is None:
        return list(path_entries)
    compaction = path_entries[last]
    out = [compaction]
    if compaction.retained_tail is None and compaction.first_kept_entry_id is not None:
        start = next((i for i in range(last) if path_entries[i].id == compaction.first_kept_entry_id), None)
        if start is not None:
            out.extend(e for e in path_entries[start:last] if not isinstance(e, ContextCompacted))
    out.extend(path_entries[last + 1 :])
    return out


def compaction_summary(entry: Any) -> CompactionSummaryMessage:
    """The message a compaction entry puts before what it kept."""
    return CompactionSummaryMessage(summary=entry.summary, tokens_before=int(entry.tokens_before), timestamp=timestamp_ms(entry))


def entry_to_messages(entry: Any, index: int, entries: list[Any], options: SessionContextBuildOptions) -> list[Any]:
    """The messages one context entry contributes (SPEC 3)."""
    kind = entry.type
    if kind == "message":
        return [entry.message]
    if kind == "custom_message":
        return [CustomMessage(custom_type=entry.custom_type, content=entry.content, display=entry.display,
                              details=entry.details, timestamp=timestamp_ms(entry))]
    if kind == "compaction":
        return [compaction_summary(entry), *(entry.retained_tail or ())]
    if kind == "branch_summary":
        if not entry.summary:
            return []
        return [BranchSummaryMessage(summary=entry.summary, from_id=entry.from_id, timestamp=timestamp_ms(entry))]
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


def _comparison(op: Callable[[list[Any], list[Any]], bool]) -> Callable[[ContextMessages, object], bool]:
    """A rich comparison made as a list's: with a list or another snapshot (a tuple is never
    equal, nor ordered), else NotImplemented."""

    def compare(self: ContextMessages, other: object) -> bool:
        if isinstance(other, ContextMessages):
            return op(self._view(), other._view())
        return op(self._view(), other) if isinstance(other, list) else NotImplemented

    return compare


class ContextMessages(MutableSequence[Any]):
    """The messages of a built context: a list-like snapshot, taken in O(1).

    A session keeps the messages of its current context and appends to them as entries are appended. Building the
    context hands out that list and a length instead of a copy: later appends extend the list past the snapshot's end,
    and a rebuild makes a new list, so the snapshot never changes under its holder. It behaves as a list; the first
    change (any list mutator) copies the messages into a list of its own, so the session's list never changes.
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

    __eq__ = _comparison(operator.eq)
    __lt__ = _comparison(operator.lt)
    __le__ = _comparison(operator.le)
    __gt__ = _comparison(operator.gt)
    __ge__ = _comparison(operator.ge)
    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable, as a list

    def __add__(self, other: Iterable[Any]) -> list[Any]:
        if not isinstance(other, (list, ContextMessages)):
            return NotImplemented  # as list + tuple: TypeError
        return [*self, *other]

    def __radd__(self, other: Iterable[Any]) -> list[Any]:
        if not isinstance(other, list):
            return NotImplemented
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

    def __iadd__(self, values: Iterable[Any]) -> ContextMessages:
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


def _as_messages(messages: Iterable[Any]) -> ContextMessages:
    return messages if isinstance(messages, ContextMessages) else ContextMessages(messages)


@attrs.frozen
class SessionContext:
    """What the model sees: the messages, and the settings in force. Positional as the seed builds it
    (``SessionContext(messages, thinking_level, model, active_tool_names)``), or by keyword."""

    messages: MutableSequence[Any] = attrs.field(converter=_as_messages)
    thinking_level: str = "off"
    model: Mapping[str, str] | None = None
    active_tool_names: list[str] | None = None


def build_session_context(
    path_entries: Sequence[Any], options: SessionContextBuildOptions | None = None, state: ContextState | None = None
) -> SessionContext:
    """The context of a branch given its entries, root first (a suffix is enough when the
    settings are passed in as ``state``)."""
    return Built.of(list(path_entries), options or DEFAULT_OPTIONS, state or fold_settings(path_entries)).context()


def fold_settings(entries: Iterable[Any]) -> ContextState:
    """The settings of a whole branch, root first: the latest of each kind wins."""
    return ContextState(**dict(filter(None, map(setting_of, entries))))


@attrs.define
class Built:
    """A built context: the leaf it ends at, its entries and messages, and the settings."""

    leaf_id: str | None
    entries: list[Any]
    messages: list[Any]
    state: ContextState

    @classmethod
    def of(cls, path: list[Any], options: SessionContextBuildOptions, state: ContextState) -> Built:
        entries = context_entries(path, options)
        messages = [m for i, e in enumerate(entries) for m in entry_to_messages(e, i, entries, options)]
        return cls(path[-1].id if path else None, entries, messages, state)

    def context(self) -> SessionContext:
        state = self.state
        return SessionContext(
            messages=ContextMessages(self.messages, len(self.messages)),  # a snapshot, not a copy
            thinking_level=state.thinking_level, model=dict(state.model) if state.model is not None else None,
            active_tool_names=list(state.active_tool_names) if state.active_tool_names is not None else None,
        )


def build_at(log: EntryLog, leaf_id: str | None, options: SessionContextBuildOptions, limit: int | None = None) -> Built:
    """The context at ``leaf_id`` from the log: the path the context needs, and the settings."""
    built = Built.of(log.get_many(path_to_root_or_compaction(log, leaf_id, limit)), options, settings_at(log, leaf_id, limit))
    built.leaf_id = leaf_id
    return built


class ContextProjection:
    """The kept context of a session: ``apply`` extends it with an appended entry that continues its branch; anything else
    (the leaf moved elsewhere, a compaction, options that cannot be extended) returns None, and the next read rebuilds it."""

    name = "context"
    types = None

    def __init__(self, options: SessionContextBuildOptions) -> None:
        self.options = options

    def apply(self, built: Built | None, entry: Any) -> Built | None:
        if built is None:
            return None
        kind = entry.type
        if kind == "leaf":
            return built  # it is kept per leaf: a read rebuilds when the leaf moved
        if entry.parent_id != built.leaf_id or kind == "compaction" or not self.options.extends_with(entry):
            return None
        index = len(built.entries)
        built.entries.append(entry)
        built.messages.extend(entry_to_messages(entry, index, built.entries, self.options))
        setting = setting_of(entry)
        if setting is not None:
            built.state = attrs.evolve(built.state, **{setting[0]: setting[1]})
        built.leaf_id = entry.id
        return built
