"""The ``sessiontree`` argument parser: every command, its arguments and their help.

Every command takes ``--repo URL``, ``--json`` and ``--debug`` (before or after the command name); a usage error is
one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import NoReturn

from sessiontree.cli.output import PROG, error_line

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


def _salvage_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--salvage", action="store_true",
                   help="read past lines that cannot be read (as pi does), saying on stderr which were skipped")


def _full_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--full", action="store_true", help="do not shorten long text (by default a block shows 12 lines)")


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
    ("check", "cmd_check", "list the tool calls and results the model would refuse (exit 1 when there are any)"),
    ("search", "cmd_search", "search the entries of every session (messages, tool calls and output, summaries, labels)"),
    ("stats", "cmd_inspect", "entries, messages, tokens and cost, in total, per branch and per model"),
    ("replay", "cmd_replay", "time travel: the session as it was, or each event's effect step by step"),
    ("fork", "cmd_write", "copy a branch into a new session"),
    ("label", "cmd_write", "set or clear an entry's label"),
    ("name", "cmd_write", "set or clear the session's name"),
    ("move", "cmd_write", "move the leaf to another entry (optionally summarising the branch left)"),
    ("compact", "cmd_write", "compact the current branch with the offline summariser"),
    ("import", "cmd_convert", "import pi, native or Claude Code session files into the repository"),
    ("export", "cmd_convert", "export a session (pi, native or Claude Code JSONL) or a branch (Markdown, HTML)"),
    ("redact", "cmd_redact", "erase one entry's content, keeping the log verifiable (docs/audit.md)"),
    ("verify", "cmd_verify", "check session files or a repository and report each problem"),
    ("sign", "cmd_verify", "sign a checkpoint of session files or a repository's sessions with a key"),
    ("prune", "cmd_prune", "delete or archive whole sessions older than an age, listing them first"),
    ("serve", "cmd_serve", "browse sessions in a local web viewer: tree, context, replay, diff (needs sessiontree[web])"),
)


def build_parser(command: str | None = None) -> Parser:
    """The parser of every command, or only of ``command`` (what a run needs: building all 19 costs ~25 ms a start)."""
    common = _common()
    parser = Parser(prog=PROG, description=DESCRIPTION, parents=[common])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, _, text in COMMANDS:
        if command is None or name == command:
            _ARGUMENTS[name](sub.add_parser(name, help=text, description=text, parents=[common]))
    return parser


def command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs, when only the common options come before it; None when unsure (the whole parser then
    reads ``argv``, so every error and abbreviation is as it always was)."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word in ("--json", "--debug") or word.startswith("--repo="):
            i += 1
        elif word == "--repo":
            i += 2
        else:
            return word if word in _ARGUMENTS else None
    return None


def _demo_args(p: Parser) -> None:
    p.add_argument("--cwd", help="the working directory recorded in the session (default: the current one)")
    p.add_argument("--quiet", action="store_true", help="only print where the session was written")


def _ls_args(p: Parser) -> None:
    p.add_argument("dir", nargs="?", metavar="DIR", help="the repository to list (as --repo DIR)")
    p.add_argument("--cwd", help="only sessions started in this directory")
    p.add_argument("-n", "--limit", type=int, metavar="N", help="at most N sessions")
    p.add_argument("--since", metavar="TIME", help="only sessions modified at or after TIME (ISO 8601)")
    p.add_argument("--name", metavar="TEXT", help="only sessions whose name contains TEXT (ignoring case)")


def _show_args(p: Parser) -> None:
    _session_args(p)
    _salvage_arg(p)
    _full_arg(p)
    _tree_args(p)


def _context_args(p: Parser) -> None:
    _session_args(p)
    _salvage_arg(p)
    p.add_argument("--leaf", metavar="ID", help="the branch ending at this entry (default: the current leaf)")
    p.add_argument("--full", action="store_true", help="do not shorten long messages")
    p.add_argument("--last", type=int, metavar="N", help="show only the last N messages (the totals still count all)")
    p.add_argument("--format", choices=("text", "pi"), default="text",
                   help="pi: the JSON pi's buildSessionContext returns (camelCase, pi's roles), to compare with pi")
    p.add_argument("--repair", action="store_true",
                   help="the context with its tool calls and results repaired (what `check` lists; the log is unchanged)")


def _check_args(p: Parser) -> None:
    _session_args(p)
    _salvage_arg(p)
    p.add_argument("--leaf", metavar="ID", help="the branch ending at this entry (default: the current leaf)")
    p.add_argument("--repair", action="store_true",
                   help="append an error result for each unanswered call of the leaf's last turn (nothing is rewritten)")


def _search_args(p: Parser) -> None:
    p.add_argument("query", metavar="QUERY",
                   help="words that must all appear (any case); word* matches a prefix, -word leaves entries out")
    p.add_argument("--cwd", help="only sessions started in this directory")
    p.add_argument("--role", choices=("user", "assistant", "tool"), help="only messages of this role (tool: tool output)")
    p.add_argument("--since", metavar="TIME", help="only entries logged since TIME: ISO 8601 or an age (30m, 12h, 7d, 2w)")
    p.add_argument("--until", metavar="TIME", help="only entries logged until TIME (as --since)")
    p.add_argument("-n", "--limit", type=int, metavar="N", default=20, help="at most N hits (default: 20)")


def _stats_args(p: Parser) -> None:
    _session_args(p)
    _salvage_arg(p)


def _replay_args(p: Parser) -> None:
    _session_args(p)
    _salvage_arg(p)
    _full_arg(p)
    when = p.add_mutually_exclusive_group()
    when.add_argument("--to", type=int, metavar="N", help="the session after its first N events (the header is event 1)")
    when.add_argument("--at", metavar="TIME", help="the session as it was at an ISO 8601 time")
    p.add_argument("--step", action="store_true", help="print each event with what it changed in the leaf and the context")
    p.add_argument("--from", dest="start", type=int, metavar="N", default=1, help="with --step: start at event N")
    _tree_args(p)


def _fork_args(p: Parser) -> None:
    _session_args(p)
    p.add_argument("--entry", metavar="ID", help="fork at this entry (default: the current leaf)")
    p.add_argument("--position", choices=("before", "at"), default=None,
                   help="'before' a user message (to ask it again) or 'at' the entry (default: at)")
    p.add_argument("--salvage", action="store_true",
                   help="fork a source that fails verify from what can be read (the fork records the lines it skipped)")
    p.add_argument("--into", metavar="URL",
                   help="the repository the fork goes to (default: --repo, $SESSIONTREE_REPO or ./.sessions, the first "
                        "that is sessiontree's own)")


def _label_args(p: Parser) -> None:
    p.usage = f"{PROG} label [SESSION] ENTRY [LABEL] [--clear] [-s SESSION]"
    p.add_argument("words", nargs="+", metavar="[SESSION] ENTRY [LABEL]",
                   help="the entry to label (an id, a 4+ character id prefix or a label) and the label (or --clear "
                        "instead, to clear it); the session may come first")
    p.add_argument("--clear", action="store_true", help="clear the entry's label")
    _session_args(p, positional=False)


def _name_args(p: Parser) -> None:
    p.usage = f"{PROG} name [SESSION] [NAME] [--clear] [-s SESSION]"
    p.add_argument("words", nargs="*", metavar="[SESSION] [NAME]",
                   help="the new name (omit to print the current one); the session may come first, and a lone word that "
                        "names a session prints that session's name")
    p.add_argument("--clear", action="store_true", help="clear the session's name")
    _session_args(p, positional=False)


def _move_args(p: Parser) -> None:
    p.usage = f"{PROG} move [SESSION] ENTRY [--summary TEXT | --summarize] [-s SESSION]"
    p.add_argument("words", nargs="+", metavar="[SESSION] ENTRY",
                   help="the entry to move the leaf to (an id, a 4+ character id prefix, a label, or 'root': before the "
                        "first entry); the session may come first")
    p.add_argument("--summary", metavar="TEXT",
                   help="a summary of the branch being left (appended as a branch summary, the new leaf)")
    p.add_argument("--summarize", action="store_true",
                   help="summarise the branch being left with the offline extractive summariser")
    _session_args(p, positional=False)


def _compact_args(p: Parser) -> None:
    _session_args(p)
    p.add_argument("--keep-tokens", type=int, metavar="N",
                   help="keep about N tokens of recent turns verbatim (default: the library's)")
    p.add_argument("--retain-tail", action="store_true", help="store the kept messages in the compaction entry itself")
    p.add_argument("--dry-run", action="store_true", help="only report what would be summarised and kept")


def _import_args(p: Parser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="session files or directories (pi or native JSONL)")
    p.add_argument("--salvage", action="store_true",
                   help="import a file that fails verify as far as it can be read (the copy records the lines skipped)")
    p.add_argument("--format", choices=("auto", "claude-code"), default="auto",
                   help="auto: pi or native, told by the file; claude-code: a Claude Code transcript "
                        "(~/.claude/projects/PROJECT/SESSION.jsonl), one session per file")


def _export_args(p: Parser) -> None:
    _session_args(p)
    _salvage_arg(p)
    _full_arg(p)
    p.add_argument("--format", choices=("pi", "native", "claude-code", "markdown", "html"), default="markdown",
                   help="output format (default: markdown; claude-code: the Claude Code transcript lines the session holds)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--leaf", metavar="ID", help="markdown/html: the branch ending at this entry (default: the current leaf)")


def _redact_args(p: Parser) -> None:
    p.usage = f"{PROG} redact [SESSION] ENTRY --reason TEXT [--by NAME] [--vacuum] [-s SESSION]"
    p.add_argument("words", nargs="+", metavar="[SESSION] ENTRY",
                   help="the entry to erase (an id, a 4+ character id prefix or a label); the session may come first")
    p.add_argument("--reason", required=True, help="why (recorded in the log, shown by verify)")
    p.add_argument("--by", metavar="NAME", help="who asked (recorded; default: your user name)")
    p.add_argument("--vacuum", action="store_true",
                   help="then rewrite the database's files so no old row version keeps the content (SQLite: VACUUM; "
                        "PostgreSQL: VACUUM FULL of its tables, which locks them meanwhile; docs/audit.md)")
    _session_args(p, positional=False)


def _verify_args(p: Parser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH", help="session files or directories (default: the repository)")
    p.add_argument("--key", metavar="FILE",
                   help="check signed checkpoints with this key (raw HMAC key bytes, or an Ed25519 PEM key)")
    p.add_argument("--require-chain", action="store_true", help="an unchained log is an error, not a warning")
    p.add_argument("--checkpoints", metavar="FILE",
                   help="with --key: read the signed checkpoints from FILE (kept away from the log) instead of beside each file")
    p.add_argument("--head", metavar="DIGEST",
        help="the log must have this head digest (printed by an earlier verify or sign) at some line: catches a rollback")
    p.add_argument("--at-least", type=int, metavar="N", help="the log must have at least N lines: catches lines cut from the end")


def _sign_args(p: Parser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH", help="session files or directories (default: the repository)")
    p.add_argument("--key", metavar="FILE", required=True,
                   help="the signing key: raw HMAC key bytes (16 or more), or an Ed25519 private key in PEM")
    p.add_argument("--key-id", metavar="ID", help="a name for the key, recorded in the checkpoint")
    p.add_argument("--out", metavar="FILE",
                   help="append the checkpoints to FILE (keep it away from the logs) instead of beside each file")


def _serve_args(p: Parser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=0, metavar="N", help="the port to listen on (default: 0, any free port)")
    p.add_argument("--no-browser", action="store_true", help="only print the URL; do not open a browser")
    p.add_argument("--allow-writes", action="store_true",
                   help="let the viewer label, rename and move the leaf in pi's session files too (read-only by default)")


def _prune_args(p: Parser) -> None:
    p.add_argument("--older-than", required=True, metavar="AGE",
                   help="prune sessions whose last change is older than AGE: 90d, 12h, 2w, 30m, 45s (or 1w3d)")
    p.add_argument("--archive", metavar="DIR", help="first write each session to DIR/<id>.jsonl.gz (opens read-only, verifies)")
    p.add_argument("--dry-run", action="store_true", help="only list what would be pruned")
    p.add_argument("--keep-labelled", action=argparse.BooleanOptionalAction, default=True,
                   help="keep sessions with any labelled entry (default: kept)")
    p.add_argument("--keep-named", action="store_true", help="keep sessions that have a name too")
    p.add_argument("--cwd", help="only sessions started in this directory")
    p.add_argument("-y", "--yes", action="store_true",
                   help="do not ask before deleting (needed without a terminal, e.g. in cron or a script)")


_ARGUMENTS: dict[str, Callable[[Parser], None]] = {
    "demo": _demo_args, "ls": _ls_args, "show": _show_args, "context": _context_args, "check": _check_args,
    "search": _search_args,
    "stats": _stats_args, "replay": _replay_args, "fork": _fork_args, "label": _label_args, "name": _name_args,
    "move": _move_args, "compact": _compact_args, "import": _import_args, "export": _export_args,
    "redact": _redact_args, "verify": _verify_args, "sign": _sign_args, "prune": _prune_args, "serve": _serve_args,
}
