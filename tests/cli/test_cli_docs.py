"""docs/cli.md is executed: every ``sessiontree`` line of its ```sh blocks runs, in order.

A block fenced ```sh no-run is shown but not run; one fenced ```sh fails must fail with
one error line and exit status 1. All commands of the page share one empty directory.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from sessiontree_cli_runner import run

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
FENCE = re.compile(r"^```sh(?P<flags>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def commands(text: str) -> list[tuple[list[str], set[str]]]:
    """The ``sessiontree`` command lines of the page's sh blocks, with their block's flags."""
    out = []
    for match in FENCE.finditer(text):
        flags = set(match.group("flags").split())
        for line in match.group("body").splitlines():
            if line.startswith("sessiontree "):
                out.append((shlex.split(line)[1:], flags))
    return out


def test_every_command_of_the_page_is_documented_and_runs(tmp_path: Path) -> None:
    """Each documented command succeeds (or fails cleanly where the page says so)."""
    steps = commands(DOC.read_text(encoding="utf-8"))
    documented = {args[0] for args, _ in steps}
    assert documented >= {"demo", "ls", "show", "context", "stats", "replay", "fork", "label", "name",
                          "move", "compact", "import", "export", "verify"}
    for args, flags in steps:
        if "no-run" in flags:
            continue
        run(tuple(args), tmp_path, fails="fails" in flags)
