"""Rich renderables for sessions: the tree of ``show``, and the title line they share.

Linear runs of entries are drawn flat, one row each; only a branch point indents, with
one sub-tree per branch (headed by the branch's first entry), as pi's tree view does. So a
session with 10,000 turns and two branches is two levels deep on screen, not 10,000.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text
from rich.tree import Tree

from sessiontree.cli import treeview
from sessiontree.cli.clip import PIECE_CHARS, clip_field, clip_repr, visible
from sessiontree.cli.describe import entry_text, fork_note
from sessiontree.cli.treeview import Node

LEGEND = Text.assemble(
    ("◀ leaf", "bold reverse"), "  ", ("[label]", "bold yellow"), "  ", ("⑂ n", "bold"),
    " branch point  ", ("dim", "dim"), " = off the current branch", style="dim",
)


def _field(text: str, full: bool) -> str:
    return visible(text) if full else clip_field(text)


def _whole(text: Text) -> RenderableType:
    """``text`` folded over as many lines as it takes (also where the console would crop a long line); a huge one in
    pieces, which rich lays out in linear time (see ``clip.pieces``)."""
    text.no_wrap, text.overflow = False, "fold"
    if len(text) <= PIECE_CHARS:
        return text
    pieces = text.divide(range(PIECE_CHARS, len(text), PIECE_CHARS))
    for piece in pieces:
        piece.no_wrap = False
    return Group(*pieces)


def session_title(reader: Any, *, extra: str | None = None, full: bool = False) -> RenderableType:
    """``session <id> "name"  cwd  N entries  leaf <id>`` for the top of a view (name and cwd clipped unless ``full``)."""
    header = reader.header
    out = Text()
    out.append("session ", "bold")
    out.append(_field(reader.id, full), "bold")
    name = reader.get_session_name()
    if name:
        out.append(f"  {name!r}" if full else f"  {clip_repr(name)}", "bold yellow")
    if header.cwd:
        out.append(f"  {_field(header.cwd, full)}", "dim")
    out.append(f"  {len(reader)} entries", "dim")
    out.append(f"  leaf {reader.leaf_id or '(none)'}", "dim")
    fork = fork_note(header.parent_session, _forked_at(header))
    if fork:
        out.append(f"  ({fork})", "magenta")
    if extra:
        out.append(f"  {extra}", "bold magenta")
    return _whole(out) if full else out


def _forked_at(header: Any) -> str | None:
    source = header.extra.get("source")
    at = source.get("entry_id") if isinstance(source, dict) else None
    return at if isinstance(at, str) else None


def row(node: Node, full: bool = False) -> RenderableType:
    """One tree row: id, marks, then the entry's gist (cut with an ellipsis if too long; folded when ``full``)."""
    entry = node.entry
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(_field(entry.id, full), "dim" if not node.on_branch else "cyan")
    text.append(" ")
    if node.is_leaf:
        text.append("◀ leaf", "bold reverse")
        text.append(" ")
    elif node.hidden_leaf is not None:
        hidden = node.hidden_leaf
        text.append(f"◀ leaf {_field(hidden.id, full)} ({_field(hidden.type, full)}) below", "bold reverse")
        text.append(" ")
    if node.label:
        text.append(f"[{_field(node.label, full)}]", "bold yellow")
        text.append(" ")
    if len(node.children) > 1:
        text.append(f"⑂ {len(node.children)}", "bold")
        text.append(" ")
    gist = entry_text(entry)
    if not node.on_branch:
        gist.stylize("dim")
    text.append_text(gist)
    return _whole(text) if full else text


def _collapsed(nodes: list[Node]) -> Text:
    size = sum(n.subtree_size for n in nodes)
    what = "branch" if len(nodes) == 1 else "branches"
    entries = "entry" if size == 1 else "entries"
    return Text(f"… {len(nodes)} more {what}, {size} {entries} (raise --depth to see)", "dim italic")


def tree(
    reader: Any,
    roots: list[Node],
    *,
    depth: int | None = None,
    window: int = 0,
    title: RenderableType | None = None,
    full: bool = False,
) -> Any:
    """The rich renderable of a filtered tree, with optional branch-depth and row-window limits; ``full`` shows names,
    paths and labels whole."""
    top = Tree(title or session_title(reader, full=full), guide_style="dim")
    shown: set[int] | None = None
    before = after = 0
    if window > 0:
        rows, before, after = treeview.window(roots, window)
        shown = {id(n) for n in rows}
        if before:
            top.add(Text(f"… {before} earlier rows (raise --window to see)", "dim italic"))
    if not roots:
        top.add(Text("(no entries to show with this filter)", "dim italic"))
    # Each task: (head node, container to add its first row to, nest rows under the head?, level)
    tasks: list[tuple[Node, Tree, bool, int]] = [(r, top, len(roots) > 1, 0) for r in reversed(roots)]
    while tasks:
        node, container, nest, level = tasks.pop()
        current: Node | None = node
        first = True
        while current is not None:
            if shown is None or id(current) in shown:
                added = container.add(row(current, full))
            else:
                added = container
            if first and nest:
                container = added
            first = False
            kids = current.children
            if len(kids) == 1:
                current = kids[0]
                continue
            if len(kids) > 1:
                expand = kids
                if depth is not None and level >= depth:
                    expand = [k for k in kids if k.on_branch]
                    rest = [k for k in kids if not k.on_branch]
                    if rest and (shown is None or id(current) in shown):
                        added.add(_collapsed(rest))
                for kid in reversed(expand):
                    tasks.append((kid, added, True, level + 1))
            current = None
    if after:
        top.add(Text(f"… {after} later rows (raise --window to see)", "dim italic"))
    return Group(top, LEGEND)


def tree_rows(roots: list[Node], codec: Any, *, window: int = 0) -> Iterator[dict[str, Any]]:
    """The ``--json`` form of ``show``: visible rows in display order, each with its entry (decoded as its row is
    made, so a caller that writes rows as they come holds none of them)."""
    rows, _, _ = treeview.window(roots, window) if window > 0 else (treeview.walk(roots), 0, 0)
    for node in rows:
        entry = node.entry
        yield (
            {
                "id": entry.id,
                "type": entry.type,
                "parent_id": entry.parent_id,
                "shown_under": node.parent.head.id if node.parent is not None else None,
                "label": node.label,
                "on_branch": node.on_branch,
                "is_leaf": node.is_leaf,
                "children": [c.head.id for c in node.children],
                "branch_depth": node.branch_depth,
                "entry": codec.event_dict(entry),
            }
        )
