"""``sessiontree replay``: time travel.

``--to N`` and ``--at TIME`` show the session as it was (its tree and its context then);
without them, or with ``--step``, every event is listed with what it did to the leaf and
to the context. Stepping keeps the context incrementally: an event appended at the leaf
adds its messages (when the session's context rules say appending extends the context,
as they do for a pi file except at a ``context_edit``); a leaf move, a compaction or such
an event rebuilds it. Events before ``--from`` cost one context build, not a step each,
and rows are laid out by hand (a rich table measures every cell of every row), so the
work follows what is printed. The walk is one pass that keeps neither entries nor
messages (``replay_steps.py``), and rows (``--json`` too) are written a chunk at a time,
so memory follows a chunk of rows, not the session.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.control import strip_control_codes
from rich.text import Text

from sessiontree.cli import clip, render, views
from sessiontree.cli.cmd_inspect import check_limits, context_payload, tree_renderable
from sessiontree.cli.describe import entry_text
from sessiontree.cli.output import CliError, JsonRows, print_json, progress, stdout
from sessiontree.cli.replay_steps import steps
from sessiontree.cli.target import session_for
from sessiontree.domain.errors import SessionError


def parse_time(text: str) -> datetime:
    """An ISO 8601 time; without a zone it is read as local time."""
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        raise SessionError("invalid_entry", f"not an ISO 8601 time: {text!r} (e.g. 2026-11-29T12:30:00Z)") from None
    return moment if moment.tzinfo is not None else moment.astimezone()


def cmd_replay(args: argparse.Namespace) -> int:
    with session_for(args.repo, args.session, args) as session:
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
    full = bool(getattr(args, "full", False))
    when = f"as of event {view.version}"
    if last is None:
        when += " (the header)"
    else:
        what = f"{last.timestamp}, {last.type} {last.id}"
        when += f" ({what if full else clip.clip_field(what)})"
    console = stdout()
    console.print(tree_renderable(view, args, title=render.session_title(view, extra=when, full=full)))
    console.print(views.context_heading(view.id, view.leaf_id, context, view.estimate_context_tokens(), full))
    console.print(views.context_table(context))


def _change(removed: int, added: list[str], size: int) -> Text:
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
            out.append(f" {added[0]}", "green")
        out.append(" ")
    out.append(f"= {size}", "dim")
    return out


CHUNK = 500  # rows laid out together: the columns fit these rows, and they appear as they are computed
HEADINGS = ("#", "time", "leaf", "context msgs", "event")
Row = tuple[str, str, Text, str, Text]  # number, time, event, leaf, context change
GAP = "   "  # between columns


def _pad(text: str, width: int, right: bool = False) -> str:
    fill = " " * max(0, width - cell_len(text))
    return fill + text if right else text + fill


def _cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells with an ellipsis, never padded (the event is the last column)."""
    return set_cell_size(text, width - 1) + "…" if cell_len(text) > width else text


def _widths(console: Console, rows: list[Row]) -> list[int]:
    """Each column fits its cells; the event, last, takes the room the others leave (piped: all it needs, unpadded)."""
    cells = [(number, clock, moved, change, event) for number, clock, event, moved, change in rows]
    widths = [
        max(cell_len(heading), *(cell.cell_len if isinstance(cell, Text) else cell_len(cell) for cell in column))
        for heading, column in zip(HEADINGS, zip(*cells))
    ]
    others = sum(widths[:4]) + len(GAP) * 4
    widths[4] = max(1, min(widths[4], console.width - others))
    return widths


def _print_rows(console: Console, rows: list[Row]) -> None:
    """A table of ``rows`` under the headings, laid out as rich's simple-head table would be; the event column comes
    last, so a long event pads no other row."""
    widths = _widths(console, rows)
    heading = GAP.join(_pad(h, w, right=i == 0) for i, (h, w) in enumerate(zip(HEADINGS[:4], widths))) + GAP + HEADINGS[4]
    rule = "─" * (sum(widths) + len(GAP) * 4)
    if console.color_system is None:  # nothing to style: plain lines, without laying out a Text per cell
        lines = [heading, rule]
        for number, clock, event, moved, change in rows:
            cells = (_pad(strip_control_codes(number), widths[0], right=True), _pad(strip_control_codes(clock), widths[1]),
                     _pad(strip_control_codes(moved), widths[2]), _pad(change.plain, widths[3]), _cut(event.plain, widths[4]))
            lines.append(GAP.join(cells))
        console.file.write("\n".join(lines) + "\n")
        console.file.flush()
        return
    out = Text()
    out.append(heading, "bold")
    out.append("\n" + rule)
    for number, clock, event, moved, change in rows:
        cell = event.copy()
        cell.truncate(widths[4], overflow="ellipsis")
        context = change.copy()
        context.truncate(widths[3], pad=True)
        out.append("\n")
        out.append(_pad(number, widths[0], right=True), "bold")
        out.append(GAP)
        out.append(_pad(clock, widths[1]), "dim")
        out.append(GAP)
        out.append(_pad(moved, widths[2]), "bold yellow")
        out.append(GAP)
        out.append_text(context)
        out.append(GAP)
        out.append_text(cell)
    console.print(out, soft_wrap=True)


def _row(version: int, event: Any, before: str | None, after: str | None) -> tuple[str, str, Text, str]:
    if version == 1:
        started = Text(f"session started · cwd {clip.clip_field(event.cwd or '(none)')}", "bold")
        return str(version), _clock(event.timestamp), started, ""
    what = Text(clip.clip_field(event.id, 60) + " ", "cyan")
    what.append_text(entry_text(event))
    natural = after == event.id and before == event.parent_id
    return str(version), _clock(event.timestamp), what, "" if natural else f"→ {clip.clip_field(after or '(none)', 60)}"


def _step(session: Any, args: argparse.Namespace) -> None:
    if args.start < 1:
        raise CliError("--from must be 1 or more (event 1 is the header)")
    end = args.to
    for event in (args.start, end):
        if event is not None and not 1 <= event <= session.version:
            raise SessionError("not_found", f"session {session.id} has no event {event} (events are 1..{session.version})")
    if end is not None and end < args.start:
        raise CliError(f"--from {args.start} comes after --to {end}: nothing to step through")
    lines: list[Row] = []
    console = stdout()
    total = (end or session.version) - args.start + 1
    rows = JsonRows({"session_id": session.id}, "steps", rows=CHUNK) if args.json else None
    with progress("replaying", total if total > 2000 else None) as advance:
        for version, event, before, after, removed, added, size in steps(session, args.start, end):
            advance(1)
            if rows is not None:
                rows.add({"version": version, "type": event.type, "id": event.id, "timestamp": event.timestamp,
                          "leaf_before": before, "leaf_after": after, "removed": removed, "added": added,
                          "context_size": size})
                continue
            lines.append((*_row(version, event, before, after), _change(removed, added, size)))
            if len(lines) >= CHUNK:
                _print_rows(console, lines)
                lines = []
    if rows is not None:
        rows.close()
    elif lines:
        _print_rows(console, lines)


def _clock(timestamp: str) -> str:
    return views.local_time(timestamp)[11:]
