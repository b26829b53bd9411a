"""The ``sessiontree`` dispatcher: parse (``cli/parser.py``), run the command, report.

A failure prints one line on stderr and exits with status 1 (with ``--json``, a JSON error); ``--debug`` shows the
traceback instead. Command modules are imported only when their command runs, so ``sessiontree --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from importlib import import_module
from typing import Any, TextIO

from sessiontree.cli import output
from sessiontree.cli.output import PROG, SALVAGE_HINT, CliError, error_line, warn
from sessiontree.cli.parser import COMMANDS, build_parser, command_of

# The positional forms of label/name/move/redact, by (command, --clear) and word count: the session, when given, comes first.
_WORD_FORMS: dict[tuple[str, bool], dict[int, tuple[str, ...]]] = {
    ("label", False): {1: ("entry",), 2: ("entry", "text"), 3: ("session", "entry", "text")},
    ("label", True): {1: ("entry",), 2: ("session", "entry")},
    ("name", False): {0: (), 1: ("text",), 2: ("session", "text")},
    ("name", True): {0: (), 1: ("session",)},
    ("move", False): {1: ("entry",), 2: ("session", "entry")},
    ("redact", False): {1: ("entry",), 2: ("session", "entry")},
}


def _words(args: argparse.Namespace) -> None:
    """Spread label/name/move/redact's words over their fields."""
    words = args.__dict__.pop("words")
    form = _WORD_FORMS[args.command, bool(getattr(args, "clear", False))].get(len(words))
    if form is None:
        raise CliError(f"{args.command}: unexpected words ({' '.join(words)}); see `{PROG} {args.command} --help`")
    args.entry = args.text = None
    for field, word in zip(form, words, strict=True):
        if field == "session" and args.session is not None:
            raise CliError("name the session once: as an argument or with --session, not both")
        setattr(args, field, word)


def _normalise(args: argparse.Namespace) -> argparse.Namespace:
    for name, default in (("repo", None), ("json", False), ("debug", False)):
        if not hasattr(args, name):
            setattr(args, name, default)
    if hasattr(args, "words"):
        _words(args)
    if hasattr(args, "session_pos"):
        if args.session_pos is not None and args.session is not None:
            raise CliError("name the session once: as an argument or with --session, not both")
        args.session = args.session_pos if args.session_pos is not None else args.session
    return args


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), run the command, return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    output.JSON_ERRORS = "--json" in argv  # before parsing: a usage error is JSON too
    parser = build_parser(command_of(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.command is None:  # bare ``sessiontree``: what it can do
        parser.print_help()
        return 0
    debug = bool(getattr(args, "debug", False))
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return _dispatch(args, debug)


def _show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A library warning (a torn last line, a duplicate key) in the house style, without Python's source location."""
    warn(" ".join(str(message).split()))


def _dispatch(args: argparse.Namespace, debug: bool) -> int:
    try:
        args = _normalise(args)
        modules = {command: module for command, module, _ in COMMANDS}
        module = import_module(f"sessiontree.cli.{modules[args.command]}")
        handler: Any = getattr(module, "cmd_" + args.command)
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        error_line("interrupted", code="interrupted")
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
        message, code = _describe(exc)
        if code == "corrupt" and getattr(args, "salvage", None) is False:  # a command that could read past it
            message += f" ({SALVAGE_HINT})"
        error_line(message, code)
        return 1


def _describe(exc: Exception) -> tuple[str, str]:
    """The error's one-line message and its code (``--json`` reports both)."""
    from sessiontree.domain.errors import SessionError

    if isinstance(exc, SessionError):
        return str(exc), exc.code
    if isinstance(exc, CliError):
        return str(exc), exc.code
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror or exc}{where}", "storage"
    return f"{type(exc).__name__}: {exc}", "error"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
