"""Hypothesis strategies: every message, block and entry event, and random session work.

Loaded like ``sessiontree_testkit`` (see its docstring). ``events()`` draws any header or
entry event, unknown fields and unknown types included, for codec round trips.
``operations()`` draws a list of abstract session operations; ``apply_operation`` runs
one against a live session and checks that refused operations append nothing.
"""

from __future__ import annotations

from typing import Any

import sessiontree_testkit as kit
from hypothesis import strategies as st

from sessiontree import SessionError
from sessiontree.domain import events as ev
from sessiontree.domain import messages as m

SESSION_ID = kit.SESSION_ID

# -- JSON values --------------------------------------------------------------------------

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
names = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)
json_objects = st.dictionaries(texts, json_values, max_size=3)
# Unknown wire fields: names no known class uses (every known field is snake_case).
extras = st.dictionaries(st.from_regex(r"x[A-Z][a-zA-Z]{0,5}", fullmatch=True), json_values, max_size=2)
timestamps_ms = st.integers(min_value=0, max_value=2**41)
iso_times = st.datetimes(
    min_value=kit.T0.replace(tzinfo=None, year=2000), max_value=kit.T0.replace(tzinfo=None, year=2100)
).map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z")
entry_ids = st.from_regex(r"[0-9a-f]{8}", fullmatch=True) | names

# -- blocks and messages -----------------------------------------------------------------

text_blocks = st.builds(m.TextContent, text=texts, extra=extras)
image_blocks = st.builds(m.ImageContent, data=texts, mime_type=st.just("image/png"), extra=extras)
thinking_blocks = st.builds(
    m.ThinkingContent, thinking=texts, signature=st.none() | texts, extra=extras
)
tool_calls = st.builds(m.ToolCall, id=names, name=names, arguments=json_objects, extra=extras)
unknown_blocks = names.filter(lambda t: t not in ("text", "image", "thinking", "tool_call")).flatmap(
    lambda tag: st.builds(
        m.UnknownContent, type=st.just(tag), data=json_objects.map(lambda d: {**d, "type": tag})
    )
)
user_blocks = st.lists(text_blocks | image_blocks | unknown_blocks, max_size=3)
any_blocks = st.lists(
    text_blocks | image_blocks | thinking_blocks | tool_calls | unknown_blocks, max_size=3
)
costs = st.builds(
    m.Cost,
    **{k: st.floats(0, 100, allow_nan=False) for k in ("input", "output", "cache_read", "cache_write", "total")},
    extra=extras,
)
small_ints = st.integers(min_value=0, max_value=10**7)
usages = st.builds(
    m.Usage,
    input=small_ints,
    output=small_ints,
    cache_read=small_ints,
    cache_write=small_ints,
    total_tokens=small_ints,
    cost=costs,
    extra=extras,
)
user_messages = st.builds(
    m.UserMessage, content=texts | user_blocks, timestamp=timestamps_ms, extra=extras
)
assistant_messages = st.builds(
    m.AssistantMessage,
    content=any_blocks,
    provider=names,
    model=names,
    api=st.none() | names,
    usage=st.none() | usages,
    stop_reason=st.sampled_from(["stop", "length", "tool_use", "error"]),
    error_message=st.none() | texts,
    timestamp=timestamps_ms,
    extra=extras,
)
tool_result_messages = st.builds(
    m.ToolResultMessage,
    tool_call_id=names,
    tool_name=names,
    content=user_blocks,
    is_error=st.booleans(),
    details=json_values,
    timestamp=timestamps_ms,
    extra=extras,
)
custom_messages = st.builds(
    m.CustomMessage,
    custom_type=names,
    content=texts | user_blocks,
    display=st.booleans(),
    details=json_values,
    timestamp=timestamps_ms,
    extra=extras,
)
compaction_summary_messages = st.builds(
    m.CompactionSummaryMessage, summary=texts, tokens_before=small_ints, timestamp=timestamps_ms, extra=extras
)
branch_summary_messages = st.builds(
    m.BranchSummaryMessage, summary=texts, from_id=entry_ids, timestamp=timestamps_ms, extra=extras
)
_KNOWN_ROLES = ("user", "assistant", "tool_result", "custom", "compaction_summary", "branch_summary")
unknown_messages = names.filter(lambda r: r not in _KNOWN_ROLES).flatmap(
    lambda role: st.builds(
        m.UnknownMessage, role=st.just(role), data=json_objects.map(lambda d: {**d, "role": role})
    )
)
messages = (
    user_messages
    | assistant_messages
    | tool_result_messages
    | custom_messages
    | compaction_summary_messages
    | branch_summary_messages
    | unknown_messages
)

# -- events -------------------------------------------------------------------------------


def _entry(cls: type, version: int, **fields: Any) -> st.SearchStrategy[Any]:
    return st.builds(
        cls,
        originator_id=st.just(SESSION_ID),
        originator_version=st.just(version),
        timestamp=iso_times,
        id=entry_ids,
        parent_id=st.none() | entry_ids,
        extra=extras,
        **fields,
    )


def entry_strategies(version: int = 2) -> dict[type, st.SearchStrategy[Any]]:
    """One strategy per entry class (the eleven of SPEC 2.2 and UnknownEntryAppended)."""
    opt_usage = st.none() | usages
    return {
        ev.MessageAppended: _entry(ev.MessageAppended, version, message=messages),
        ev.ThinkingLevelChanged: _entry(
            ev.ThinkingLevelChanged, version, thinking_level=st.sampled_from(ev.THINKING_LEVELS) | texts
        ),
        ev.ModelChanged: _entry(ev.ModelChanged, version, provider=names, model_id=names),
        ev.ActiveToolsChanged: _entry(
            ev.ActiveToolsChanged, version, active_tool_names=st.lists(names, max_size=4).map(tuple)
        ),
        ev.ContextCompacted: _entry(
            ev.ContextCompacted,
            version,
            summary=texts,
            first_kept_entry_id=st.none() | entry_ids,
            tokens_before=small_ints,
            retained_tail=st.none() | st.lists(messages, max_size=2).map(tuple),
            details=json_values,
            usage=opt_usage,
            from_hook=st.booleans(),
        ),
        ev.BranchSummarized: _entry(
            ev.BranchSummarized,
            version,
            from_id=entry_ids,
            summary=texts,
            details=json_values,
            usage=opt_usage,
            from_hook=st.booleans(),
        ),
        ev.CustomEntryAppended: _entry(ev.CustomEntryAppended, version, custom_type=names, data=json_values),
        ev.CustomMessageAppended: _entry(
            ev.CustomMessageAppended,
            version,
            custom_type=names,
            content=texts | user_blocks.map(tuple),
            details=json_values,
            display=st.booleans(),
        ),
        ev.LabelChanged: _entry(ev.LabelChanged, version, target_id=entry_ids, label=st.none() | texts),
        ev.SessionRenamed: _entry(ev.SessionRenamed, version, name=st.none() | texts),
        ev.LeafMoved: _entry(ev.LeafMoved, version, target_id=st.none() | entry_ids),
        ev.UnknownEntryAppended: _unknown_entries(version),
    }


def entry_events(version: int = 2) -> st.SearchStrategy[Any]:
    """Any of the eleven entry events, or an entry of a type this library does not know."""
    return st.one_of(*entry_strategies(version).values())


def _unknown_entries(version: int) -> st.SearchStrategy[Any]:
    def build(tag: str, entry_id: str, parent: str | None, when: str, body: dict) -> Any:
        data = {"type": tag, "id": entry_id, "parent_id": parent, "timestamp": when, **body}
        return ev.UnknownEntryAppended(
            originator_id=SESSION_ID,
            originator_version=version,
            timestamp=when,
            id=entry_id,
            parent_id=parent,
            type=tag,
            data=data,
        )

    body = st.dictionaries(st.from_regex(r"x[A-Z][a-z]{0,5}", fullmatch=True), json_values, max_size=3)
    tags = names.filter(lambda t: t not in ev.ENTRY_CLASS_BY_TYPE and t != "session")
    return st.builds(build, tags, entry_ids, st.none() | entry_ids, iso_times, body)


headers = st.builds(
    ev.SessionStarted,
    originator_id=st.uuids().map(str),
    originator_version=st.just(1),
    timestamp=iso_times,
    cwd=texts,
    parent_session=st.none() | st.uuids().map(str),
    metadata=json_objects,
    extra=extras,
)

# -- random session work ------------------------------------------------------------------

refs = st.integers(min_value=0, max_value=10_000)
operations_one = st.one_of(
    st.tuples(st.just("user"), texts),
    st.tuples(st.just("assistant"), texts, st.booleans(), st.integers(0, 5000)),
    st.tuples(st.just("tool_result"), texts),
    st.tuples(st.just("thinking"), st.sampled_from((*ev.THINKING_LEVELS, "ultra"))),
    st.tuples(st.just("model"), st.sampled_from(["openai", "anthropic"]), st.sampled_from(["m1", "m2"])),
    st.tuples(st.just("tools"), st.lists(st.sampled_from(["read", "bash", "edit"]), max_size=3)),
    st.tuples(st.just("compaction"), refs, st.sampled_from(["kept", "tail", "none"]), st.integers(0, 10**6)),
    # Tuples are accepted and recorded as the lists the wire gives back.
    st.tuples(st.just("custom"), st.sampled_from(["note", "state"]), json_values | st.lists(scalars, max_size=3).map(tuple)),
    st.tuples(st.just("custom_message"), texts, st.booleans()),
    st.tuples(st.just("label"), refs, st.sampled_from(["good", "bad", "", None])),
    st.tuples(st.just("name"), st.sampled_from(["first", "second", "", None])),
    st.tuples(st.just("move"), st.none() | refs, st.none() | texts),
    st.tuples(st.just("missing"), st.sampled_from(["label", "move", "compaction", "get"])),
)


def operations(max_size: int = 25) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    return st.lists(operations_one, max_size=max_size)


def apply_operation(session: Any, op: tuple[Any, ...]) -> None:
    """Run one operation; operations SPEC 2.3 refuses must raise and append nothing."""
    entries = session.get_entries()
    ids = [e.id for e in entries]

    def pick(ref: int) -> str | None:
        return ids[ref % len(ids)] if ids else None

    kind = op[0]
    expected: str | None = None
    before = session.version
    call: Any
    if kind == "user":
        call = lambda: session.append_message(kit.user(op[1]))  # noqa: E731
    elif kind == "assistant":
        calls = [m.ToolCall(id="c1", name="read", arguments={"path": f"f{len(ids)}.py"})] if op[2] else []
        msg = kit.assistant(op[1], usage=kit.usage(op[3], op[3] // 2, op[3] / 1000), tool_calls=calls)
        call = lambda: session.append_message(msg)  # noqa: E731
    elif kind == "tool_result":
        call = lambda: session.append_message(kit.tool_result("c1", "read", op[1]))  # noqa: E731
    elif kind == "thinking":
        expected = None if op[1] in ev.THINKING_LEVELS else "invalid_entry"
        call = lambda: session.append_thinking_level_change(op[1])  # noqa: E731
    elif kind == "model":
        call = lambda: session.append_model_change(op[1], op[2])  # noqa: E731
    elif kind == "tools":
        call = lambda: session.append_active_tools_change(op[1])  # noqa: E731
    elif kind == "compaction":
        branch = {e.id for e in session.get_branch()}
        kept = pick(op[1]) if op[2] == "kept" else None
        if kept is not None and kept not in branch:
            expected = "invalid_entry"
        tail = [kit.user("kept tail")] if op[2] == "tail" else None
        call = lambda: session.append_compaction("summary", kept, op[3], retained_tail=tail)  # noqa: E731
    elif kind == "custom":
        call = lambda: session.append_custom_entry(op[1], op[2])  # noqa: E731
    elif kind == "custom_message":
        call = lambda: session.append_custom_message_entry("hint", op[1], display=op[2])  # noqa: E731
    elif kind == "label":
        target = pick(op[1])
        if target is None:
            return
        call = lambda: session.append_label_change(target, op[2])  # noqa: E731
    elif kind == "name":
        call = lambda: session.append_session_info(op[1])  # noqa: E731
    elif kind == "move":
        target = None if op[1] is None else pick(op[1])
        if target is not None and entries[ids.index(target)].type == "leaf":
            expected = "invalid_entry"
        summary = None if op[2] is None else {"summary": op[2], "details": {"n": len(ids)}}
        call = lambda: session.move_to(target, summary)  # noqa: E731
    elif kind == "missing":
        expected = "not_found"
        call = {
            "label": lambda: session.append_label_change("nothere", "x"),
            "move": lambda: session.move_to("nothere"),
            "compaction": lambda: session.append_compaction("s", "nothere", 1),
            "get": lambda: session.entry("nothere"),
        }[op[1]]
    else:  # pragma: no cover - the strategy draws only the kinds above
        raise AssertionError(op)
    if expected is None:
        call()
        return
    try:
        call()
    except SessionError as exc:
        assert exc.code == expected, (op, exc)
    else:
        raise AssertionError(f"{op} should have been refused with {expected}")
    assert session.version == before, f"{op} was refused but appended"
