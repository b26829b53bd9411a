"""``sessiontree search``: full-text search across every session of the repository."""

from __future__ import annotations

import argparse

from sessiontree.cli.output import CliError, print_json, stdout
from sessiontree.cli.target import open_repository, repo_url

ROLES = ("user", "assistant", "tool")


def cmd_search(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError("--limit must be 1 or more")
    repo = open_repository(args.repo)
    with repo:
        try:
            hits = repo.search(args.query, limit=args.limit, cwd=args.cwd, role=args.role, since=args.since,
                               until=args.until)
        except ValueError as exc:  # a query with no word, a time that cannot be read
            raise CliError(str(exc)) from None
    if args.json:
        print_json({"hits": [h.to_dict() for h in hits]})
        return 0
    console = stdout()
    if not hits:
        console.print(f"no entries match {args.query!r} in {repo_url(args.repo)}", markup=False, highlight=False)
        return 0
    for hit in hits:
        session = hit.session_name or hit.session_id
        branch = "on the current branch" if hit.on_active_branch else "on a side branch"
        console.print(f"{session}  {hit.entry_id}  {hit.kind}  {hit.timestamp}  ({branch})", markup=False, highlight=False)
        console.print(f"    {hit.snippet}", markup=False, highlight=False, soft_wrap=True)
        console.print(f"    {hit.context_command}", markup=False, highlight=False, soft_wrap=True)
    return 0
