"""The LLM context for a branch (SPEC 3): the messages the model sees and the settings.

``build_session_context`` is a pure function of the branch's entries, as in the seed and in pi. The settings in force
(thinking level, model, active tools) come from one rule, :func:`setting_of`, used three ways: folded over a whole
branch, found by walking back from a leaf (:func:`settings_at`), and applied on append by :class:`ContextProjection`,
which keeps a built context and extends it like every other projection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableSequence, Sequence
from typing import Any

import attrs

from sessiontree.domain.events import ContextCompacted, parse_timestamp
from sessiontree.domain.log import EntryLog
from sessiontree.domain.messages import AssistantMessage, BranchSummaryMessage, CompactionSummaryMessage, CustomMessage
from sessiontree.projections.context_messages import ContextMessages
from sessiontree.projections.path import path_to_root_or_compaction

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
