"""A session's tree as display rows, for a virtualised view that asks for windows of them.

The tree is laid out as ``sessiontree show`` lays it out: in display (pre-)order, linear runs flat, one indent
level per branch point above a row. Building the rows reads only the entries' heads (type, id, parent), so a
100k-entry session costs one pass over its heads and a few small lists; a window of rows decodes only its own
entries. Hidden entries (``label`` records under the default filter) are skipped, their children shown under
the nearest visible ancestor.

Each row also carries its ``guides``, the connecting lines drawn left of it (``sessiontree show``'s ``├ └ │``): one
character per indent level, so that two side branches never look like one. A branch (a row that starts one of a
branch point's children) can be collapsed: its rows leave the window, and the row tells how many it hides and the
summary a branch summary entry gave of it, if any.
"""

from __future__ import annotations

from bisect import bisect_right
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


Runs = list[tuple[int, tuple[bool, ...], bool]]  # per run: (its first row, its guide levels, whether it starts a branch)


def _layout(roots: list[str], children: Tree, hidden: set[str]) -> tuple[list[str], list[int], list[int], Runs]:
    """Display order (pre-order), each row's indent (branch points above it), its shown children's count, and the
    runs: each linear run's first row and, per indent level, whether a later sibling branch follows at that level."""
    ids: list[str] = []
    depths: list[int] = []
    counts: list[int] = []
    runs: Runs = []
    ids_append, depths_append, counts_append, get = ids.append, depths.append, counts.append, children.get
    none: list[str] = []
    stack: list[tuple[str, int, tuple[bool, ...], bool]] = [(r, 0, (), False) for r in reversed(roots)]
    while stack:  # iterative: sessions are far deeper than the recursion limit
        entry_id, depth, levels, branch = stack.pop()
        runs.append((len(ids), levels, branch))
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
        if kids:  # a branch point (a run ends at one child only when it has none or several)
            last = len(kids) - 1
            stack.extend((k, depth + 1, (*levels, i < last), True) for i, k in reversed(list(enumerate(kids))))
    return ids, depths, counts, runs


def guides(levels: tuple[bool, ...], first: bool) -> str:
    """The connecting lines left of a row: ``│`` where a branch at that level goes on below, ``├``/``└`` where the
    row starts a branch with/without later siblings, a space where nothing passes."""
    if not levels:
        return ""
    above = "".join("│" if more else " " for more in levels[:-1])
    if first:
        return above + ("├" if levels[-1] else "└")
    return above + ("│" if levels[-1] else " ")


class TreeRows:
    """The display rows of one reader (a session or a time-travel view) under one filter."""

    def __init__(self, reader: Any, mode: str = "default") -> None:
        self.reader, self.mode, self.version = reader, mode, reader.version
        parents, children, hidden = _scan(reader, mode)
        roots = _shown(children.get(None, []), children, hidden)
        for parent, kids in children.items():  # orphans whose parent is missing are roots too (as pi lists them)
            if parent is not None and parent not in parents:
                roots.extend(_shown(kids, children, hidden))
        self.ids, self.depths, self.kids, self.runs = _layout(roots, children, hidden)
        self._run_starts = [r[0] for r in self.runs]
        self.children = children
        self.index = {entry_id: i for i, entry_id in enumerate(self.ids)}
        self._views: dict[frozenset[str], CollapsedView] = {}
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

    def run_of(self, i: int) -> tuple[int, tuple[bool, ...], bool]:
        """The run row ``i`` is in: (its first row, its guide levels, whether it starts a branch)."""
        return self.runs[bisect_right(self._run_starts, i) - 1]

    def branch_end(self, i: int) -> int:
        """The row after the branch that row ``i`` starts (its run and every branch below it)."""
        depth = self.depths[i]
        starts, k = self._run_starts, bisect_right(self._run_starts, i)
        while k < len(starts):  # the next run at this depth or above: a later sibling, or back up the tree
            if self.depths[starts[k]] <= depth:
                return starts[k]
            k += 1
        return len(self.ids)

    def collapsed(self, ids: frozenset[str]) -> CollapsedView:
        """The rows with the branches starting at ``ids`` folded away (ids that start no branch are ignored)."""
        view = self._views.get(ids)
        if view is None:
            view = CollapsedView(self, ids)
            self._views = {ids: view} | dict(list(self._views.items())[:3])  # a few recent foldings
        return view

    def _row(self, i: int, labels: dict[str, str]) -> dict[str, Any]:
        entry_id = self.ids[i]
        first, levels, branch = self.run_of(i)
        entry = self.reader.entry(entry_id)
        message = getattr(entry, "message", None)
        row: dict[str, Any] = {
            "index": i, "id": entry_id, "parent_id": entry.parent_id, "type": entry.type, "depth": self.depths[i],
            "children": self.kids[i], "on_branch": entry_id in self.branch, "leaf": entry_id == self.leaf_id,
            "leaf_below": i == self.focus and entry_id != self.leaf_id, "label": labels.get(entry_id),
            "role": getattr(message, "role", None), "timestamp": entry.timestamp,
            "text": clip.one_line(entry_text(entry).plain, 240),
            "guides": guides(levels, i == first and branch), "branch_start": i == first and branch,
        }
        if not self.children.get(entry_id):  # a branch ends here: marked when its context breaks the tool-call rules
            row["tool_problems"] = len(self.reader.check_context(leaf_id=entry_id))
        return row


class CollapsedView:
    """A tree's rows with some branches folded: the same window API, indices counted over the rows still shown."""

    def __init__(self, rows: TreeRows, ids: frozenset[str]) -> None:
        self.rows = rows
        self.folded: dict[int, int] = {}  # a folded branch's first row -> the rows it hides
        shown: list[int] = []
        i, total = 0, len(rows.ids)
        folds = sorted(rows.index[x] for x in ids if x in rows.index and rows.run_of(rows.index[x])[0] == rows.index[x]
                       and rows.run_of(rows.index[x])[2])
        for start in folds:
            if start < i:
                continue  # inside a branch folded already
            shown.extend(range(i, start + 1))
            end = rows.branch_end(start)
            self.folded[start] = end - start - 1
            i = end
        shown.extend(range(i, total))
        self.shown = shown
        self.position = {row: n for n, row in enumerate(shown)} if self.folded else None
        self.focus = self._at(rows.focus)
        self.version, self.leaf_id = rows.version, rows.leaf_id

    def _at(self, row: int | None) -> int | None:
        if row is None or self.position is None:
            return row
        while row not in self.position:  # the leaf is folded away: its branch's first row
            row -= 1
        return self.position[row]

    def __len__(self) -> int:
        return len(self.shown)

    def window(self, start: int, count: int) -> list[dict[str, Any]]:
        start = max(0, start)
        end = min(len(self.shown), start + max(0, min(count, MAX_WINDOW)))
        labels = self.rows.reader.get_labels()
        out = []
        for n in range(start, end):
            i = self.shown[n]
            row = self.rows._row(i, labels)
            row["index"] = n
            if i in self.folded:
                row["folded"] = self._fold(i)
            out.append(row)
        return out

    def _fold(self, i: int) -> dict[str, Any]:
        """What a folded branch hides: its rows, and the summary a branch summary entry gave of it (the latest)."""
        rows = self.rows
        inside = set(rows.ids[i:rows.branch_end(i)])
        left = [summary for summary, was_at in _summaries(rows.reader) if was_at in inside and summary not in inside]
        text = rows.reader.entry(left[-1]).summary if left else None
        return {"rows": self.folded[i], "summary": clip.one_line(text, 400) if text else None}


def _summaries(reader: Any) -> list[tuple[str, str | None]]:
    """Each branch summary entry with the entry the branch it summarises ended at: a move with a summary is
    appended right after the branch's last entry (the leaf then), so that is the last entry appended before it."""
    out: list[tuple[str, str | None]] = []
    last = None
    for head in reader.iter_heads():
        if head.type == "branch_summary":
            out.append((head.id, last))
        if head.type not in ("leaf", "label"):
            last = head.id
    return out
