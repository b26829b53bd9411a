"""The tree: children per entry and the roots. ``leaf`` entries are side records, not nodes."""

from __future__ import annotations

from typing import Any


class TreeProjection:
    """State: ``{parent_id or None: [child ids in append order]}``."""

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
