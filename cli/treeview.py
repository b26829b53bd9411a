"""What ``sessiontree show`` displays: the session tree, filtered, with its marks.

Pure logic over a session reader (no terminal code): which entries are visible under a
filter, who their visible parent is once hidden entries are skipped, where the current
branch and the leaf are, and which rows fit a window around the leaf. ``render.py``
turns the result into a rich tree; ``--json`` prints it as rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

FILTERS = ("default", "no-tools", "user", "labelled", "all")
"""``default`` hides ``label`` entries (their text is shown on the target), ``no-tools``
also hides tool results, ``user`` shows user messages only, ``labelled`` only labelled
entries, ``all`` every entry of the tree."""


@attrs.define(eq=False)
class Node:
    """A visible entry with its visible children (hidden entries skipped)."""

    entry: Any
    label: str | None
    on_branch: bool
    is_leaf: bool
    hidden_leaf: Any = None  # the hidden leaf entry this node stands in for, if any
    children: list[Node] = attrs.field(factory=list)
    parent: Node | None = None
    subtree_size: int = 1


def _is_role(entry: Any, role: str) -> bool:
    return entry.type == "message" and getattr(entry.message, "role", None) == role


def visible_predicate(mode: str, labels: dict[str, str]) -> Callable[[Any], bool]:
    """Whether an entry shows under filter ``mode`` (one of :data:`FILTERS`)."""
    if mode == "all":
        return lambda e: True
    if mode == "default":
        return lambda e: e.type != "label"
    if mode == "no-tools":
        return lambda e: e.type != "label" and not _is_role(e, "tool_result")
    if mode == "user":
        return lambda e: _is_role(e, "user")
    if mode == "labelled":
        return lambda e: e.id in labels
    raise ValueError(f"unknown filter {mode!r} (choose from {', '.join(FILTERS)})")


def _roots(reader: Any, children: dict[str | None, list[str]]) -> list[str]:
    """Root ids: parent None, plus orphans whose parent is missing (pi lists them too)."""
    roots = list(children.get(None, ()))
    for parent, kids in children.items():
        if parent is not None and not reader.has_entry(parent):
            roots.extend(kids)
    return roots


def build(reader: Any, mode: str = "default") -> list[Node]:
    """The visible forest of ``reader``'s session under filter ``mode``."""
    labels = reader.get_labels()
    visible = visible_predicate(mode, labels)
    children: dict[str | None, list[str]] = reader.projection("tree")
    branch = reader.get_branch()
    on_branch = {e.id for e in branch}
    leaf_id = branch[-1].id if branch else None
    out: list[Node] = []
    last_visible_on_branch: Node | None = None
    # Iterative depth-first walk: sessions can be far deeper than the recursion limit.
    stack: list[tuple[str, Node | None]] = [(i, None) for i in reversed(_roots(reader, children))]
    while stack:
        entry_id, parent = stack.pop()
        entry = reader.get_entry(entry_id)
        target = parent
        if visible(entry):
            node = Node(entry, labels.get(entry_id), entry_id in on_branch, entry_id == leaf_id, parent=parent)
            (parent.children if parent is not None else out).append(node)
            target = node
            if node.on_branch:
                last_visible_on_branch = node
        for child in reversed(children.get(entry_id, ())):
            stack.append((child, target))
    if leaf_id is not None and last_visible_on_branch is not None and not last_visible_on_branch.is_leaf:
        last_visible_on_branch.hidden_leaf = branch[-1]
    _sizes(out)
    return out


def _sizes(roots: list[Node]) -> None:
    order = list(walk(roots))
    for node in reversed(order):
        node.subtree_size = 1 + sum(c.subtree_size for c in node.children)


def walk(roots: list[Node]) -> Any:
    """Every node in display order (pre-order)."""
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def nesting(node: Node) -> int:
    """How many branch points lie above ``node`` (0 on the trunk)."""
    depth = 0
    parent = node.parent
    while parent is not None:
        if len(parent.children) > 1:
            depth += 1
        parent = parent.parent
    return depth


def window(roots: list[Node], size: int) -> tuple[list[Node], int, int]:
    """The ``size`` rows of the display order around the leaf: (rows, hidden before, after)."""
    rows = list(walk(roots))
    if size <= 0 or len(rows) <= size:
        return rows, 0, 0
    focus = next((i for i, n in enumerate(rows) if n.is_leaf or n.hidden_leaf is not None), len(rows) - 1)
    start = max(0, min(focus - size // 2, len(rows) - size))
    return rows[start : start + size], start, len(rows) - start - size
