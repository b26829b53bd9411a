"""Test kit for search (tests/search/test_search*.py): a corpus every backend gets, and the brute-force scan.

The brute-force scan is the reference: it opens every session of a repository, reads each entry's wire form through
the codec, and keeps those whose words match the query, so whatever an index returns can be checked against the log.
"""

from __future__ import annotations

from typing import Any

import sessiontree_testkit as kit

from sessiontree import CustomMessage, TextContent, ToolCall  # noqa: F401  (CustomMessage: for callers)
from sessiontree.search.search_text import entry_text, parse_query, words
from sessiontree.wire.codec import native_codec

Key = tuple[str, str]  # (session id, entry id)


def brute_force(repo: Any, query: str, *, role: str | None = None, session: str | None = None) -> dict[Key, bool]:
    """Every (session, entry) of ``repo`` matching ``query``, with whether it is on its session's current branch."""
    parsed = parse_query(query)
    codec = native_codec()
    out: dict[Key, bool] = {}
    for info in repo.list():
        if session is not None and info.id != session:
            continue
        opened = repo.open(info.id)
        try:
            branch = {e.id for e in opened.get_branch()}
            for entry in opened.get_entries():
                found = entry_text(codec.event_dict(entry))
                if found is None or (role is not None and found[0] != role):
                    continue
                if parsed.matches(words(found[1])):
                    out[info.id, entry.id] = entry.id in branch
        finally:
            opened.close()
    return out


def found(repo: Any, query: str, **filters: Any) -> dict[Key, bool]:
    """What ``repo.search`` returns, as the brute-force scan's form (a limit high enough for every hit)."""
    filters.setdefault("limit", 10_000)
    return {(h.session_id, h.entry_id): h.on_active_branch for h in repo.search(query, **filters)}


def build_corpus(repo: Any) -> dict[str, str]:
    """Two sessions holding every kind of text search sees, with fixed ids; {word: kind of the entry holding it}."""
    first = repo.create(cwd="/home/me/alpha", name="project falcon", session_id="s-alpha")
    question = first.append_message(kit.user("How do I find the zebra files?"), entry_id="e-user")
    call = ToolCall(id="call_1", name="grep_files", arguments={"pattern": "quokka", "path": "src"})
    first.append_message(kit.assistant("Searching for the zebra now.", tool_calls=[call]), entry_id="e-asst")
    first.append_message(kit.tool_result("call_1", "grep_files", "src/walrus.py: quokka = 1"), entry_id="e-tool")
    first.append_compaction("The otter summary of earlier turns.", "e-user", 1000, entry_id="e-compact")
    first.append_label_change(question, "milestone marker", entry_id="e-label")
    first.move_to(question, {"summary": "Left the heron branch behind."})
    first.append_message(kit.user("Another zebra question on the new branch"), entry_id="e-user2")
    first.close()
    second = repo.create(cwd="/home/me/beta", session_id="s-beta")
    second.append_custom_message_entry("note", "A custom lynx note about the zebra", entry_id="e-custom")
    second.append_message(kit.user("What about PostgreSQL full-text search?"), entry_id="e-pg")
    second.append_session_info("beta session", entry_id="e-name")
    second.close()
    return {"zebra": "user", "grep": "assistant", "quokka": "assistant", "walrus": "tool", "otter": "compaction",
            "milestone": "label", "heron": "branch_summary", "falcon": "session_info", "lynx": "custom_message"}


QUERIES = ("zebra", "zebra -lynx", "quok*", "files", "the", "zebra branch", "heron", "falcon", "postgresql full text",
           "src", "grep files", "e*", "nothing_here_at_all", "beta", "milestone -marker", "1", "call*")
