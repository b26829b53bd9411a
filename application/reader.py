"""Reading a session: every query of the SPEC section 7 API (entries, branches, labels, names, the tree, projections,
the context, stats, time travel) over the first ``limit`` entries of its log. :class:`SessionView` is a read-only reader
of an earlier version; the live, writable ``Session`` (session.py) is a reader too.

One pass over a large session (an export, a replay, stats): a read keeps every entry it decodes, so later reads are
free, and a pass over the whole log would then hold the whole session. Inside :func:`passing` the log hands entries
over instead (``EntryLog.passing``): memory follows what the pass is using, and an entry asked for again is decoded
again. :func:`entries` and :func:`stats` are such passes. (They were ``sessiontree.streaming``, which still names
this module.)
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from heapq import merge
from typing import Any

import attrs

from sessiontree import compaction as _compaction
from sessiontree.domain.aggregate import SessionAggregate, leaf_at
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry, SessionStarted, parse_timestamp
from sessiontree.domain.log import Head
from sessiontree.projections.base import (
    LabelsProjection,
    LeafProjection,
    Projection,
    SessionNameProjection,
    TreeProjection,
    fold,
    subscribed_types,
)
from sessiontree.projections.compaction import (
    DEFAULT_KEEP_RECENT_TOKENS,
    DEFAULT_RESERVE_TOKENS,
    CompactionPlan,
    ContextTokens,
    TokenEstimator,
)
from sessiontree.projections.context import (
    CURRENT_LEAF,
    Built,
    SessionContext,
    SessionContextBuildOptions,
    branch_positions,
    build_at,
    path_to_root_or_compaction,
)
from sessiontree.projections.stats import BranchStats, SessionStats, StatsProjection, branch_stats, stats_of
from sessiontree.projections.tool_pairs import ContextProblem, find_problems, unrepaired_entries

BUILTINS: dict[str, Any] = {
    "leaf": LeafProjection(), "labels": LabelsProjection(), "session_name": SessionNameProjection(), "tree": TreeProjection(),
    "stats": StatsProjection(),
}
_HEADS_ONLY = frozenset({"tree"})
_MISSING = object()


@attrs.frozen
class ReplayStep:
    """One step of :meth:`SessionReader.replay`: the event and the session right after it."""

    version: int
    event: Any
    view: SessionView


@attrs.frozen
class TreeNode:
    """A node of :meth:`SessionReader.get_tree`: an entry, its label and its children."""

    entry: Any
    label: str | None
    children: list[TreeNode]


def check_id(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {value!r}")
    return value


class SessionReader:
    """Every query of a session, over the first ``limit`` entries of its log."""

    def __init__(
        self, aggregate: SessionAggregate, limit: int, options: SessionContextBuildOptions,
        projections: Mapping[str, Projection[Any]],
    ) -> None:
        self._agg = aggregate
        self._limit = limit
        self._options = options
        self._projections = dict(projections)
        self._states: dict[str, Any] = {}

    @property
    def id(self) -> str:
        return self._agg.id

    @property
    def header(self) -> SessionStarted:
        """The session header event (cwd, metadata, parent session, ...)."""
        return self._agg.header

    @property
    def version(self) -> int:
        """How many events this reader sees (the header is version 1)."""
        return self._agg.header.originator_version + self._limit

    @property
    def leaf_id(self) -> str | None:
        """The current leaf (None: before the first entry)."""
        return leaf_at(self._agg.log, self._limit)

    @property
    def options(self) -> SessionContextBuildOptions:
        """The session-level context options (with a format's own rules), which every ``build_context`` merges."""
        return self._options

    context_build_options = options  # the seed's name

    def __len__(self) -> int:
        return self._limit

    def _pos(self, entry_id: Any, what: str = "entry") -> int:
        pos = self._agg.log.position(check_id(what, entry_id), self._limit)
        if pos is None:
            raise SessionError("not_found", f"{what} {entry_id!r} not found in session {self.id}")
        return pos

    def _branch_end(self, entry_id: str) -> str:
        """Check ``entry_id`` can end a branch: it exists and is not a ``leaf`` side record."""
        if self._agg.log.type_of(self._pos(entry_id)) == "leaf":
            raise SessionError(
                "invalid_entry", f"entry {entry_id!r} of session {self.id} is a leaf record, not part of any branch"
            )
        return entry_id

    def has_entry(self, entry_id: str) -> bool:
        return isinstance(entry_id, str) and self._agg.log.position(entry_id, self._limit) is not None

    def get_entry(self, entry_id: str) -> Entry | None:
        """The entry with this id, or None if there is none (as the seed and ``dict.get`` answer)."""
        pos = self._agg.log.position(check_id("entry", entry_id), self._limit)
        return None if pos is None else self._agg.log.get(pos)

    def entry(self, entry_id: str) -> Entry:
        """The entry with this id; ``SessionError('not_found')`` if there is none."""
        return self._agg.log.get(self._pos(entry_id))

    def get_entries(self) -> list[Entry]:
        """Every entry, in the order appended (the header excluded)."""
        return list(self._agg.log.iter_entries(self._limit))

    def iter_heads(self) -> Iterator[Head]:
        """Every entry's ``type``, ``id`` and ``parent_id``, in order, without decoding the rest
        (``get_entry(id)`` gives the whole entry)."""
        return self._agg.log.heads(self._limit)

    def find_entries(self, entry_type: str) -> list[Entry]:
        """Every entry of one type (``"message"``, ``"label"``, ...), in order."""
        log = self._agg.log
        return log.get_many(log.positions_of(check_id("entry type", entry_type), self._limit))

    def get_children(self, entry_id: str | None) -> list[Entry]:
        """The entries whose parent is ``entry_id`` (None: the roots); ``leaf`` records excluded."""
        if entry_id is not None:
            self._pos(entry_id)
        log = self._agg.log
        children = self.projection("tree").get(entry_id, ())
        return log.get_many([log.position(i) for i in children])  # type: ignore[misc]  # the tree's ids are in the log

    def get_branch(self, leaf_id: str | None = CURRENT_LEAF) -> list[Entry]:
        """The root-to-leaf path ending at ``leaf_id``; omitted, the current leaf's; None (before the first entry): []."""
        log = self._agg.log
        return log.get_many(branch_positions(log, self._leaf(leaf_id), self._limit))

    def get_path_to_root_or_compaction(self, leaf_id: str | None = CURRENT_LEAF) -> list[Entry]:
        """The shortest root-first suffix of the branch its context needs (SPEC 3); ``leaf_id`` as in get_branch."""
        log = self._agg.log
        return log.get_many(path_to_root_or_compaction(log, self._leaf(leaf_id), self._limit))

    def _leaf(self, leaf_id: str | None) -> str | None:
        if leaf_id is CURRENT_LEAF:
            return self.leaf_id
        return None if leaf_id is None else self._branch_end(leaf_id)

    def get_label(self, entry_id: str) -> str | None:
        """The entry's current label, or None (also when there is no such entry, as in the seed)."""
        label: str | None = self.projection("labels").get(check_id("entry", entry_id))
        return label

    def get_labels(self) -> dict[str, str]:
        """Every current label, ``{entry_id: label}``."""
        return dict(self.projection("labels"))

    def get_session_name(self) -> str | None:
        """The session's current name, or None."""
        name: str | None = self.projection("session_name")
        return name

    def get_tree(self) -> list[TreeNode]:
        """The whole tree from its roots, with labels (``leaf`` records left out)."""
        tree, labels, log = self.projection("tree"), self.projection("labels"), self._agg.log
        out: list[TreeNode] = []
        stack: list[tuple[str | None, list[TreeNode]]] = [(None, out)]  # not recursive: trees are deep
        while stack:
            parent, sink = stack.pop()
            for child_id in tree.get(parent, ()):
                entry = log.get(log.position(child_id))  # type: ignore[arg-type]  # the tree's ids are in the log
                node = TreeNode(entry, labels.get(child_id), [])
                sink.append(node)
                stack.append((child_id, node.children))
        return out

    def projection(self, name: str) -> Any:
        """The state of a built-in (``labels``, ``session_name``, ``tree``, ``stats``) or
        registered projection, as of this reader's version. Treat it as read-only."""
        state = self._states.get(name, _MISSING)
        if state is _MISSING:
            projection = self._projections.get(name) or BUILTINS.get(name)
            if projection is None:
                raise SessionError("not_found", f"no projection named {name!r} on session {self.id}")
            state = self._states[name] = fold(projection, self._entries_for(projection, name))
        return state

    def _entries_for(self, projection: Any, name: str) -> Iterable[Any]:
        log = self._agg.log
        wanted = subscribed_types(projection)
        if wanted is not None:
            lists = [log.positions_of(t, self._limit) for t in wanted]
            return log.get_many(lists[0] if len(lists) == 1 else list(merge(*lists)))
        if name in _HEADS_ONLY and projection is BUILTINS.get(name):
            return log.heads(self._limit)
        return log.iter_entries(self._limit)

    @property
    def projection_names(self) -> list[str]:
        return sorted({*BUILTINS, *self._projections})

    def build_context(
        self, options: SessionContextBuildOptions | None = None, *, leaf_id: str | None = CURRENT_LEAF
    ) -> SessionContext:
        """The messages the model sees on the current branch (or the one ending at ``leaf_id``; None: before the first
        entry, an empty context), with the thinking level, model and active tools in force there."""
        if leaf_id is CURRENT_LEAF and options is None:
            return self._current_context().context()
        merged = self._options.merged(options)  # first: options of another type are a TypeError
        return build_at(self._agg.log, self._leaf(leaf_id), merged, self._limit).context()

    def check_context(self, leaf_id: str | None = CURRENT_LEAF) -> list[ContextProblem]:
        """What in the context at ``leaf_id`` (default: the current leaf) breaks the providers' tool-call rules, in order
        (docs/concepts.md, *Tool calls and results*); [] when it is valid. Raises only as ``build_context`` does."""
        return find_problems(self._unrepaired_context(self._leaf(leaf_id)))

    def _unrepaired_context(self, leaf_id: str | None) -> list[Any]:
        """The context entries at ``leaf_id`` (already checked) as the session's options build them, without
        ``repair_tool_pairs``: what the repair sees (docs/concepts.md, *Tool calls and results*)."""
        log = self._agg.log
        return unrepaired_entries(log.get_many(path_to_root_or_compaction(log, leaf_id, self._limit)), self.options)

    def _current_context(self) -> Built:
        return build_at(self._agg.log, self.leaf_id, self._options, self._limit)

    def get_session_stats(self) -> SessionStats:
        """Counts, tokens and cost for the whole session, with ``.branch`` for the current one."""
        whole: SessionStats = copy.deepcopy(self.projection("stats"))
        log = self._agg.log
        whole.branch = stats_of(log.get_many(branch_positions(log, self.leaf_id, self._limit)))
        return whole

    def estimate_context_tokens(self, estimator: TokenEstimator | None = None) -> ContextTokens:
        """The current context's size: the last reply's reported usage plus an estimate."""
        return _compaction.estimate_context_tokens(self, estimator)

    def should_compact(
        self, context_window: int, reserve_tokens: int = DEFAULT_RESERVE_TOKENS, *, estimator: TokenEstimator | None = None
    ) -> bool:
        """True when the context is larger than ``context_window - reserve_tokens``."""
        return _compaction.should_compact(self, context_window, reserve_tokens, estimator)

    def plan_compaction(
        self, keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS, *, retain_tail: bool = False,
        estimator: TokenEstimator | None = None,
    ) -> CompactionPlan:
        """Where a compaction would cut and what it would summarise (nothing is written)."""
        return _compaction.plan(self, keep_recent_tokens, retain_tail, estimator)

    def at(self, version: int) -> SessionView:
        """A read-only view of the session as it was after its first ``version`` events."""
        if isinstance(version, bool) or not isinstance(version, int):
            raise TypeError(f"version must be an int, not {version!r}")
        if not 1 <= version <= self.version:
            raise SessionError("not_found", f"session {self.id} has no version {version} (versions are 1..{self.version})")
        return SessionView(self._agg, version - 1, self._options, self._projections)

    def as_of(self, moment: datetime | str) -> SessionView:
        """A read-only view of the session as it was at ``moment`` (aware datetime or ISO string)."""
        if isinstance(moment, str):
            try:
                moment = parse_timestamp(moment)
            except ValueError:
                raise SessionError("invalid_entry", f"not an ISO 8601 time: {moment!r}") from None
        if not isinstance(moment, datetime):
            raise TypeError(f"as_of needs a datetime or an ISO string, not {moment!r}")
        if moment.tzinfo is None:
            raise SessionError("invalid_entry", f"as_of needs a timezone-aware time, not {moment!r}")
        if parse_timestamp(self.header.timestamp) > moment:
            raise SessionError("not_found", f"session {self.id} did not exist yet at {moment.isoformat()}")
        entries = enumerate(self._agg.log.stream(0, self._limit))  # a pass: decoded entries are not kept
        first_later = next((pos for pos, entry in entries if parse_timestamp(entry.timestamp) > moment), self._limit)
        return SessionView(self._agg, first_later, self._options, self._projections)  # the entries before it

    def replay(self) -> Iterator[ReplayStep]:
        """Step through the log: each event with a view of the session right after it; while it runs, the entries
        decoded for the session are not kept (``EntryLog.passing``), so memory follows what each step uses."""
        yield ReplayStep(1, self.header, self.at(1))
        for pos, entry in enumerate(self._agg.log.stream(0, self._limit)):
            yield ReplayStep(pos + 2, entry, SessionView(self._agg, pos + 1, self._options, self._projections))


class SessionView(SessionReader):
    """A read-only view of a session as of one version (from ``at``, ``as_of``, ``replay``)."""

    def __repr__(self) -> str:
        return f"<SessionView {self.id} at version {self.version}>"


@contextmanager
def passing(reader: Any) -> Iterator[None]:
    """While inside, entries decoded for ``reader``'s session (a ``Session`` or any view of it) are not kept."""
    with reader._agg.log.passing():
        yield


def entries(reader: Any, start: int = 0) -> Iterator[Entry]:
    """``reader``'s entries from position ``start`` (0: the first after the header), in order, none kept."""
    return reader._agg.log.stream(start, len(reader))  # type: ignore[no-any-return]


def stats(reader: Any) -> BranchStats:
    """The stats of ``reader``'s whole session, of its current branch and of every branch, in one pass that keeps no
    entry (what ``get_session_stats`` and ``stats_of(get_branch(tip))`` per tip give)."""
    log, limit = reader._agg.log, len(reader)
    try:
        leaf = reader.leaf_id  # decodes a last ``leaf`` record
    except SessionError:
        for _ in log.stream(0, limit):  # a damaged file fails at its first bad line, as a whole read does
            pass
        raise
    return branch_stats(log, leaf, limit, log.stream(0, limit))


__all__ = ["ReplayStep", "SessionReader", "SessionView", "TreeNode", "entries", "passing", "stats"]
