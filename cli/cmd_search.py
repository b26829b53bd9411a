"""``sessiontree search``: full-text search across every session of the repository."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from sessiontree.cli.output import CliError, print_json, warn
from sessiontree.cli.target import local_directory, open_repository, repo_url


def cmd_search(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise CliError("--limit must be 1 or more")
    options = {"limit": args.limit, "cwd": args.cwd, "role": args.role, "since": args.since, "until": args.until}
    try:
        hits = _search(args.repo, args.query, options)
    except ValueError as exc:  # a query with no word, a time that cannot be read
        raise CliError(str(exc)) from None
    if args.json:
        print_json({"hits": [h.to_dict() for h in hits]})
        return 0
    out = [f"no entries match {args.query!r} in {repo_url(args.repo)}\n"] if not hits else []
    for hit in hits:
        branch = "on the current branch" if hit.on_active_branch else "on a side branch"
        out.append(f"{hit.session_name or hit.session_id}  {hit.entry_id}  {hit.kind}  {hit.timestamp}  ({branch})\n"
                   f"    {hit.snippet}\n    {hit.context_command}\n")
    sys.stdout.write("".join(out))  # plain text: a snippet is shown as written (no markup), and rich is not loaded
    return 0


def _search(option: str | None, query: str, options: dict[str, Any]) -> list[Any]:
    folder = local_directory(repo_url(option))
    if folder is not None and os.path.isdir(folder):
        from sessiontree.search.search import search_folder  # a folder: searched without opening a repository
        from sessiontree.storage.jsonl_repo import unreadable_logs

        hits = search_folder(folder, query, **options)
        for path, reason in unreadable_logs(folder):
            warn(f"{path}: cannot read it ({reason}): its sessions are not searched")
        return hits
    with open_repository(option) as repo:
        return list(repo.search(query, **options))
