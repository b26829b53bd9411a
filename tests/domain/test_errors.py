"""SessionError: one class, a closed set of SPEC 5 codes, messages that say where."""

from __future__ import annotations

import pytest

from sessiontree.domain.errors import CODES, SessionError


def test_the_codes_are_those_of_spec_5():
    """Exactly the eight SPEC 5 codes exist."""
    assert {
        "not_found", "already_exists", "invalid_entry", "invalid_fork_target",
        "conflict", "corrupt", "unsupported_version", "storage",
    } == CODES


def test_an_unknown_code_is_a_programming_error():
    """Raising with a code outside the set fails loudly."""
    with pytest.raises(ValueError, match="'oops'"):
        SessionError("oops", "x")


def test_the_message_names_file_and_line():
    """A file error reads ``code: path:line: message``."""
    error = SessionError("corrupt", "bad JSON", path="s.jsonl", line=3)
    assert str(error) == "corrupt: s.jsonl:3: bad JSON"
    assert (error.code, error.message, error.path, error.line) == ("corrupt", "bad JSON", "s.jsonl", 3)
    assert str(SessionError("not_found", "entry 'a'")) == "not_found: entry 'a'"
