"""A session's tree as display rows, for a virtualised view that asks for windows of them.

The tree is laid out as ``sessiontree show`` lays it out: in display (pre-)order, linear runs flat, one indent
level per branch point above a row. Building the rows reads only the entries' heads (type, id, parent), so a
100k-entry session costs one pass over its heads and a few small lists; a window of rows decodes only its own
entries. Hidden entries (``label`` records under the default filter) are skipped, their children shown under
the nearest visible ancestor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sessiontree.cli import clip
from sessiontree.cli.describe import entry_text
from sessiontree.cli.treeview import FILTERS

MAX_WINDOW = 1000  # rows one request may ask for


def _predicate(mode: str, reader: Any, labels: dict[str, str]) -> Callable[[Any], bool]:
    if mode == "all":
        return lambda h: True
    if mode == "default":
        return lambda h: h.type != "label"
    if mode in ("no-tools", "user"):
        def role(h: Any) -> str | None:
            return getattr(reader.entry(h.id).message, "role", None) if h.type == "message" else None
        if mode == "user":
            return lambda h: role(h) == "user"
        return lambda h: h.type != "label" and role(h) != "tool_result"
    if mode == "labelled":
        return lambda h: h.id in labels
    raise ValueError(f"unknown filter {mode!r} (choose from {', '.join(FILTERS)})")


Tree = dict[str | None, list[str]]


def _scan(reader: Any, mode: str) -> tuple[dict[str, str | None], Tree, set[str]]:
    """One pass over the heads: each entry's parent, each entry's children, and what the filter hides."""
    visible = _predicate(mode, reader, reader.get_labels())
    only_labels = mode == "default"  # the usual filter, tested inline: this loop runs once per entry
    parents: dict[str, str | None] = {}
    children: Tree = {}
    hidden: set[str] = set()
    for head in reader.iter_heads():
        kind, entry_id, parent = head
        if kind == "leaf":
            continue
        parents[entry_id] = parent
        siblings = children.get(parent)
        if siblings is None:
            children[parent] = [entry_id]
        else:
            siblings.append(entry_id)
        if (kind == "label") if only_labels else not visible(head):
            hidden.add(entry_id)
    return parents, children, hidden


def _shown(kids: list[str], children: Tree, hidden: set[str]) -> list[str]:
    """``kids`` with each hidden one replaced by its shown descendants, in order."""
    out: list[str] = []
    stack = list(reversed(kids))
    while stack:
        child = stack.pop()
        if child in hidden:
            stack.extend(reversed(children.get(child, ())))
        else:
            out.append(child)
    return out


def _layout(roots: list[str], children: Tree, hidden: set[str]) -> tuple[list[str], list[int], list[int]]:
    """Display order (pre-order), each row's indent (branch points above it) and its shown children's count."""
    ids: list[str] = []
    depths: list[int] = []
    counts: list[int] = []
    ids_append, depths_append, counts_append, get = ids.append, depths.append, counts.append, children.get
    none: list[str] = []
    stack = [(r, 0) for r in reversed(roots)]
    while stack:  # iterative: sessions are far deeper than the recursion limit
        entry_id, depth = stack.pop()
        while True:  # down a linear run without touching the stack
            kids = get(entry_id, none)
            if hidden and kids and not hidden.isdisjoint(kids):
                kids = _shown(kids, children, hidden)
            ids_append(entry_id)
            depths_append(depth)
            counts_append(len(kids))
            if len(kids) != 1:
                break
            entry_id = kids[0]
        if kids:
            stack.extend((k, depth + 1) for k in reversed(kids))
    return ids, depths, counts


class TreeRows:
    """The display rows of one reader (a session or a time-travel view) under one filter."""

    def __init__(self, reader: Any, mode: str = "default") -> None:
        self.reader, self.mode, self.version = reader, mode, reader.version
        parents, children, hidden = _scan(reader, mode)
        roots = _shown(children.get(None, []), children, hidden)
        for parent, kids in children.items():  # orphans whose parent is missing are roots too (as pi lists them)
            if parent is not None and parent not in parents:
                roots.extend(_shown(kids, children, hidden))
        self.ids, self.depths, self.kids = _layout(roots, children, hidden)
        self.children = children
        self.index = {entry_id: i for i, entry_id in enumerate(self.ids)}
        self.leaf_id = reader.leaf_id
        self.branch = self._branch(parents)
        self.focus = self._focus()

    def _branch(self, parents: dict[str, str | None]) -> set[str]:
        out: set[str] = set()
        current = self.leaf_id
        while current is not None and current in parents and current not in out:
            out.add(current)
            current = parents[current]
        return out

    def _focus(self) -> int | None:
        """The row of the leaf, or of the deepest shown entry on its branch when the leaf itself is hidden."""
        if self.leaf_id is None:
            return None
        if self.leaf_id in self.index:
            return self.index[self.leaf_id]
        on = [i for i, entry_id in enumerate(self.ids) if entry_id in self.branch]
        return on[-1] if on else None

    def __len__(self) -> int:
        return len(self.ids)

    def window(self, start: int, count: int) -> list[dict[str, Any]]:
        """Rows ``start .. start+count`` (clamped) with their entries' gists."""
        start = max(0, start)
        end = min(len(self.ids), start + max(0, min(count, MAX_WINDOW)))
        labels = self.reader.get_labels()
        return [self._row(i, labels) for i in range(start, end)]

    def _row(self, i: int, labels: dict[str, str]) -> dict[str, Any]:
        entry_id = self.ids[i]
        entry = self.reader.entry(entry_id)
        message = getattr(entry, "message", None)
        row: dict[str, Any] = {
            "index": i, "id": entry_id, "parent_id": entry.parent_id, "type": entry.type, "depth": self.depths[i],
            "children": self.kids[i], "on_branch": entry_id in self.branch, "leaf": entry_id == self.leaf_id,
            "leaf_below": i == self.focus and entry_id != self.leaf_id, "label": labels.get(entry_id),
            "role": getattr(message, "role", None), "timestamp": entry.timestamp,
            "text": clip.one_line(entry_text(entry).plain, 240),
        }
        if not self.children.get(entry_id):  # a branch ends here: marked when its context breaks the tool-call rules
            row["tool_problems"] = len(self.reader.check_context(leaf_id=entry_id))
        return row
