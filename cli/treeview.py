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
    """A visible entry with its visible children (hidden entries skipped).

    ``head`` has the entry's ``type``, ``id`` and ``parent_id`` only; ``entry`` decodes the
    whole entry when asked, so a windowed view of a huge session decodes only its rows, and
    (not kept here) a view that uses each row once holds none of them.
    """

    head: Any
    reader: Any
    label: str | None
    on_branch: bool
    is_leaf: bool
    hidden_leaf: Any = None  # the hidden leaf entry this node stands in for, if any
    children: list[Node] = attrs.field(factory=list)
    parent: Node | None = None
    subtree_size: int = 1
    branch_depth: int = 0  # how many branch points lie above this node

    @property
    def entry(self) -> Any:
        return self.reader.entry(self.head.id)


def _role(reader: Any, head: Any) -> str | None:
    if head.type != "message":
        return None
    return getattr(reader.entry(head.id).message, "role", None)


def visible_predicate(mode: str, labels: dict[str, str], reader: Any) -> Callable[[Any], bool]:
    """Whether an entry (given by its head) shows under filter ``mode`` (one of :data:`FILTERS`)."""
    if mode == "all":
        return lambda h: True
    if mode == "default":
        return lambda h: h.type != "label"
    if mode == "no-tools":
        return lambda h: h.type != "label" and _role(reader, h) != "tool_result"
    if mode == "user":
        return lambda h: _role(reader, h) == "user"
    if mode == "labelled":
        return lambda h: h.id in labels
    raise ValueError(f"unknown filter {mode!r} (choose from {', '.join(FILTERS)})")


def _roots(heads: dict[str, Any], children: dict[str | None, list[str]]) -> list[str]:
    """Root ids: parent None, plus orphans whose parent is missing (pi lists them too)."""
    roots = list(children.get(None, ()))
    for parent, kids in children.items():
        if parent is not None and parent not in heads:
            roots.extend(kids)
    return roots


def _branch(heads: dict[str, Any], leaf_id: str | None) -> list[str]:
    """Ids from the leaf back to its root, following parents (stops at a missing one)."""
    out = []
    current = leaf_id
    while current is not None and current in heads:
        out.append(current)
        current = heads[current].parent_id
    return out


def build(reader: Any, mode: str = "default") -> list[Node]:
    """The visible forest of ``reader``'s session under filter ``mode``."""
    labels = reader.get_labels()
    visible = visible_predicate(mode, labels, reader)
    children: dict[str | None, list[str]] = reader.projection("tree")
    heads = {h.id: h for h in reader.iter_heads() if h.type != "leaf"}
    leaf_id = reader.leaf_id
    path = _branch(heads, leaf_id)
    on_branch = set(path)
    out: list[Node] = []
    deepest: Node | None = None  # the last visible node on the current branch
    # Iterative depth-first walk: sessions can be far deeper than the recursion limit.
    stack: list[tuple[str, Node | None]] = [(i, None) for i in reversed(_roots(heads, children))]
    while stack:
        entry_id, parent = stack.pop()
        head = heads[entry_id]
        target = parent
        if visible(head):
            node = Node(head, reader, labels.get(entry_id), entry_id in on_branch, entry_id == leaf_id, parent=parent)
            (parent.children if parent is not None else out).append(node)
            target = node
            if node.on_branch:
                deepest = node
        for child in reversed(children.get(entry_id, ())):
            stack.append((child, target))
    if leaf_id is not None and deepest is not None and not deepest.is_leaf:
        deepest.hidden_leaf = reader.entry(leaf_id)
    _sizes(out)
    return out


def _sizes(roots: list[Node]) -> None:
    """Set each node's subtree size and branch depth (both in linear time)."""
    order = list(walk(roots))
    for node in order:  # pre-order: a parent's depth is known before its children's
        parent = node.parent
        if parent is not None:
            node.branch_depth = parent.branch_depth + (1 if len(parent.children) > 1 else 0)
    for node in reversed(order):
        node.subtree_size = 1 + sum(c.subtree_size for c in node.children)


def walk(roots: list[Node]) -> Any:
    """Every node in display order (pre-order)."""
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def window(roots: list[Node], size: int) -> tuple[list[Node], int, int]:
    """The ``size`` rows of the display order around the leaf: (rows, hidden before, after)."""
    rows = list(walk(roots))
    if size <= 0 or len(rows) <= size:
        return rows, 0, 0
    focus = next((i for i, n in enumerate(rows) if n.is_leaf or n.hidden_leaf is not None), len(rows) - 1)
    start = max(0, min(focus - size // 2, len(rows) - size))
    return rows[start : start + size], start, len(rows) - start - size
