"""``sessiontree prune``: delete (or archive, then delete) whole sessions older than an age.

The plan is always printed first, every session it selects. Then: ``--dry-run`` stops there; ``--yes`` carries it
out; otherwise a terminal is asked to confirm, and without a terminal (a pipe, cron, a script) nothing is deleted and
the command fails, asking for ``--yes``: pruning is never done by accident (docs/cli.md).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import attrs

from sessiontree.cli.clip import one_line
from sessiontree.cli.output import CliError, print_json, stdout, warn
from sessiontree.cli.target import open_repository, repo_url


def cmd_prune(args: argparse.Namespace) -> int:
    from sessiontree.retention.prune import PruneError, parse_age

    try:
        age = parse_age(args.older_than)
    except ValueError as exc:
        raise CliError(f"--older-than: {exc}") from None
    repo = open_repository(args.repo)
    with repo:
        plan = repo.prune(age, dry_run=True, keep_labelled=args.keep_labelled, keep_named=args.keep_named,
                          archive=args.archive, cwd=args.cwd)
        for path, reason in repo.store.unreadable():
            warn(f"{path}: cannot read it ({reason}): its sessions are left out")
        if args.dry_run or not plan.sessions:
            _show(plan if args.dry_run else attrs.evolve(plan, dry_run=False), args, acted=False)
            return 0
        if not args.json:
            _show(plan, args, acted=False)
        if not args.yes and not _confirmed(plan, args):
            return 0
        try:
            result = repo.apply_prune(plan)
        except PruneError as exc:
            _show(exc.result, args, acted=True)
            raise
    _show(result, args, acted=True)
    return 0


def _confirmed(plan: Any, args: argparse.Namespace) -> bool:
    """Ask on a terminal; refuse (an error: nothing deleted) without one."""
    what = f"{'archive and delete' if plan.archive else 'delete'} {_count(len(plan.sessions))}"
    if args.json or not (sys.stdin.isatty() and sys.stderr.isatty()):
        if args.json:
            _show(plan, args, acted=False)  # the plan, for the script that will pass --yes
        raise CliError(f"prune would {what}: pass --yes to do it without asking (or --dry-run to only list them); "
                       "nothing was deleted")
    sys.stderr.write(f"{what.capitalize()}? [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer in ("y", "yes"):
        return True
    stdout().print("nothing was deleted", markup=False)
    return False


def _count(n: int) -> str:
    return f"{n} session" + ("" if n == 1 else "s")


def _size(n: int | None) -> str:
    if n is None:
        return "size unknown"
    if n < 1024:
        return f"{n} bytes"
    value = float(n)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


def _show(result: Any, args: argparse.Namespace, *, acted: bool) -> None:
    if args.json:
        print_json(result.to_dict())
        return
    console = stdout()

    def say(text: str) -> None:
        console.print(text, markup=False, emoji=False, soft_wrap=True)  # session text is never markup; rows stay whole

    if not acted:
        where = f" in {repo_url(args.repo)}" + (f" started in {args.cwd}" if args.cwd else "")
        if not result.sessions:
            say(f"nothing to prune{where}: no session's last change is before {result.cutoff}")
        else:
            verb = "would archive and delete" if result.archive else "would delete"
            say(f"{verb} {_count(len(result.sessions))} ({_size(result.bytes)}){where}, last changed before "
                f"{result.cutoff}:")
            for item in result.sessions:
                say(_row(item))
        for sid, why in result.protected:
            say(f"  kept {sid}: {why}")
        return
    for item in result.sessions:
        if item.id in result.pruned:
            say(f"✓ {'archived to ' + item.archive + ' and ' if item.archive else ''}deleted {item.id}")
    for sid, why in result.kept:
        say(f"  kept {sid}: {why}")
    say(f"pruned {_count(len(result.pruned))} of {len(result.sessions)}")


def _row(item: Any) -> str:
    name = f" {one_line(item.name, 40)!r}" if item.name else ""
    archive = f" -> {item.archive}" if item.archive else ""
    return (f"  {item.id}{name}  {one_line(item.cwd, 60) or '-'}  last change {item.modified}  {item.entries} entries  "
            f"{_size(item.bytes)}{archive}")
