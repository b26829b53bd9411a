"""The ``sessiontree`` argument parser and dispatcher.

Every command takes ``--repo URL``, ``--json`` and ``--debug`` (before or after the
command name). A failure prints one line on stderr and exits with status 1; ``--debug``
shows the traceback instead. Command modules are imported only when their command runs,
so ``sessiontree --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from importlib import import_module
from typing import Any, NoReturn

from sessiontree.cli.output import PROG, CliError, error_line

DESCRIPTION = (
    "Inspect, navigate, replay and convert sessiontree sessions. A SESSION is a JSONL file "
    "path, a session id, a unique id prefix or a session name; without one, the most "
    "recently modified session of the repository is used."
)
FILTERS = ("default", "no-tools", "user", "labelled", "all")


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit status 1."""

    def error(self, message: str) -> NoReturn:
        error_line(f"{message} (see `{self.prog} --help`)")
        raise SystemExit(1)


def _common() -> Parser:
    common = Parser(add_help=False)
    s = argparse.SUPPRESS
    common.add_argument("--repo", metavar="URL", default=s,
                        help="repository URL or directory (default: $SESSIONTREE_REPO, else ./.sessions)")
    common.add_argument("--json", action="store_true", default=s, help="print JSON for scripts instead of text for people")
    common.add_argument("--debug", action="store_true", default=s, help="show the traceback of an error")
    return common


def _session_args(p: argparse.ArgumentParser, *, positional: bool = True) -> None:
    if positional:
        p.add_argument("session_pos", nargs="?", metavar="SESSION", help="session file, id, id prefix or name")
    p.add_argument("-s", "--session", metavar="SESSION", help="session file, id, id prefix or name")


def _tree_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-f", "--filter", choices=FILTERS, default="default",
                   help="which entries to show (default: all but label entries)")
    p.add_argument("--depth", type=int, metavar="N",
                   help="expand side branches only N branch points deep (the current branch is always expanded)")
    p.add_argument("--window", type=int, metavar="N",
                   help="show only N rows around the leaf (default: 1000 for text, all for --json; 0: all)")


# (command, module, help)
COMMANDS = (
    ("demo", "cmd_demo", "create a sample session in the repository and show it"),
    ("ls", "cmd_inspect", "list sessions, newest first"),
    ("show", "cmd_inspect", "show a session's tree with the leaf, labels and branch points marked"),
    ("context", "cmd_inspect", "show the messages the model would see"),
    ("stats", "cmd_inspect", "entries, messages, tokens and cost, in total, per branch and per model"),
    ("replay", "cmd_replay", "time travel: the session as it was, or each event's effect step by step"),
    ("fork", "cmd_write", "copy a branch into a new session"),
    ("label", "cmd_write", "set or clear an entry's label"),
    ("name", "cmd_write", "set or clear the session's name"),
    ("move", "cmd_write", "move the leaf to another entry (optionally summarising the branch left)"),
    ("compact", "cmd_write", "compact the current branch with the offline summariser"),
    ("import", "cmd_convert", "import pi or native session files into the repository"),
    ("export", "cmd_convert", "export a session (pi or native JSONL) or a branch (Markdown, HTML)"),
    ("verify", "cmd_verify", "check session files or a repository and report each problem"),
    ("sign", "cmd_verify", "sign a checkpoint of session files or a repository's sessions with a key"),
)


def build_parser() -> Parser:
    common = _common()
    parser = Parser(prog=PROG, description=DESCRIPTION, parents=[common])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    ps = {name: sub.add_parser(name, help=text, description=text, parents=[common]) for name, _, text in COMMANDS}

    p = ps["demo"]
    p.add_argument("--cwd", help="the working directory recorded in the session (default: the current one)")
    p.add_argument("--quiet", action="store_true", help="only print where the session was written")

    p = ps["ls"]
    p.add_argument("--cwd", help="only sessions started in this directory")
    p.add_argument("-n", "--limit", type=int, metavar="N", help="at most N sessions")

    p = ps["show"]
    _session_args(p)
    _tree_args(p)

    p = ps["context"]
    _session_args(p)
    p.add_argument("--leaf", metavar="ID", help="the branch ending at this entry (default: the current leaf)")
    p.add_argument("--full", action="store_true", help="do not shorten long messages")
    p.add_argument("--last", type=int, metavar="N", help="show only the last N messages (the totals still count all)")

    p = ps["stats"]
    _session_args(p)

    p = ps["replay"]
    _session_args(p)
    when = p.add_mutually_exclusive_group()
    when.add_argument("--to", type=int, metavar="N", help="the session after its first N events (the header is event 1)")
    when.add_argument("--at", metavar="TIME", help="the session as it was at an ISO 8601 time")
    p.add_argument("--step", action="store_true", help="print each event with what it changed in the leaf and the context")
    p.add_argument("--from", dest="start", type=int, metavar="N", default=1, help="with --step: start at event N")
    _tree_args(p)

    p = ps["fork"]
    _session_args(p)
    p.add_argument("--entry", metavar="ID", help="fork at this entry (default: the current leaf)")
    p.add_argument("--position", choices=("before", "at"), default=None,
                   help="'before' a user message (to ask it again) or 'at' the entry (default: at)")
    p.add_argument("--salvage", action="store_true",
                   help="fork a source that fails verify from what can be read (the fork records the lines it skipped)")

    p = ps["label"]
    p.add_argument("entry", metavar="ENTRY", help="the entry to label")
    p.add_argument("text", nargs="?", metavar="LABEL", help="the label (omit, or pass --clear, to clear it)")
    p.add_argument("--clear", action="store_true", help="clear the entry's label")
    _session_args(p, positional=False)

    p = ps["name"]
    p.add_argument("text", nargs="?", metavar="NAME", help="the new name (omit to print the current one)")
    p.add_argument("--clear", action="store_true", help="clear the session's name")
    _session_args(p, positional=False)

    p = ps["move"]
    p.add_argument("entry", metavar="ENTRY", help="the entry to move the leaf to ('root': before the first entry)")
    p.add_argument("--summary", metavar="TEXT",
                   help="a summary of the branch being left (appended as a branch summary, the new leaf)")
    p.add_argument("--summarize", action="store_true",
                   help="summarise the branch being left with the offline extractive summariser")
    _session_args(p, positional=False)

    p = ps["compact"]
    _session_args(p)
    p.add_argument("--keep-tokens", type=int, metavar="N",
                   help="keep about N tokens of recent turns verbatim (default: the library's)")
    p.add_argument("--retain-tail", action="store_true", help="store the kept messages in the compaction entry itself")
    p.add_argument("--dry-run", action="store_true", help="only report what would be summarised and kept")

    p = ps["import"]
    p.add_argument("files", nargs="+", metavar="FILE", help="session files (pi or native JSONL)")

    p = ps["export"]
    _session_args(p)
    p.add_argument("--format", choices=("pi", "native", "markdown", "html"), default="markdown",
                   help="output format (default: markdown)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--leaf", metavar="ID", help="markdown/html: the branch ending at this entry (default: the current leaf)")

    p = ps["verify"]
    p.add_argument("paths", nargs="*", metavar="PATH", help="session files or directories (default: the repository)")
    p.add_argument("--key", metavar="FILE",
                   help="check signed checkpoints with this key (raw HMAC key bytes, or an Ed25519 PEM key)")
    p.add_argument("--require-chain", action="store_true", help="an unchained log is an error, not a warning")
    p.add_argument("--checkpoints", metavar="FILE",
                   help="with --key: read the signed checkpoints from FILE (kept away from the log) instead of beside each file")
    p.add_argument("--head", metavar="DIGEST",
        help="the log must have this head digest (printed by an earlier verify or sign) at some line: catches a rollback")
    p.add_argument("--at-least", type=int, metavar="N", help="the log must have at least N lines: catches lines cut from the end")

    p = ps["sign"]
    p.add_argument("paths", nargs="*", metavar="PATH", help="session files or directories (default: the repository)")
    p.add_argument("--key", metavar="FILE", required=True,
                   help="the signing key: raw HMAC key bytes (16 or more), or an Ed25519 private key in PEM")
    p.add_argument("--key-id", metavar="ID", help="a name for the key, recorded in the checkpoint")
    p.add_argument("--out", metavar="FILE",
                   help="append the checkpoints to FILE (keep it away from the logs) instead of beside each file")
    return parser


def _normalise(args: argparse.Namespace) -> argparse.Namespace:
    for name, default in (("repo", None), ("json", False), ("debug", False)):
        if not hasattr(args, name):
            setattr(args, name, default)
    if hasattr(args, "session_pos"):
        if args.session_pos is not None and args.session is not None:
            raise CliError("name the session once: as an argument or with --session, not both")
        args.session = args.session_pos if args.session_pos is not None else args.session
    return args


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), run the command, return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    debug = bool(getattr(args, "debug", False))
    try:
        args = _normalise(args)
        modules = {command: module for command, module, _ in COMMANDS}
        module = import_module(f"sessiontree.cli.{modules[args.command]}")
        handler: Any = getattr(module, "cmd_" + args.command)
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        error_line("interrupted")
        return 130
    except BrokenPipeError:  # the reader went away (`sessiontree replay | head`): not an error
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return 0
    except Exception as exc:  # one line, never a traceback (unless --debug)
        if debug:
            traceback.print_exc()
        error_line(_describe(exc))
        return 1


def _describe(exc: Exception) -> str:
    from sessiontree.domain.errors import SessionError

    if isinstance(exc, (SessionError, CliError)):
        return str(exc)
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror or exc}{where}"
    return f"{type(exc).__name__}: {exc}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
