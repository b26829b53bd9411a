"""Redaction on write (issue 22): secrets never reach a file, the live session sees what the log holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree import (
    AssistantMessage,
    JsonlSessionRepo,
    Session,
    SessionError,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessiontree.audit.verify import verify
from sessiontree.content.redaction import DEFAULT_RULES, Rule, SecretRedactor, redact_entry
from sessiontree.storage.jsonl import JsonlSessionStorage

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
SECRETS = {
    "aws-access-key-id": AWS_KEY,
    "aws-secret-access-key": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "github-token": "ghp_" + "a1B2c3D4e5" * 4,
    "gitlab-token": "glpat-" + "x" * 20,
    "slack-token": "xoxb-1234567890-abcdefghij",
    "slack-webhook": "https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXX",
    "google-api-key": "AIza" + "S" * 35,
    "anthropic-api-key": "sk-ant-api03-" + "k" * 30,
    "stripe-key": "sk_live_" + "4" * 24,
    "openai-api-key": "sk-proj-" + "a" * 20 + "T3BlbkFJ" + "b" * 20,
    "private-key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n-----END OPENSSH PRIVATE KEY-----",
    "bearer-token": "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
    "url-password": "postgresql://admin:s3cr3t-pw@db.internal:5432/prod",
}


def secret_part(rule: str, text: str) -> str:
    """The part of a sample that is the secret itself (what must never be stored)."""
    return {"aws-secret-access-key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "bearer-token": "eyJhbGciOiJIUzI1NiJ9.payload.sig", "url-password": "s3cr3t-pw"}.get(rule, text)


@pytest.mark.parametrize("rule", sorted(SECRETS))
def test_each_rule_replaces_its_secret_with_a_marker_naming_it(rule: str) -> None:
    redact = SecretRedactor()
    text = f"before {SECRETS[rule]} after"
    out = redact(text)
    assert secret_part(rule, SECRETS[rule]) not in out
    assert f"[REDACTED:{rule}]" in out
    assert out.startswith("before ") and out.endswith(" after")


def test_the_readable_part_of_a_match_stays() -> None:
    out = SecretRedactor()("curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz' https://bob:pw1234@example.com/x")
    assert "Authorization: Bearer [REDACTED:bearer-token]" in out
    assert "https://bob:[REDACTED:url-password]@example.com/x" in out


@pytest.mark.parametrize("text", [
    "the quick brown fox: a jump over the lazy dog", "AKIA is a prefix, too short", "see https://example.com/a:b",
    "snake_case_names and kebab-case-names", "Bearer of bad news", "sk-short", "A" * 40,
])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert SecretRedactor()(text) is text


@given(st.text(max_size=200))
@settings(max_examples=300)
def test_redacting_is_idempotent_and_keeps_text_without_secrets(text: str) -> None:
    redact = SecretRedactor()
    once = redact(text)
    assert redact(once) == once
    if not redact.findings(text):
        assert once == text


def test_a_known_aws_key_never_reaches_any_file(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "repo")
    session = repo.create(cwd="/p", name=f"deploy with {AWS_KEY}", metadata={"note": AWS_KEY})
    session.append_message(UserMessage(f"my key is {AWS_KEY}"))
    session.append_message(AssistantMessage(
        [TextContent(f"using {AWS_KEY}"), ToolCall(id="t1", name="shell", arguments={"cmd": f"export KEY={AWS_KEY}"})],
        provider="p", model="m"))
    session.append_message(ToolResultMessage(tool_call_id="t1", tool_name="shell", content=[TextContent(AWS_KEY)],
                                             details={"env": {"KEY": AWS_KEY}}))
    session.append_custom_entry("app", {"nested": [AWS_KEY]})
    session.append_label_change(session.leaf_id, f"label {AWS_KEY}")
    session.move_to(session.get_entries()[0].id, {"summary": f"left a branch with {AWS_KEY}"})
    session.compact(lambda prep, *_: f"summary with {AWS_KEY}", keep_recent_tokens=0)
    fork = repo.fork(session.id, position="at")
    for path in (tmp_path / "repo").rglob("*"):
        if path.is_file():
            assert AWS_KEY.encode() not in path.read_bytes(), path
    # the live session holds what the file holds
    reopened = repo.open(session.id)
    assert [e.id for e in reopened.get_entries()] == [e.id for e in session.get_entries()]
    assert reopened.build_context() == session.build_context()
    assert "[REDACTED:aws-access-key-id]" in str(session.build_context().messages)
    assert verify(session.storage.path).ok and verify(fork.storage.path).ok


def test_redaction_can_be_turned_off_and_apps_add_their_own(tmp_path: Path) -> None:
    off = Session(JsonlSessionStorage.create(tmp_path / "off.jsonl"), redactors=None)
    off.append_message(UserMessage(AWS_KEY))
    assert AWS_KEY.encode() in (tmp_path / "off.jsonl").read_bytes()

    def customer_ids(text: str) -> str:
        return text.replace("CUST-1234", "[customer]")

    own = Session(JsonlSessionStorage.create(tmp_path / "own.jsonl"), redactors=[SecretRedactor(), customer_ids])
    own.append_message(UserMessage(f"CUST-1234 has {AWS_KEY}"))
    assert own.build_context().messages[-1].content == "[customer] has [REDACTED:aws-access-key-id]"
    extra_rule = SecretRedactor(extra_rules=[Rule("ticket", r"TICKET-\d+", gate="-")])
    assert extra_rule("see TICKET-42") == "see [REDACTED:ticket]"
    with pytest.raises(TypeError, match="callable"):
        Session(JsonlSessionStorage.create(tmp_path / "bad.jsonl"), redactors=["not callable"])
    with pytest.raises(ValueError, match="gate"):
        Rule("x", "y", gate="ab")


def test_an_entry_without_secrets_comes_back_as_the_same_object() -> None:
    message = AssistantMessage([TextContent("plain words"), ToolCall(id="c", name="read", arguments={"path": "a.py"})],
                               provider="p", model="m")
    from sessiontree.domain.events import MessageAppended

    event = MessageAppended(originator_id="s", originator_version=2, timestamp="t", id="e", parent_id=None, message=message)
    assert redact_entry(event, (SecretRedactor(),)) is event


def test_a_retry_with_the_same_id_matches_the_redacted_first_append(tmp_path: Path) -> None:
    session = Session(JsonlSessionStorage.create(tmp_path / "s.jsonl"))
    first = session.append_message(UserMessage(f"key {AWS_KEY}"), entry_id="fixed-id")
    assert session.append_message(UserMessage(f"key {AWS_KEY}"), entry_id="fixed-id") == first
    assert len(session.get_entries()) == 1


def test_every_default_rule_has_a_sample() -> None:
    from sessiontree_secrets import SAMPLES

    assert {rule.name for rule in DEFAULT_RULES} <= set(SECRETS) | {fmt for fmt, _, _ in SAMPLES}


def _x_to_y(text: str) -> str:  # a redactor that changes many random strings
    return text.replace("x", "y") if "x" in text else text


@given(st.data())
@settings(max_examples=150, deadline=None)
def test_the_quick_path_for_messages_agrees_with_the_walk(data: st.DataObject) -> None:
    import sessiontree_strategies as strat

    from sessiontree.content.redaction import _Walk

    entry = data.draw(strat.entry_events())
    for redactors in ((_x_to_y,), (SecretRedactor(),), (_x_to_y, SecretRedactor())):
        walk = _Walk(redactors)
        quick, full = walk.entry(entry), walk.obj(entry)
        assert quick == full
        assert (quick is entry) == (full is entry)


def test_a_redacted_key_of_an_unknown_block_or_role_replaces_the_old_one() -> None:
    from sessiontree.domain.events import MessageAppended
    from sessiontree.domain.messages import UnknownContent, UnknownMessage

    for tag, make in (("type", lambda data: UserMessage([UnknownContent(type="weird", data=data)])),
                      ("role", lambda data: UnknownMessage(role="weird", data=data))):
        data = {"a": 1, tag: "weird", f"k{AWS_KEY}": "v", "z": 2}
        event = MessageAppended(originator_id="s", originator_version=2, timestamp="t", id="e", parent_id=None,
                                message=make(data))
        out = redact_entry(event, (SecretRedactor(),)).message
        got = out.content[0].data if tag == "type" else out.data
        # the key redacted in its place, the old one gone, the tag kept where it was
        assert list(got.items()) == [("a", 1), (tag, "weird"), ("k[REDACTED:aws-access-key-id]", "v"), ("z", 2)]

def test_keys_str_subclasses_and_images() -> None:
    import enum

    from sessiontree import ImageContent
    from sessiontree.domain.events import MessageAppended

    class Kind(enum.StrEnum):
        KEY = AWS_KEY

    base64_with_a_lookalike = "iVBORw0K" + "AIza" + "B" * 35 + "+/" + "Q" * 20
    message = UserMessage([TextContent(Kind.KEY), ImageContent(base64_with_a_lookalike, "image/png")],
                          extra={"note": {AWS_KEY: "as a key"}})
    event = MessageAppended(originator_id="s", originator_version=2, timestamp="t", id="e", parent_id=None, message=message)
    out = redact_entry(event, (SecretRedactor(),))
    assert AWS_KEY not in str(out)
    assert out.message.content[1].data == base64_with_a_lookalike  # image data is not text


@pytest.mark.parametrize("text", [
    'url = f"postgresql://{user}:{password}@{host}/db"', "postgres://${PGUSER}:${PGPASSWORD}@db/app",
    "The Bearer authentication/authorization scheme", 'if pem.startswith("-----BEGIN PRIVATE KEY-----"):\n    load(pem)',
])
def test_templates_and_prose_that_look_like_secrets_are_left_alone(text: str) -> None:
    assert SecretRedactor()(text) == text


@pytest.mark.parametrize("text", [
    "sk-" * 10_000, "task-" * 6_000, "-----BEGIN RSA PRIVATE KEY-----" * 1_000, "://a:" * 6_000, "Bearer 1" * 4_000,
    "glpat-!" * 5_000,
])
def test_repetitive_input_is_searched_in_linear_time(text: str) -> None:
    """Every repetition in the rules is bounded: these took seconds with unbounded ones (a regression would show here
    as a test taking seconds to minutes, and in benchmarks/run.py's append rows)."""
    assert SecretRedactor()(text) == text


@pytest.mark.parametrize("redactors", ["default", None])
def test_a_lone_surrogate_is_an_invalid_entry_with_or_without_the_redactor(tmp_path: Path, redactors: object) -> None:
    # the default redactor's prefilter encodes the text as UTF-8; it must refuse as the encoder does, not leak its error
    repo = JsonlSessionRepo(tmp_path) if redactors == "default" else JsonlSessionRepo(tmp_path, redactors=None)
    session = repo.create(cwd="/x")
    with pytest.raises(SessionError) as refused:
        session.append_message(UserMessage(content="a\ud800b", timestamp=1))
    assert refused.value.code == "invalid_entry"
    assert session.get_entries() == [] and repo.open(session.id).get_entries() == []
