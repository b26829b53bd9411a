"""Token accounting for compaction: the estimators and the size of a context."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sessiontree_testkit import assistant, tool_result, usage, user

from sessiontree.domain.messages import (
    AssistantMessage,
    CompactionSummaryMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    UnknownMessage,
    Usage,
    UserMessage,
)
from sessiontree.projections.compaction import (
    IMAGE_TOKENS,
    CharEstimator,
    TextCounterEstimator,
    context_tokens,
    estimate_tokens,
    message_parts,
    reported_usage,
)

estimate = CharEstimator()


def test_text_counts_a_token_per_four_characters_rounded_up() -> None:
    """A 10-character user message costs ceil(10 / 4) = 3 tokens."""
    assert estimate(UserMessage(content="0123456789")) == 3


@given(st.text(max_size=400), st.sampled_from([1.0, 2.5, 4.0, 7.0]))
def test_char_estimate_is_the_rounded_up_character_ratio(text: str, ratio: float) -> None:
    """For plain text, the estimate is ceil(len / chars_per_token) whatever the text."""
    assert CharEstimator(chars_per_token=ratio)(UserMessage(content=text)) == math.ceil(len(text) / ratio)


def test_assistant_text_thinking_and_tool_arguments_all_count() -> None:
    """Text, thinking and a tool call's name, argument keys and values all reach the estimate."""
    message = AssistantMessage(
        content=[
            TextContent(text="abcd"),
            ThinkingContent(thinking="efgh"),
            ToolCall(id="c1", name="bash", arguments={"cmd": "ls -la", "n": 12}),
        ]
    )
    texts, images = message_parts(message)
    assert texts == ["abcd", "efgh", "bash", "cmd", "ls -la", "n", "12"]
    assert images == 0
    assert estimate(message) == math.ceil(len("abcdefghbashcmdls -lan12") / 4)


def test_images_count_a_fixed_number_of_tokens_each() -> None:
    """Each image block costs IMAGE_TOKENS, on top of the text around it."""
    image = ImageContent(data="A" * 10_000, mime_type="image/png")
    message = UserMessage(content=[TextContent(text="look"), image, image])
    assert estimate(message) == 1 + 2 * IMAGE_TOKENS


def test_summaries_and_tool_results_count_their_text() -> None:
    """A compaction summary counts its summary, a tool result its output and tool name."""
    assert estimate(CompactionSummaryMessage(summary="x" * 40, tokens_before=5)) == 10
    assert message_parts(tool_result("c1", "read", "file body"))[0] == ["file body", "read"]


def test_unknown_messages_count_every_value_they_hold() -> None:
    """A message of an unknown role counts its keys and values (role and timestamp aside)."""
    message = UnknownMessage(role="bashExecution", data={"role": "bashExecution", "command": "ls", "timestamp": 1})
    assert message_parts(message)[0] == ["command", "ls"]


def test_a_text_counter_is_lifted_into_an_estimator() -> None:
    """TextCounterEstimator applies any tokenizer to the message text (here: words)."""
    words = TextCounterEstimator(lambda text: len(text.split()))
    message = UserMessage(content=[TextContent(text="one two three"), ImageContent(data="", mime_type="image/png")])
    assert words(message) == 3 + IMAGE_TOKENS


def test_a_text_counter_that_returns_nonsense_is_refused() -> None:
    """A tokenizer hook returning something other than an int >= 0 raises TypeError."""
    with pytest.raises(TypeError):
        TextCounterEstimator(lambda text: -1)(UserMessage(content="hi"))
    with pytest.raises(TypeError):
        TextCounterEstimator(lambda text: "3")(UserMessage(content="hi"))  # type: ignore[arg-type,return-value]


def test_chars_per_token_must_be_positive() -> None:
    """A CharEstimator with a ratio of zero is refused at construction."""
    with pytest.raises(ValueError):
        CharEstimator(chars_per_token=0)


def test_context_size_is_the_last_reported_usage_plus_an_estimate_of_what_follows() -> None:
    """The last assistant usage counts exactly; only the messages after it are estimated."""
    messages = [
        user("x" * 400),
        assistant("ok", usage=usage(input=900, output=100)),
        user("y" * 40),
    ]
    size = context_tokens(messages)
    assert (size.tokens, size.usage_tokens, size.estimated_tokens, size.usage_index) == (1010, 1000, 10, 1)
    assert size.source == "usage"


def test_without_usage_the_whole_context_is_estimated() -> None:
    """With no reported usage the size is the estimate of every message."""
    messages = [user("x" * 400), assistant("y" * 40)]
    size = context_tokens(messages)
    assert size.usage_tokens is None and size.source == "estimate"
    assert size.tokens == estimate_tokens(messages) == 110


def test_failed_replies_and_untrusted_replies_are_skipped() -> None:
    """A reply that ended in error, or one the caller does not trust, does not give the size."""
    good = assistant("a", usage=usage(input=50))
    failed = AssistantMessage(content=[TextContent(text="b")], usage=usage(input=70), stop_reason="error")
    assert reported_usage(failed) is None
    assert context_tokens([good, failed]).usage_tokens == 50
    assert context_tokens([good, failed], trusted=lambda m: m is not good).usage_tokens is None


def test_usage_without_a_total_adds_up_its_parts() -> None:
    """A usage whose total_tokens is 0 is the sum of input, output and cache counts."""
    message = assistant("a", usage=Usage(input=10, output=5, cache_read=100))
    assert reported_usage(message) == 115
