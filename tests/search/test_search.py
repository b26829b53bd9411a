"""repo.search on every backend: what is indexed, the filters, the active branch, appends and deletions."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sessiontree_searchkit as sk
import sessiontree_testkit as kit

from sessiontree import SearchHit


def test_every_kind_of_text_is_found_with_its_kind(repo: Any) -> None:
    """Message text, tool call names and arguments, tool output, summaries, labels, names and custom messages."""
    kinds = sk.build_corpus(repo)
    for word, kind in kinds.items():
        hits = repo.search(word)
        assert kind in {h.kind for h in hits}, (word, hits)
        assert all(isinstance(h, SearchHit) for h in hits)


def test_a_hit_carries_where_it_is_and_the_match_marked(repo: Any) -> None:
    sk.build_corpus(repo)
    [hit] = repo.search("walrus")
    assert (hit.session_id, hit.entry_id, hit.kind) == ("s-alpha", "e-tool", "tool")
    assert hit.timestamp.startswith("2026-11-29T11:30") and hit.timestamp.endswith("Z")
    assert "**walrus**" in hit.snippet and hit.session_name == "project falcon" and hit.cwd == "/home/me/alpha"
    assert hit.context_command == "sessiontree context s-alpha --leaf e-tool"
    assert hit.score > 0 or hit.score == 0
    assert hit.to_dict()["context_command"] == hit.context_command


def test_hits_match_the_brute_force_scan(repo: Any) -> None:
    sk.build_corpus(repo)
    for query in sk.QUERIES:
        assert sk.found(repo, query) == sk.brute_force(repo, query), query


def test_the_active_branch_flag_follows_the_leaf(repo: Any) -> None:
    sk.build_corpus(repo)
    hits = sk.found(repo, "zebra")
    assert hits[("s-alpha", "e-user")] and hits[("s-alpha", "e-user2")] and not hits[("s-alpha", "e-asst")]
    session = repo.open("s-alpha")
    session.move_to("e-tool")
    session.close()
    hits = sk.found(repo, "zebra")
    assert hits[("s-alpha", "e-asst")] and hits[("s-alpha", "e-user")] and not hits[("s-alpha", "e-user2")]


def test_an_append_is_found_by_the_next_search_even_from_another_repository_object(make_repo: Any) -> None:
    reader, writer = make_repo(), make_repo()
    session = writer.create(session_id="s-live")
    session.append_message(kit.user("first words"))
    assert reader.search("capybara") == []
    entry = session.append_message(kit.user("a capybara appears"))
    assert [(h.session_id, h.entry_id) for h in reader.search("capybara")] == [("s-live", entry)]
    session.append_session_info("capybara club")
    assert {h.kind for h in reader.search("capybara")} == {"user", "session_info"}
    session.close()


def test_a_deleted_session_is_no_longer_found(make_repo: Any) -> None:
    repo = make_repo()
    sk.build_corpus(repo)
    assert {h.session_id for h in repo.search("zebra")} == {"s-alpha", "s-beta"}
    make_repo().delete("s-beta")
    assert {h.session_id for h in repo.search("zebra")} == {"s-alpha"}
    again = repo.create(session_id="s-beta")  # the same id again, with other entries
    again.append_message(kit.user("nothing of the kind"))
    again.close()
    assert {h.session_id for h in repo.search("zebra")} == {"s-alpha"}
    assert sk.found(repo, "kind") == sk.brute_force(repo, "kind")


def test_filters_narrow_the_hits(repo: Any) -> None:
    sk.build_corpus(repo)
    assert {h.kind for h in repo.search("zebra", role="user")} == {"user"}
    assert {h.entry_id for h in repo.search("zebra", role="assistant")} == {"e-asst"}
    assert {h.session_id for h in repo.search("zebra", cwd="/home/me/beta")} == {"s-beta"}
    assert {h.session_id for h in repo.search("zebra", cwd="/home/me/beta/")} == {"s-beta"}
    assert {h.session_id for h in repo.search("zebra", session="s-alpha")} == {"s-alpha"}
    assert len(repo.search("zebra", limit=2)) == 2
    times = sorted(h.timestamp for h in repo.search("zebra"))
    assert [h.timestamp for h in repo.search("zebra", since=times[-1])] == [times[-1]]
    assert [h.timestamp for h in repo.search("zebra", until=times[0])] == [times[0]]
    assert repo.search("zebra", since=kit.T0 + timedelta(days=1)) == []
    assert repo.search("zebra", until="2026-11-28") == []
    assert len(repo.search("zebra", until="2026-11-29")) == len(times)  # a day means up to its end
    assert len(repo.search("zebra", since="100000d")) == len(times)


@pytest.mark.parametrize("query", ["", "   ", "-zebra", "***", "--"])
def test_a_query_with_no_word_is_refused(repo: Any, query: str) -> None:
    with pytest.raises(ValueError, match="no word to search for"):
        repo.search(query)


@pytest.mark.parametrize("options", [{"limit": 0}, {"limit": True}, {"since": "yesterday"}, {"until": "7 parsecs"}])
def test_bad_options_are_refused(repo: Any, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"limit|cannot read the time"):
        repo.search("zebra", **options)


def test_a_session_another_repository_object_indexed_then_deleted_is_not_found(make_repo: Any) -> None:
    """Two readers of one index (two processes): what one indexed and is gone since is dropped by the other too."""
    first, second = make_repo(), make_repo()
    sk.build_corpus(first)
    assert first.search("zebra")
    session = second.create(session_id="s-brief")
    session.append_message(kit.user("an ephemeral zebra"))
    session.close()
    assert [h.session_id for h in second.search("ephemeral")] == ["s-brief"]
    second.delete("s-brief")
    assert first.search("ephemeral") == []
    assert sk.found(first, "zebra") == sk.brute_force(first, "zebra")
