"""Read-only commands: ``ls``, ``show``, ``context``, ``stats``."""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from sessiontree.cli.output import CliError, JsonRows, print_json, stdout
from sessiontree.cli.target import listing, open_repository, repo_url, session_for
from sessiontree.compaction import estimate_context_tokens
from sessiontree.wire.codec import native_codec


def cmd_ls(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise CliError("--limit must be 1 or more")
    if args.dir is not None:  # `ls DIR` is `ls --repo DIR`
        if args.repo is not None:
            raise CliError("name the repository once: as an argument or with --repo, not both")
        args.repo = args.dir
    repo = open_repository(args.repo)
    with repo:
        infos = listing(repo, cwd=args.cwd, limit=args.limit, since=args.since, name=args.name)
    if args.json:
        print_json([attrs.asdict(i) for i in infos])
        return 0
    console = stdout()
    if not infos:
        console.print(f"no sessions in {repo_url(args.repo)}" + (f" started in {args.cwd}" if args.cwd else ""))
        return 0
    from sessiontree.cli import views  # rich: only for people

    console.print(views.sessions_table(infos, console.width))
    return 0


DEFAULT_WINDOW = 1000
"""Rows ``show`` prints around the leaf unless ``--window`` says otherwise (0: all)."""


def tree_renderable(reader: Any, args: argparse.Namespace, *, title: Any = None) -> Any:
    """The rich tree of a session or time-travel view, with the ``show`` options applied."""
    window = DEFAULT_WINDOW if args.window is None else args.window
    from sessiontree.cli import render, treeview  # rich: only for people

    roots = treeview.build(reader, args.filter)
    return render.tree(reader, roots, depth=args.depth, window=window, title=title, full=getattr(args, "full", False))


def check_limits(args: argparse.Namespace) -> None:
    if args.depth is not None and args.depth < 0:
        raise CliError("--depth must be 0 or more")
    if args.window is not None and args.window < 0:
        raise CliError("--window must be 0 or more (0 shows every row)")


def show_reader(reader: Any, args: argparse.Namespace) -> None:
    """Print (or ``--json``) the tree of a session. A pass: the entries it decodes (the rows, and the messages a
    filter looks at) are not kept, and ``--json`` rows are made a chunk at a time (``output.JsonRows``)."""
    from sessiontree.cli import render, treeview
    from sessiontree.reader import passing

    check_limits(args)
    with passing(reader):
        if not args.json:
            stdout().print(tree_renderable(reader, args))
            return
        roots = treeview.build(reader, args.filter)
        head = {"session_id": reader.id, "name": reader.get_session_name(), "version": reader.version,
                "leaf_id": reader.leaf_id, "filter": args.filter, "parent_session": reader.header.parent_session}
        rows = JsonRows(head, "rows")
        for row in render.tree_rows(roots, native_codec(), window=args.window or 0):
            rows.add(row)
        rows.close()


def cmd_show(args: argparse.Namespace) -> int:
    with session_for(args.repo, args.session, args) as session:
        show_reader(session, args)
    return 0


def context_payload(reader: Any, context: Any, leaf: str | None) -> dict[str, Any]:
    """The exact context as JSON: the messages in their wire form, and the settings. ``estimated_tokens`` is the figure
    compaction uses: the last reply's reported usage plus chars/4 after it (``reported_tokens``), else chars/4."""
    codec = native_codec()
    tokens = estimate_context_tokens(reader, leaf_id=leaf)
    return {
        "session_id": reader.id,
        "leaf_id": leaf,
        "version": reader.version,
        "messages": [codec.message_to_dict(m) for m in context.messages],
        "thinking_level": context.thinking_level,
        "model": dict(context.model) if context.model else None,
        "active_tool_names": context.active_tool_names,
        "estimated_tokens": tokens.tokens,
        "reported_tokens": tokens.usage_tokens,
    }


def pi_context_payload(context: Any) -> dict[str, Any]:
    """The context in the shape pi's ``buildSessionContext`` returns (camelCase, pi's roles), to compare with pi's own."""
    from sessiontree.pi.pi import pi_codec

    codec, model = pi_codec(), context.model
    return {
        "messages": [codec.message_to_dict(m) for m in context.messages],
        "thinkingLevel": context.thinking_level,
        "model": {"provider": model["provider"], "modelId": model["model_id"]} if model else None,
    }


def print_context(reader: Any, args: argparse.Namespace, leaf_option: str | None = None) -> None:
    options = None
    if getattr(args, "repair", False):
        from sessiontree import SessionContextBuildOptions, repair_tool_pairs

        options = SessionContextBuildOptions(entry_transforms=[repair_tool_pairs])
    context = reader.build_context(options) if leaf_option is None else reader.build_context(options, leaf_id=leaf_option)
    leaf = reader.leaf_id if leaf_option is None else leaf_option
    if getattr(args, "format", None) == "pi":
        if getattr(args, "last", None) is not None:
            raise CliError("--last does not apply to --format pi, which is the whole context as pi builds it")
        print_json(pi_context_payload(context))
        return
    if args.json:
        print_json(context_payload(reader, context, leaf))
        return
    last = getattr(args, "last", None)
    if last is not None and last < 0:
        raise CliError("--last must be 0 or more")
    tokens = estimate_context_tokens(reader, leaf_id=leaf)
    from sessiontree.cli import views  # rich: only for people

    if options is not None:
        problems = reader.check_context(leaf_id=leaf)
        stdout().print(f"repaired: {len(problems)} tool-call problem(s)" + "".join(
            f"\n  {p.kind}: {p.message}" for p in problems), style="dim")
    stdout().print(views.context_view(reader.id, leaf, context, tokens, full=getattr(args, "full", False), last=last))


def cmd_context(args: argparse.Namespace) -> int:
    with session_for(args.repo, args.session, args) as session:
        print_context(session, args, args.leaf)
    return 0


def _stats_json(stats: Any) -> dict[str, Any]:
    data = attrs.asdict(stats, recurse=True)
    data.pop("branch", None)
    return data


def cmd_stats(args: argparse.Namespace) -> int:
    from sessiontree import reader

    with session_for(args.repo, args.session, args) as session:
        folded = reader.stats(session)  # one pass: no entry kept, each branch summed as the pass goes
        print_stats(session, folded.whole, folded.branches, as_json=args.json)
    return 0


def print_stats(session: Any, stats: Any, branches: list[tuple[str, bool, Any]], *, as_json: bool) -> None:
    """The whole session's stats (``.branch``: the current branch's) and ``(tip, is current, stats)`` per branch."""
    if as_json:
        print_json(
            {
                "session_id": session.id,
                "whole": _stats_json(stats),
                "current_branch": _stats_json(stats.branch) if stats.branch else None,
                "branches": [{"tip": tip, "current": cur, **_stats_json(s)} for tip, cur, s in branches],
            }
        )
        return
    from sessiontree.cli import render, views  # rich: only for people

    console = stdout()
    console.print(render.session_title(session))
    console.print(views.stats_view(stats, branches))
