"""The leaf pointer: where the next entry will hang."""

from __future__ import annotations

from typing import Any

from sessiontree.domain.events import leaf_after


class LeafProjection:
    """Leaf after each entry: a ``leaf`` entry's target, any other entry's own id."""

    name = "leaf"
    types = None

    def initial(self) -> str | None:
        return None

    def apply(self, state: str | None, entry: Any) -> str | None:
        return leaf_after(entry)
