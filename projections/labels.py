"""Labels: the latest ``label`` entry per target wins, across all branches."""

from __future__ import annotations

from typing import Any


class LabelsProjection:
    """State: ``{target_id: label}``; a null or empty label clears the target's label."""

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
