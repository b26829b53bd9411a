"""The session name: the latest ``session_info`` entry wins (empty or null clears it)."""

from __future__ import annotations

from typing import Any


class SessionNameProjection:
    """State: the current name or None."""

    name = "session_name"
    types = frozenset({"session_info"})

    def initial(self) -> str | None:
        return None

    def apply(self, state: str | None, entry: Any) -> str | None:
        name = entry.name
        if isinstance(name, str):
            name = name.strip()
        return name or None
