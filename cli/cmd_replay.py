"""``sessiontree replay``: time travel.

``--to N`` and ``--at TIME`` show the session as it was (its tree and its context then);
without them, or with ``--step``, every event is listed with what it did to the leaf and
to the context. Stepping keeps the context incrementally: an event appended at the leaf
adds its messages; only a leaf move or a compaction rebuilds the context, so stepping
through a session costs about its length plus the rebuilt contexts. (A session with entry
transforms, such as a pi file, rebuilds the context at every step.)
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from sessiontree.cli import render, views
from sessiontree.cli.cmd_inspect import check_limits, context_payload, tree_renderable
from sessiontree.cli.describe import entry_text
from sessiontree.cli.output import CliError, print_json, progress, stdout
from sessiontree.cli.target import session_for
from sessiontree.domain.errors import SessionError
from sessiontree.projections.context import entry_to_messages
from sessiontree.projections.tokens import DEFAULT_ESTIMATOR

_REBUILDS = frozenset({"leaf", "compaction"})


def parse_time(text: str) -> datetime:
    """An ISO 8601 time; without a zone it is read as local time."""
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        raise SessionError("invalid_entry", f"not an ISO 8601 time: {text!r} (e.g. 2026-11-29T12:30:00Z)") from None
    return moment if moment.tzinfo is not None else moment.astimezone()


def cmd_replay(args: argparse.Namespace) -> int:
    with session_for(args.repo, args.session) as session:
        if args.at is not None or (args.to is not None and not args.step):
            view = session.as_of(parse_time(args.at)) if args.at is not None else session.at(args.to)
            _show_view(view, args)
        else:
            _step(session, args)
    return 0


def _show_view(view: Any, args: argparse.Namespace) -> None:
    context = view.build_context()
    heads = list(view.iter_heads())
    last = view.entry(heads[-1].id) if heads else None
    if args.json:
        payload = context_payload(view, context, view.leaf_id)
        payload["entries"] = len(view)
        payload["timestamp"] = last.timestamp if last is not None else view.header.timestamp
        print_json(payload)
        return
    check_limits(args)
    when = f"as of event {view.version}" + (f" ({last.timestamp}, {last.type} {last.id})" if last else " (the header)")
    console = stdout()
    console.print(tree_renderable(view, args, title=render.session_title(view, extra=when)))
    tokens = sum(DEFAULT_ESTIMATOR(m) for m in context.messages)
    console.print(views.context_heading(view.id, view.leaf_id, context, tokens))
    console.print(views.context_table(context))


def _common_prefix(a: list[Any], b: list[Any]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x is not y and x != y:
            break
        n += 1
    return n


def steps(session: Any, start: int = 1, end: int | None = None) -> Any:
    """Yield ``(version, event, leaf before, leaf after, removed, added, context size)``."""
    end = session.version if end is None else end
    # Entry transforms (pi's context_edit rules, app transforms) may change earlier messages,
    # so with any of them every step rebuilds the context instead of growing it.
    incremental = not session.options.entry_transforms
    leaf: str | None = None
    messages: list[Any] = []
    for step in session.replay():
        if step.version > end:
            break
        event = step.event
        before = leaf
        leaf = step.view.leaf_id
        if step.version == 1:
            removed, added = 0, []
        elif incremental and event.type not in _REBUILDS and event.parent_id == before:
            # Appended at the leaf: the context grows by this entry's messages (no copy).
            removed, added = 0, entry_to_messages(event, len(messages), [], session.options)
            messages.extend(added)
        else:
            new = step.view.build_context().messages
            keep = _common_prefix(messages, new)
            removed, added = len(messages) - keep, new[keep:]
            messages = new
        if step.version >= start:
            yield step.version, event, before, leaf, removed, added, len(messages)


def _change(removed: int, added: list[Any], size: int) -> Text:
    """``+1 assistant = 13``, ``-6 = 6``, ``-17 +12 = 12``, or ``·`` when nothing changed."""
    out = Text(no_wrap=True)
    if not removed and not added:
        out.append("·", "dim")
        return out
    if removed:
        out.append(f"-{removed} ", "red")
    if added:
        out.append(f"+{len(added)}", "green")
        if len(added) == 1:
            out.append(f" {getattr(added[0], 'role', '?')}", "green")
        out.append(" ")
    out.append(f"= {size}", "dim")
    return out


CHUNK = 500


def _table() -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("#", justify="right", no_wrap=True, style="bold")
    table.add_column("time", no_wrap=True, style="dim")
    table.add_column("event")
    table.add_column("leaf", no_wrap=True, style="bold yellow")
    table.add_column("context msgs", no_wrap=True)
    return table


def _step(session: Any, args: argparse.Namespace) -> None:
    if args.start < 1:
        raise CliError("--from must be 1 or more (event 1 is the header)")
    end = args.to
    if end is not None and not 1 <= end <= session.version:
        raise SessionError("not_found", f"session {session.id} has no event {end} (events are 1..{session.version})")
    rows: list[dict[str, Any]] = []
    console = stdout()
    table = _table()
    total = (end or session.version) - args.start + 1
    with progress("replaying", total if total > 2000 else None) as advance:
        for version, event, before, after, removed, added, size in steps(session, args.start, end):
            advance(1)
            if args.json:
                rows.append(
                    {
                        "version": version,
                        "type": event.type,
                        "id": event.id,
                        "timestamp": event.timestamp,
                        "leaf_before": before,
                        "leaf_after": after,
                        "removed": removed,
                        "added": [getattr(m, "role", "?") for m in added],
                        "context_size": size,
                    }
                )
                continue
            if version == 1:
                what = Text(f"session started · cwd {event.cwd or '(none)'}", "bold")
                moved = ""
            else:
                what = Text(event.id + " ", "cyan")
                what.append_text(entry_text(event))
                natural = after == event.id and before == event.parent_id
                moved = "" if natural else f"→ {after or '(none)'}"
            table.add_row(str(version), _clock(event.timestamp), views.cut(what), moved, _change(removed, added, size))
            if table.row_count >= CHUNK:
                console.print(table)
                table = _table()
    if args.json:
        print_json({"session_id": session.id, "steps": rows})
    elif table.row_count:
        console.print(table)


def _clock(timestamp: str) -> str:
    return views.local_time(timestamp)[11:]
