"""``check``: what in a session's context breaks the providers' tool-call rules (docs/concepts.md, *Tool calls and
results*), and with ``--repair`` the results an append can add."""

from __future__ import annotations

import argparse
import warnings
from typing import Any

from rich.text import Text

from sessiontree.cli.output import CliError, print_json, stdout
from sessiontree.cli.target import session_for

HINT = ("sessiontree context --repair shows the context repaired; check --repair appends a result for each unanswered "
        "call of the last turn")
HISTORY = ("{n} problem(s) are history an append cannot change (nothing in the log is rewritten); "
           "the repaired context shows how they are repaired: sessiontree context --repair")


def cmd_check(args: argparse.Namespace) -> int:
    with session_for(args.repo, args.session, args) as session:
        leaf = session.leaf_id if args.leaf is None else args.leaf
        problems = session.check_context(leaf_id=leaf)
        appended: list[str] = []
        left = problems
        if args.repair:
            if leaf != session.leaf_id:
                raise CliError(f"--repair appends under the current leaf ({session.leaf_id}), not {leaf}: "
                               "move there first, or leave out --leaf")
            from sessiontree import ContextRepairWarning

            with warnings.catch_warnings():  # what is left is printed below
                warnings.simplefilter("ignore", ContextRepairWarning)
                appended = session.repair()
            left = session.check_context()
        if args.json:
            payload: dict[str, Any] = {"session_id": session.id, "leaf_id": leaf,
                                       "problems": [p.to_dict() for p in problems]}
            if args.repair:
                payload |= {"appended": appended, "problems_left": [p.to_dict() for p in left]}
            print_json(payload)
        else:
            _print(session.id, leaf, problems, appended if args.repair else None, left)
    return 1 if left else 0


def _print(session_id: str, leaf: str | None, problems: list[Any], appended: list[str] | None, left: list[Any]) -> None:
    console = stdout()
    if not problems:
        console.print(f"session {session_id} at {leaf}: every tool call has its result")
        return
    console.print(f"session {session_id} at {leaf}: {len(problems)} tool-call problem(s)")
    for problem in problems:
        line = Text("  ")
        line.append(f"{problem.kind:<20}", "bold red")
        line.append(f" {problem.entry_id or '-':<10} ", "dim")
        line.append(problem.message)
        console.print(line)
    if appended is not None:
        console.print(f"appended {len(appended)} result(s) under the leaf" + (f": {', '.join(appended)}" if appended else ""))
    if appended is None:
        console.print(Text(HINT, "dim"))
    elif left:
        console.print(Text(HISTORY.format(n=len(left)), "dim"))
