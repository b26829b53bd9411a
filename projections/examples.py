"""An example app projection: which files the agent's tool calls touched.

It shows the whole protocol of :mod:`sessiontree.projections.base` on something an agent builder asks for ("what did
the agent read and change in this session?"). Register it on a session and it is replayed on open, updated on every
append and available in time-travel views, like the built-in projections::

    session.register_projection(FilesTouchedProjection())
    session.projection("files_touched")["src/app.py"].writes
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from sessiontree.domain.messages import AssistantMessage, ToolCall

DEFAULT_PATH_KEYS = ("path", "file_path", "filename")
DEFAULT_WRITE_TOOLS = ("write", "edit", "multi_edit", "create", "delete", "move")


@attrs.frozen(kw_only=True)
class FileActivity:
    """What happened to one file: read and write tool calls, and the entries that made them."""

    reads: int = 0
    writes: int = 0
    first_entry_id: str = ""
    last_entry_id: str = ""


class FilesTouchedProjection:
    """State: ``{path: FileActivity}`` in the order the files were first touched.

    A tool call touches a file when its arguments name one under one of ``path_keys``: a write when the tool's name is in
    ``write_tools``, else a read. Every branch counts, since a file changed on an abandoned branch stays changed on disk.
    """

    types = frozenset({"message"})

    def __init__(
        self, name: str = "files_touched", *, path_keys: Iterable[str] = DEFAULT_PATH_KEYS,
        write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"projection name must be a non-empty str, not {name!r}")
        self.name = name
        self.path_keys = tuple(path_keys)
        self.write_tools = frozenset(write_tools)

    def initial(self) -> dict[str, FileActivity]:
        return {}

    def apply(self, state: dict[str, FileActivity], entry: Any) -> dict[str, FileActivity]:
        message = entry.message
        if not isinstance(message, AssistantMessage):
            return state
        for block in message.content:
            if not isinstance(block, ToolCall):
                continue
            for path in self._paths(block):
                before = state.get(path) or FileActivity(first_entry_id=entry.id)
                write = block.name in self.write_tools
                state[path] = attrs.evolve(
                    before, reads=before.reads + (not write), writes=before.writes + write, last_entry_id=entry.id
                )
        return state

    def _paths(self, call: ToolCall) -> list[str]:
        found = []
        for key in self.path_keys:
            value = call.arguments.get(key)
            if isinstance(value, str) and value and value not in found:
                found.append(value)
        return found


__all__ = ["FileActivity", "FilesTouchedProjection"]
