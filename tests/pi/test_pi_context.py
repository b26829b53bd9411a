"""pi 1.x context rules: context_edit entries and system messages, as pi 1.6.0 applies them."""

from __future__ import annotations

import sessiontree_pi as pi

from sessiontree import JsonlSessionStorage, Session, TextContent, UnknownMessage


def test_context_edits_follow_pis_rules(tmp_path):
    """The latest context_edit per target hides or replaces it, on the branch holding the edit."""
    path = pi.write_lines(
        tmp_path / "edits.jsonl",
        [
            pi.pi_header(),
            pi.pi_node("message", "u1", None, message=pi.user_msg("question")),
            pi.pi_node("message", "a1", "u1", message=pi.assistant_msg("answer")),
            pi.pi_node("context_edit", "e1", "a1", targetId="u1", replacement={"content": "first edit"}),
            pi.pi_node("context_edit", "e2", "e1", targetId="u1", replacement={"content": [{"type": "text", "text": "second"}]}),
            pi.pi_node("context_edit", "e3", "e2", targetId="a1", replacement={"content": "short"}),
            pi.pi_node("message", "u2", "e3", message=pi.user_msg("next")),
            pi.pi_node("context_edit", "e4", "u2", targetId="u2", replacement=None),
            pi.pi_node("context_edit", "x1", "a1", targetId="a1", replacement=None),
        ],
    )
    session = Session(JsonlSessionStorage.open(path))
    assert session.leaf_id == "x1"
    # On x1's branch only x1 applies (it hides a1); e1-e4 sit on another branch.
    assert [m.content for m in session.build_context().messages] == [(TextContent(text="question"),)]
    edited = session.build_context(leaf_id="e4").messages
    assert [(m.role, m.content) for m in edited] == [
        ("user", (TextContent(text="second"),)),
        ("assistant", (TextContent(text="short"),)),
    ]


def test_compaction_system_message_leads_and_kept_system_messages_drop(tmp_path):
    """A compaction's systemMessage comes before its summary; system messages it keeps are dropped."""
    system = {"role": "system", "content": "You are terse.", "timestamp": 5}
    path = pi.write_lines(
        tmp_path / "system.jsonl",
        [
            pi.pi_header(),
            pi.pi_node("message", "s1", None, message={"role": "system", "content": "You are kind.", "timestamp": 1}),
            pi.pi_node("message", "u1", "s1", message=pi.user_msg("q")),
            pi.pi_node("message", "s2", "u1", message={"role": "system", "content": "old", "timestamp": 2}),
            pi.pi_node("message", "a1", "s2", message=pi.assistant_msg("a")),
            pi.pi_node("compaction", "c1", "a1", summary="S", firstKeptEntryId="u1", tokensBefore=3, systemMessage=system),
            pi.pi_node("usage", "g1", "c1", kind="cache_warm", provider="p", model="m", usage={"input": 1}),
            pi.pi_node("message", "s3", "g1", message={"role": "system", "content": "new", "timestamp": 6}),
        ],
    )
    session = Session(JsonlSessionStorage.open(path))
    messages = session.build_context().messages
    assert [m.role for m in messages] == ["system", "compaction_summary", "user", "assistant", "system"]
    assert messages[0] == UnknownMessage(role="system", data=system)
    assert session.get_session_stats().entries_by_type["usage"] == 1


def test_pi_context_rules_apply_to_native_copies_when_asked(tmp_path):
    """A native copy keeps context_edit entries verbatim; pi_context_options gives them pi's meaning."""
    from sessiontree.pi.pi_convert import import_pi
    from sessiontree.pi.pi_storage import pi_context_options

    src = pi.write_lines(
        tmp_path / "edits.jsonl",
        [pi.pi_header(), pi.pi_node("message", "u1", None, message=pi.user_msg("q")), pi.pi_node("context_edit", "e1", "u1", targetId="u1", replacement=None)],
    )
    import_pi(src, tmp_path / "native.jsonl")
    plain = Session(JsonlSessionStorage.open(tmp_path / "native.jsonl"))
    assert len(plain.build_context().messages) == 1
    assert plain.build_context(pi_context_options()).messages == []


def test_tool_pair_repair_changes_nothing_for_pi_users():
    """On every shared pi fixture: the default context is still pi's golden, and at every leaf the repaired context
    differs from it only by what check_context reports (nothing, when it reports nothing)."""
    import json

    from sessiontree import SessionContextBuildOptions, repair_tool_pairs

    repair = SessionContextBuildOptions(entry_transforms=[repair_tool_pairs])
    fixtures = sorted(pi.fixtures_dir().glob("*.jsonl"))
    assert fixtures
    for path in fixtures:
        before = path.read_bytes()
        session = Session(JsonlSessionStorage.open(path))
        expected = pi.expected_view(json.loads(path.with_name(f"{path.stem}.expected.json").read_text()))
        view = pi.pi_view(session)
        assert (view["context"], view["contextMessages"]) == (expected["context"], expected["contextMessages"])
        for entry in session.get_entries():
            if entry.type == "leaf":
                continue
            plain = session.build_context(leaf_id=entry.id).messages
            if not session.check_context(leaf_id=entry.id):
                assert session.build_context(repair, leaf_id=entry.id).messages == plain
        session.close()
        assert path.read_bytes() == before
