"""Only the command being run gets its parser built (issue 19's fixed costs); what it reads must not change."""

from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree.cli.parser import COMMANDS, build_parser, command_of

NAMES = [name for name, _, _ in COMMANDS]
WORDS = [*NAMES, "--json", "--debug", "--repo", "--repo=x", "--rep", "-s", "S", "--leaf", "e1", "--full", "--help",
         "--format", "pi", "--last", "3", "--clear", "--to", "2", "--older-than", "7d", "-h", "bogus", "--", "x.jsonl"]


def _parse(parser, argv):
    """What a parser makes of ``argv``: its namespace, or its exit status and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return ("ok", vars(parser.parse_args(argv)))
    except SystemExit as exc:
        return ("exit", exc.code, out.getvalue(), err.getvalue())


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=6))
def test_the_parser_of_one_command_reads_any_argv_as_the_whole_parser_does(argv):
    assert _parse(build_parser(command_of(argv)), argv) == _parse(build_parser(), argv)


@pytest.mark.parametrize("name", NAMES)
def test_each_command_is_found_after_the_common_options_and_its_help_is_unchanged(name):
    for argv in ([name], ["--json", name], ["--repo", name, name], ["--repo=r", "--debug", name]):
        assert command_of(argv) == name
        assert _parse(build_parser(name), [*argv, "--help"]) == _parse(build_parser(), [*argv, "--help"])
    assert command_of(["--rep", "r", name]) is None  # an abbreviation: left to the whole parser
    assert command_of(["--repo"]) is None and command_of([]) is None
