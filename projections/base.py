"""The one shape every projection has: a name, an initial state and ``apply``.

A projection is a fold over a session's entries, used three ways by built-ins and app projections alike: replayed over
the log when a session opens, applied to each new entry on append, and replayed over a prefix of the log for a
time-travel view. ``apply`` may update the state in place, but returns the state to use next. A projection that lists
``types`` is only shown entries of those types. The built-in folds of the log's pointers live here too: the leaf, the
labels, the session name and the tree.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from sessiontree.domain.events import leaf_after

S = TypeVar("S")


@runtime_checkable
class Projection(Protocol[S]):
    """What an app implements to add its own view of a session (see docs/concepts.md)."""

    name: str

    def initial(self) -> S: ...

    def apply(self, state: S, entry: Any) -> S: ...


def subscribed_types(projection: Any) -> frozenset[str] | None:
    """The entry types a projection wants, or None for every type."""
    types = getattr(projection, "types", None)
    return frozenset(types) if types is not None else None


def fold(projection: Projection[S], entries: Iterable[Any]) -> S:
    """Replay ``entries`` through ``projection`` from its initial state."""
    state = projection.initial()
    apply = projection.apply
    wanted = subscribed_types(projection)
    for entry in entries:
        if wanted is None or entry.type in wanted:
            state = apply(state, entry)
    return state


class FunctionProjection(Generic[S]):
    """A projection made of a name, an initial-state factory and an apply function."""

    def __init__(self, name: str, initial: Any, apply: Callable[[S, Any], S], types: Iterable[str] | None = None):
        if not isinstance(name, str) or not name:
            raise TypeError(f"projection name must be a non-empty str, not {name!r}")
        if not callable(apply):
            raise TypeError(f"apply must be callable, not {apply!r}")
        self.name = name
        self._initial = initial
        self._apply = apply
        self.types = frozenset(types) if types is not None else None

    def initial(self) -> S:
        """A fresh state: ``initial()`` if it is a factory, else a deep copy of the value
        (so folds for the live session and for views never share a mutable state)."""
        state: S = self._initial() if callable(self._initial) else copy.deepcopy(self._initial)
        return state

    def apply(self, state: S, entry: Any) -> S:
        return self._apply(state, entry)


class LeafProjection:
    """The leaf pointer, where the next entry will hang: a ``leaf`` entry's target, any other entry's own id."""

    name = "leaf"
    types = None

    def initial(self) -> str | None:
        return None

    def apply(self, state: str | None, entry: Any) -> str | None:
        return leaf_after(entry)


class LabelsProjection:
    """Labels, the latest ``label`` entry per target winning across all branches. State: ``{target_id: label}``; a
    null or empty label clears the target's label."""

    name = "labels"
    types = frozenset({"label"})

    def initial(self) -> dict[str, str]:
        return {}

    def apply(self, state: dict[str, str], entry: Any) -> dict[str, str]:
        if entry.label:
            state[entry.target_id] = entry.label
        else:
            state.pop(entry.target_id, None)
        return state


class SessionNameProjection:
    """The session name: the latest ``session_info`` entry wins (empty or null clears it). State: the name or None."""

    name = "session_name"
    types = frozenset({"session_info"})

    def initial(self) -> str | None:
        return None

    def apply(self, state: str | None, entry: Any) -> str | None:
        name = entry.name
        if isinstance(name, str):
            name = name.strip()
        return name or None


class TreeProjection:
    """The tree: ``{parent_id or None: [child ids in append order]}``. ``leaf`` entries are side records, not nodes."""

    name = "tree"
    types = None

    def initial(self) -> dict[str | None, list[str]]:
        return {}

    def apply(self, state: dict[str | None, list[str]], entry: Any) -> dict[str | None, list[str]]:
        if entry.type == "leaf":
            return state
        children = state.get(entry.parent_id)
        if children is None:
            state[entry.parent_id] = [entry.id]
        else:
            children.append(entry.id)
        return state
