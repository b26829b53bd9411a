"""The sample session of ``sessiontree demo``: a coding agent chasing a flaky test.

The content is fixed: the same text, tool calls, usage figures and entry ids every run
(ids come from a seeded generator), so the ids printed in docs/cli.md work as written.
Only the times move: the first entry is stamped when the demo runs and each later one
a few seconds after it, as if the conversation had unfolded over a few minutes.

The session has every kind of entry a real one has: model, thinking-level and tool
changes, user/assistant/tool-result turns with usage, two branches (a quick fix that
failed, then the real fix), a branch summary of the abandoned branch, a compaction, a
``custom`` entry (a git checkpoint), a ``custom_message`` (a CI report the model sees),
labels and a name.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from sessiontree.domain.messages import (
    AssistantMessage,
    Cost,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

DEMO_NAME = "Fix the flaky cache test"
DEMO_SEED = 20261129
STEP = timedelta(seconds=7)

# Dollars per million tokens: (input, output, cache read, cache write).
_PRICES = {
    "claude-sonnet-4-5": (3.0, 15.0, 0.30, 3.75),
    "claude-haiku-4-5": (1.0, 5.0, 0.10, 1.25),
    "gpt-5-mini": (0.25, 2.0, 0.025, 0.0),
}


class DemoClock:
    """A clock that ticks ``STEP`` per call, starting at ``start`` (aware UTC)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._next = start or datetime.now(UTC)

    def __call__(self) -> datetime:
        now = self._next
        self._next = now + STEP
        return now

    def upcoming_ms(self) -> int:
        """The Unix-ms time the next entry will get (for the message's own timestamp)."""
        return int(self._next.timestamp() * 1000)


def demo_ids(seed: int = DEMO_SEED) -> Callable[[], str]:
    """Entry ids that look random (8 hex digits) but are the same every run."""
    rng = random.Random(seed)
    return lambda: f"{rng.getrandbits(32):08x}"


def usage(model: str, input: int, output: int, cache_read: int = 0, cache_write: int = 0) -> Usage:
    """Token counts with their dollar cost at the model's list price."""
    p_in, p_out, p_read, p_write = _PRICES[model]
    cost = Cost(
        input=round(input * p_in / 1e6, 6),
        output=round(output * p_out / 1e6, 6),
        cache_read=round(cache_read * p_read / 1e6, 6),
        cache_write=round(cache_write * p_write / 1e6, 6),
    )
    total = round(cost.input + cost.output + cost.cache_read + cost.cache_write, 6)
    return Usage(
        input=input,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=input + output + cache_read + cache_write,
        cost=attrs.evolve(cost, total=total),
    )


@attrs.frozen
class DemoResult:
    """What the demo wrote: the ids a person would want to look at next."""

    session_id: str
    location: str
    entries: int
    leaf_id: str | None
    ids: dict[str, str]


class _Script:
    """Appends turns to a session, stamping messages with the session clock's time."""

    def __init__(self, session: Any, clock: DemoClock) -> None:
        self.session = session
        self.clock = clock
        self.calls = 0
        self.provider = "anthropic"
        self.model = "claude-sonnet-4-5"

    def user(self, text: str) -> str:
        message = UserMessage(content=[TextContent(text=text)], timestamp=self.clock.upcoming_ms())
        return self.session.append_message(message)  # type: ignore[no-any-return]

    def assistant(self, *blocks: Any, tokens: tuple[int, int, int, int], stop: str | None = None) -> str:
        content = [TextContent(text=b) if isinstance(b, str) else b for b in blocks]
        has_call = any(isinstance(b, ToolCall) for b in content)
        message = AssistantMessage(
            content=content,
            provider=self.provider,
            model=self.model,
            api="anthropic-messages" if self.provider == "anthropic" else "openai-responses",
            usage=usage(self.model, *tokens),
            stop_reason=stop or ("tool_use" if has_call else "stop"),
            timestamp=self.clock.upcoming_ms(),
        )
        return self.session.append_message(message)  # type: ignore[no-any-return]

    def call(self, name: str, **arguments: Any) -> ToolCall:
        self.calls += 1
        return ToolCall(id=f"toolu_demo_{self.calls:03d}", name=name, arguments=arguments)

    def result(self, call: ToolCall, text: str, is_error: bool = False) -> str:
        message = ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=[TextContent(text=text)],
            is_error=is_error,
            timestamp=self.clock.upcoming_ms(),
        )
        return self.session.append_message(message)  # type: ignore[no-any-return]

    def tool_turn(
        self, text: str, call: ToolCall, output: str, tokens: tuple[int, int, int, int], is_error: bool = False
    ) -> tuple[str, str]:
        asked = self.assistant(text, call, tokens=tokens)
        return asked, self.result(call, output, is_error)


def populate(session: Any, clock: DemoClock) -> dict[str, str]:
    """Write the demo conversation into an empty ``session``; returns the notable ids."""
    s = _Script(session, clock)
    ids: dict[str, str] = {}
    session.append_model_change("anthropic", "claude-sonnet-4-5")
    session.append_thinking_level_change("medium")
    session.append_active_tools_change(["read", "bash", "edit"])
    ids["first_user"] = s.user(
        "tests/test_cache.py::test_entry_expires fails about one run in ten on CI. Can you find out why?"
    )
    read = s.call("read", path="tests/test_cache.py")
    s.tool_turn(
        "I'll start with the test itself.",
        read,
        "def test_entry_expires():\n    cache = TTLCache(ttl=1.0)\n    cache.put('k', 'v')\n"
        "    time.sleep(1.0)\n    assert cache.get('k') is None",
        (2210, 96, 0, 2210),
    )
    run = s.call("bash", command="pytest tests/test_cache.py -q --count 50")
    s.tool_turn(
        "Let me see how often it fails locally.",
        run,
        "F.................F..............................\n2 failed, 48 passed in 52.31s\n"
        "E   AssertionError: assert 'v' is None",
        (310, 74, 2210, 420),
    )
    ids["diagnosis"] = s.assistant(
        ThinkingContent(
            thinking="The test sleeps exactly the TTL; expiry compares time.monotonic() with a "
            "deadline computed from time.time(). Clock granularity makes the comparison race.",
            signature="sig_demo_1",
        ),
        "The test sleeps exactly as long as the TTL, and `TTLCache` mixes `time.time()` "
        "(deadline) with `time.monotonic()` (check), so an entry can look alive for a few "
        "more milliseconds. Two ways out:\n\nA. inject a clock into `TTLCache` and advance it "
        "in the test (deterministic);\nB. sleep a little longer than the TTL (quick, still timing-based).",
        tokens=(540, 188, 2630, 0),
    )
    session.append_label_change(ids["diagnosis"], "diagnosis")

    # Branch B: the quick fix, on a cheaper model. It does not hold up.
    session.append_model_change("openai", "gpt-5-mini")
    s.provider, s.model = "openai", "gpt-5-mini"
    ids["quick_fix"] = s.user("Try B first, it's a one-line change.")
    session.append_label_change(ids["quick_fix"], "approach-B")
    edit = s.call("edit", path="tests/test_cache.py", old="time.sleep(1.0)", new="time.sleep(1.2)")
    s.tool_turn("Widening the sleep to 1.2 s.", edit, "Edited tests/test_cache.py (1 line)", (2950, 61, 0, 0))
    rerun = s.call("bash", command="pytest tests/test_cache.py -q --count 50")
    s.tool_turn("Running it 50 times again.", rerun, "1 failed, 49 passed in 61.02s", (3080, 40, 0, 0), is_error=True)
    ids["quick_fix_end"] = s.assistant(
        "Still one failure in 50 runs: B only makes the race rarer. I recommend A.", tokens=(3160, 35, 0, 0)
    )

    # Back to the diagnosis, leaving a summary of what branch B taught us.
    ids["branch_summary"] = session.move_to(
        ids["diagnosis"],
        {
            "summary": "Tried B (sleep 1.2 s instead of 1.0 s): 1 of 50 runs still failed. "
            "The race is in TTLCache mixing time.time() and time.monotonic(); a longer sleep only hides it.",
            "details": {"read_files": ["tests/test_cache.py"], "modified_files": ["tests/test_cache.py"]},
            "usage": usage("claude-haiku-4-5", 1830, 96),
        },
    )

    # Branch A: the real fix.
    s.provider, s.model = "anthropic", "claude-sonnet-4-5"
    ids["real_fix"] = s.user("Revert that and do A: inject a clock.")
    read_src = s.call("read", path="src/cache.py")
    s.tool_turn(
        "Reading the cache module.",
        read_src,
        "class TTLCache:\n    def __init__(self, ttl):\n        self.ttl = ttl\n        self._data = {}\n"
        "    def put(self, key, value):\n        self._data[key] = (value, time.time() + self.ttl)\n"
        "    def get(self, key):\n        value, deadline = self._data.get(key, (None, 0))\n"
        "        return value if time.monotonic() < deadline else None",
        (3310, 82, 2630, 900),
    )
    edit_src = s.call(
        "edit", path="src/cache.py", old="def __init__(self, ttl):", new="def __init__(self, ttl, clock=time.monotonic):"
    )
    s.tool_turn(
        "`TTLCache` now takes a `clock` and uses it for both the deadline and the check.", edit_src,
        "Edited src/cache.py (4 lines)", (620, 240, 3540, 0),
    )
    edit_test = s.call("edit", path="tests/test_cache.py", old="time.sleep(1.0)", new="clock.advance(1.0)")
    s.tool_turn(
        "The test now advances a fake clock instead of sleeping.", edit_test, "Edited tests/test_cache.py (5 lines)",
        (910, 205, 3540, 0),
    )
    final_run = s.call("bash", command="pytest tests/test_cache.py -q --count 200")
    s.tool_turn("Running it 200 times.", final_run, "200 passed in 0.41s", (1180, 38, 3540, 0))
    ids["fixed"] = s.assistant(
        "200 of 200 runs pass, in 0.4 s instead of 50 s: the test no longer sleeps.", tokens=(1260, 31, 3540, 0)
    )
    session.append_label_change(ids["fixed"], "fixed")
    ids["checkpoint"] = session.append_custom_entry(
        "git-checkpoint", {"commit": "3f2c1a9", "files": ["src/cache.py", "tests/test_cache.py"]}
    )
    ids["compaction"] = session.append_compaction(
        "The user asked why tests/test_cache.py::test_entry_expires fails about one run in ten on CI. "
        "The test sleeps exactly the TTL (1.0 s) and TTLCache computes deadlines with time.time() but "
        "checks them with time.monotonic(), so expiry races. Options offered: A, inject a clock; "
        "B, sleep longer than the TTL.",
        ids["branch_summary"],
        14_672,
        details={
            "read_files": ["src/cache.py", "tests/test_cache.py"], "modified_files": ["src/cache.py", "tests/test_cache.py"]
        },
        usage=usage("claude-haiku-4-5", 14_672, 212),
    )
    ids["changelog"] = s.user("Great. Add a line to CHANGELOG.md.")
    entry = "## Unreleased\n\n- Fix flaky TTLCache expiry test (#412).\n"
    note = s.call("edit", path="CHANGELOG.md", old="## Unreleased\n", new=entry)
    s.tool_turn("Adding it under Unreleased.", note, "Edited CHANGELOG.md (2 lines)", (1420, 70, 2100, 0))
    session.append_custom_message_entry(
        "ci-report",
        "CI for 3f2c1a9: 214 tests passed on linux, macos and windows (2m 41s).",
        details={"run": 9184, "status": "success"},
        display=True,
    )
    done = "Done: the changelog has an entry and CI is green on all three platforms."
    ids["done"] = s.assistant(done, tokens=(1590, 24, 2100, 0))
    session.append_session_info(DEMO_NAME)
    return ids


def build_demo(session: Any, clock: DemoClock) -> DemoResult:
    """Populate ``session`` (made with ``clock`` and :func:`demo_ids`) and describe it."""
    ids = populate(session, clock)
    return DemoResult(
        session_id=session.id,
        location=session.storage.location,
        entries=len(session.get_entries()),
        leaf_id=session.leaf_id,
        ids=ids,
    )
