"""Redaction round three (issue 32, item 5): a corpus of secrets in their issuers' formats, common ones the first rules
missed (a service-account key with escaped newlines, URL passwords with % and $, a PGP key with a Comment header), the
names a writer chooses, and the one-pass prefilter agreeing with running every rule."""

from __future__ import annotations

import glob
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sessiontree_secrets import LOOKALIKES, SAMPLES

from sessiontree import (
    AssistantMessage,
    JsonlSessionRepo,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)
from sessiontree.content.redaction import DEFAULT_RULES, Rule, SecretRedactor, marker

ROOT = Path(__file__).resolve().parents[2]  # the project


def test_the_corpus_is_large_and_varied() -> None:
    assert len(SAMPLES) >= 50
    assert len({fmt for fmt, _, _ in SAMPLES}) >= 40


@pytest.mark.parametrize(("fmt", "text", "secret"), SAMPLES, ids=[f"{n}-{fmt}" for n, (fmt, _, _) in enumerate(SAMPLES)])
def test_every_secret_of_the_corpus_is_replaced(fmt: str, text: str, secret: str) -> None:
    out = SecretRedactor()(text)
    assert secret not in out
    assert "[REDACTED:" in out


@pytest.mark.parametrize("text", LOOKALIKES)
def test_lookalikes_are_left_alone(text: str) -> None:
    assert SecretRedactor()(text) == text


def _fixture_strings() -> list[str]:
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(key)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    shared = ROOT.parent / "shared" / "fixtures"
    for name in sorted(glob.glob(str(shared / "**" / "*.json*"), recursive=True)):
        text = Path(name).read_text()
        if name.endswith(".json"):
            walk(json.loads(text))
            continue
        for line in text.splitlines():
            if line.strip():
                walk(json.loads(line))
    return found


def test_no_false_positive_on_real_pi_sessions() -> None:
    strings = _fixture_strings()
    if not strings:
        pytest.skip("the shared pi fixtures are not beside the project")
    redact = SecretRedactor()
    assert [text[:80] for text in strings if redact.findings(text)] == []


def test_the_three_formats_round_two_missed() -> None:
    redact = SecretRedactor()
    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" * 3
    service_account = ('{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\n' + body
                       + '\\n-----END PRIVATE KEY-----\\n", "client_email": "a@b.iam.gserviceaccount.com"}')
    out = redact(service_account)
    assert body not in out and '"client_email": "a@b.iam.gserviceaccount.com"' in out
    assert redact("redis://default:p%40ss%21word@cache:6379") == "redis://default:[REDACTED:url-password]@cache:6379"
    assert redact("mongodb://admin:Pa$$w0rd@db/") == "mongodb://admin:[REDACTED:url-password]@db/"
    assert redact("amqp://user%40corp:s3cret@mq/") == "amqp://user%40corp:[REDACTED:url-password]@mq/"
    assert redact("postgres://$USER:$PASSWORD@db/app") == "postgres://$USER:$PASSWORD@db/app"
    pgp = ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nComment: GPGTools - https://gpgtools.org\n\nlQOYBF" + "x" * 80
           + "\n=AbCd\n-----END PGP PRIVATE KEY BLOCK-----")
    assert redact(pgp) == marker("private-key")


def test_names_a_writer_chooses_are_redacted_and_calls_still_pair(tmp_path: Path) -> None:
    token = "ghp_" + "a1B2c3D4e5" * 4
    session = JsonlSessionRepo(tmp_path).create()
    session.append_message(AssistantMessage(
        content=[ThinkingContent("hm"),
                 ToolCall(id=f"call-{token}", name=f"tool-{token}", arguments={})],
        provider=f"p-{token}", model=f"m-{token}", timestamp=1))
    session.append_message(ToolResultMessage(tool_call_id=f"call-{token}", tool_name=f"tool-{token}",
                                             content=[TextContent("ok")], timestamp=2))
    session.append_model_change(f"prov-{token}", f"model-{token}")
    session.append_custom_entry(f"app-{token}", {"x": 1})
    data = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert token.encode() not in data
    call, result = session.build_context().messages[-2:]
    assert call.content[-1].id == result.tool_call_id == "call-[REDACTED:github-token]"


def test_a_thinking_signature_is_left_as_the_provider_wrote_it() -> None:
    from sessiontree.content.redaction import redact_entry
    from sessiontree.domain.events import MessageAppended

    signature = "EqQBCkgIARABGAIiQL" + "AKIAIOSFODNN7EXAMPLE" + "xyz"
    block = ThinkingContent("thinking", signature=signature)
    event = MessageAppended(originator_id="s", originator_version=2, id="e1", parent_id=None, timestamp="t",
                            message=AssistantMessage(content=[block], timestamp=1))
    out = redact_entry(event, (SecretRedactor(),))
    assert out.message.content[0].signature == signature


def _every_rule(text: str) -> str:
    """The redactor without its prefilter: every rule, in order, on every string."""
    for rule in DEFAULT_RULES:
        pattern = re.compile(rule.pattern)
        redact = SecretRedactor([rule])
        if pattern.search(text):
            text = redact(text)
    return text


_PIECES = [text for _, text, _ in SAMPLES] + LOOKALIKES + [
    lit for rule in DEFAULT_RULES for lit in rule.literals] + [" ", "\n", "=", ":", "@", "/", "x" * 40, "0123456789"]


@given(st.lists(st.sampled_from(_PIECES), max_size=6), st.text(max_size=30))
@settings(max_examples=300, deadline=None)
def test_the_prefilter_changes_nothing_but_speed(pieces: list[str], noise: str) -> None:
    text = noise.join(pieces)
    assert SecretRedactor()(text) == _every_rule(text)


def test_an_app_rule_with_literals_and_one_with_a_gate() -> None:
    redact = SecretRedactor([], extra_rules=[Rule("ticket", r"TICKET-[0-9]+", literals=("TICKET-",)),
                                             Rule("case", r"CASE#[0-9]+", gate="#")])
    assert redact("see TICKET-42 and CASE#7") == "see [REDACTED:ticket] and [REDACTED:case]"
    with pytest.raises(ValueError):
        Rule("bad", "x", literals=("",))
