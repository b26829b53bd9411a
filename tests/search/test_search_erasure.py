"""Erased content leaves the search index (issues 21 and 22) on every backend, even when the erasure was recorded
but its line not yet rewritten."""

from __future__ import annotations

from typing import Any

import pytest

from sessiontree import SessionError, UserMessage


def test_an_erased_entry_is_no_longer_found(repo: Any) -> None:
    session = repo.create(cwd="/p")
    kept = session.append_message(UserMessage("zanzibar is kept here"))
    erased = session.append_message(UserMessage("zanzibar lives at 12 Long Road"))
    assert {h.entry_id for h in repo.search("zanzibar")} == {kept, erased}  # indexed before the erasure
    session.redact(erased, reason="customer asked")
    assert {h.entry_id for h in repo.search("zanzibar")} == {kept}
    assert repo.search("long road") == []
    session.append_message(UserMessage("zanzibar again"))
    assert len(repo.search("zanzibar")) == 2


def test_a_recorded_erasure_hides_the_entry_before_its_line_is_rewritten(repo: Any, monkeypatch: Any) -> None:
    session = repo.create(cwd="/p")
    erased = session.append_message(UserMessage("zanzibar lives at 12 Long Road"))
    assert [h.entry_id for h in repo.search("zanzibar")] == [erased]

    def interrupted(*args: Any) -> None:
        raise SessionError("storage", "interrupted")

    monkeypatch.setattr(type(session.storage), "replace_line", interrupted)
    with pytest.raises(SessionError):
        session.redact(erased, reason="r")
    assert repo.search("zanzibar") == []
