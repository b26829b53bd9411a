"""The whole-read ``stats`` and ``show`` that the one-pass ones replaced (issue 19): the oracles of their property tests.

``whole_branch_stats`` is what ``stats`` computed over a log: the session's stats, then each branch folded again from
the entries the log had kept. ``old_cmd_stats`` and ``old_cmd_show`` are the commands as they were, holding every
entry they read and printing ``--json`` as one object.

Loaded like ``sessiontree_testkit`` (see its docstring).
"""

from __future__ import annotations

import argparse
from typing import Any

from sessiontree.cli.cmd_inspect import check_limits, print_stats, tree_renderable
from sessiontree.cli.output import print_json, stdout
from sessiontree.cli.target import session_for
from sessiontree.domain.log import EntryLog
from sessiontree.projections.base import TreeProjection, fold
from sessiontree.projections.context import branch_positions
from sessiontree.projections.stats import SessionStats, stats_of
from sessiontree.wire.codec import native_codec


def whole_branch_stats(log: EntryLog, leaf_id: str | None) -> tuple[SessionStats, list[tuple[str, bool, SessionStats]]]:
    """The session's stats (``.branch``: the current branch's) and ``(tip, is current, stats)`` per branch, as the
    whole read made them."""
    whole = stats_of(log.iter_entries())
    current_path = log.get_many(branch_positions(log, leaf_id))
    whole.branch = stats_of(current_path)
    current = current_path[-1].id if current_path else None
    tree = fold(TreeProjection(), log.heads())
    tips = [e.id for e in log.iter_entries() if e.type != "leaf" and not tree.get(e.id)]
    if current is not None and current not in tips:
        tips.append(current)
    return whole, [(tip, tip == current, stats_of(log.get_many(branch_positions(log, tip)))) for tip in tips]


def _branch_tips(reader: Any) -> list[str]:
    tree = reader.projection("tree")
    return [e.id for e in reader.get_entries() if e.type != "leaf" and not tree.get(e.id)]


def old_cmd_stats(args: argparse.Namespace) -> int:
    with session_for(args.repo, args.session, args) as session:
        stats = session.get_session_stats()
        branch = session.get_branch()
        current = branch[-1].id if branch else None
        tips = _branch_tips(session)
        if current is not None and current not in tips:  # the leaf sits inside the tree
            tips.append(current)
        branches = [(tip, tip == current, stats_of(session.get_branch(tip))) for tip in tips]
        print_stats(session, stats, branches, as_json=args.json)  # the computation is the oracle, not the printing
    return 0


def old_show_reader(reader: Any, args: argparse.Namespace) -> None:
    from sessiontree.cli import render, treeview

    check_limits(args)
    if args.json:
        roots = treeview.build(reader, args.filter)
        print_json(
            {
                "session_id": reader.id,
                "name": reader.get_session_name(),
                "version": reader.version,
                "leaf_id": reader.leaf_id,
                "filter": args.filter,
                "parent_session": reader.header.parent_session,
                "rows": list(render.tree_rows(roots, native_codec(), window=args.window or 0)),
            }
        )
        return
    stdout().print(tree_renderable(reader, args))


def old_cmd_show(args: argparse.Namespace) -> int:
    with session_for(args.repo, args.session, args) as session:
        old_show_reader(session, args)
    return 0


def ordered(value: Any) -> Any:
    """``value`` (stats, a dict, a number) as nested lists of pairs: equal only when the figures (floats to the bit)
    and the order of every dict are."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    if hasattr(value, "__attrs_attrs__"):
        return [(a.name, ordered(getattr(value, a.name))) for a in value.__attrs_attrs__]
    if isinstance(value, float):
        return value.hex()
    return value
