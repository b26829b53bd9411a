"""``sessiontree demo``: write the sample session into the repository and show it.

The conversation is built in memory with the demo clock and ids, then copied into the
repository in one write (``repo.copy_from``), so the demo works on every backend and a
half-written demo session never exists. Each run adds a new session; nothing is reused
or overwritten.
"""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime

from rich.text import Text

from sessiontree.cli import render, treeview, views
from sessiontree.cli.demo import STEP, DemoClock, build_demo, demo_ids
from sessiontree.cli.destination import refuse_foreign
from sessiontree.cli.output import print_json, stdout
from sessiontree.cli.target import open_repository, repo_url
from sessiontree.repository import InMemorySessionRepo

# The demo's ~40 events are spread over the minutes before the run, ending about now.
LEAD = 45 * STEP


def cmd_demo(args: argparse.Namespace) -> int:
    refuse_foreign(repo_url(args.repo), "the demo session")
    repo = open_repository(args.repo, create=True)
    with repo:
        clock = DemoClock(datetime.now(UTC) - LEAD)
        scratch = InMemorySessionRepo(clock=clock, id_generator=demo_ids())
        draft = scratch.create(cwd=args.cwd or os.getcwd(), metadata={"created_by": "sessiontree demo"})
        result = build_demo(draft, clock)
        session = repo.copy_from(scratch, draft.id)
        try:
            if args.json:
                print_json(
                    {
                        "session_id": session.id,
                        "location": session.storage.location,
                        "entries": result.entries,
                        "leaf_id": session.leaf_id,
                        "name": session.get_session_name(),
                        "ids": result.ids,
                    }
                )
                return 0
            console = stdout()
            console.print(Text.assemble(("Wrote a sample session to ", "bold"), (session.storage.location, "bold cyan")))
            if args.quiet:
                return 0
            console.print()
            console.print(render.tree(session, treeview.build(session)))
            console.print()
            context = session.build_context()
            tokens = session.estimate_context_tokens()
            console.print(views.context_heading(session.id, session.leaf_id, context, tokens))
            console.print(views.context_table(context))
            console.print(_next_steps(result.ids, repo_url(args.repo)))
        finally:
            session.close()
    return 0


def _next_steps(ids: dict[str, str], url: str) -> Text:
    repo = "" if url == ".sessions" else f" --repo {url}"
    steps = [
        (f"sessiontree show --filter user{repo}", "only the user messages"),
        (f"sessiontree context --leaf {ids['quick_fix_end']}{repo}", "what the model saw on the abandoned branch"),
        (f"sessiontree replay --step{repo}", "each event and what it changed"),
        (f"sessiontree stats{repo}", "tokens and cost per branch and per model"),
        (f"sessiontree export --format markdown{repo}", "the current branch as Markdown"),
    ]
    out = Text("\nTry next:\n", "bold")
    for command, why in steps:
        out.append(f"  {command}", "cyan")
        out.append(f"   # {why}\n", "dim")
    return out
