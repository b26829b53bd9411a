"""Tiny builders and checkers shared by the domain, projection and API tests.

This is a plain module, not a package: with ``--import-mode=importlib`` and no
``tests/__init__.py`` test files cannot import each other, so the test directories that
use it put ``tests/support`` on ``sys.path`` (``tests/domain/conftest.py``,
``tests/projections/conftest.py``, and the top of ``tests/test_api.py``). The name is
prefixed so it cannot shadow anything else on the path.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from sessiontree import (
    AssistantMessage,
    Cost,
    InMemorySessionStorage,
    Session,
    SessionContextBuildOptions,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from sessiontree.domain.aggregate import leaf_after
from sessiontree.domain.events import THINKING_LEVELS
from sessiontree.domain.ids import counter_ids, fixed_clock
from sessiontree.wire.codec import native_codec

T0 = datetime(2026, 11, 29, 11, 30, tzinfo=UTC)
T0_ISO = "2026-11-29T11:30:00.000Z"
SESSION_ID = "0194f0c2-7a00-7000-8000-000000000001"


def new_storage(session_id: str = SESSION_ID, cwd: str = "/home/me/project") -> InMemorySessionStorage:
    """An empty in-memory session whose header is created at ``T0``."""
    return InMemorySessionStorage(cwd=cwd, session_id=session_id, timestamp=T0_ISO)


def open_session(
    storage: InMemorySessionStorage | None = None,
    options: SessionContextBuildOptions | None = None,
    *,
    projections: Sequence[Any] = (),
    first_tick: int = 1,
) -> Session:
    """A deterministic session: ids ``00000001, ...`` and a clock one second per entry."""
    storage = storage if storage is not None else new_storage()
    ids = counter_ids()
    for _ in range(first_tick - 1):
        ids()
    return Session(
        storage,
        options,
        clock=fixed_clock(T0.replace(second=first_tick)),
        id_generator=ids,
        projections=projections,
    )


def user(text: str, timestamp: int = 0) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=timestamp)


def usage(input: int = 0, output: int = 0, cost: float = 0.0, **more: int) -> Usage:
    total = input + output + more.get("cache_read", 0) + more.get("cache_write", 0)
    return Usage(input=input, output=output, total_tokens=total, cost=Cost(total=cost), **more)


def assistant(
    text: str = "",
    *,
    provider: str = "anthropic",
    model: str = "claude-sonnet",
    usage: Usage | None = None,
    tool_calls: Sequence[ToolCall] = (),
    timestamp: int = 0,
) -> AssistantMessage:
    blocks: list[Any] = [TextContent(text=text)] if text else []
    blocks.extend(tool_calls)
    return AssistantMessage(
        content=blocks, provider=provider, model=model, usage=usage, timestamp=timestamp
    )


def tool_result(call_id: str, name: str, text: str, *, is_error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)], is_error=is_error
    )


def said(messages: Sequence[Any]) -> list[str]:
    """Messages as ``role:text`` strings, for compact context assertions."""
    out = []
    for message in messages:
        role = message.role
        if role in ("compaction_summary", "branch_summary"):
            out.append(f"{role}:{message.summary}")
            continue
        content = getattr(message, "content", "")
        if isinstance(content, str):
            text = content
        else:
            text = "".join(getattr(b, "text", "") for b in content)
        out.append(f"{role}:{text}")
    return out


# -- checkers ---------------------------------------------------------------------------


def snapshot(reader: Any) -> dict[str, Any]:
    """Everything a reader derives from its log, as comparable plain values."""
    stats = reader.get_session_stats()
    entries = reader.get_entries()
    leaf = reader.leaf_id
    return {
        "version": reader.version,
        "leaf_id": leaf,
        "entries": entries,
        "labels": reader.get_labels(),
        "name": reader.get_session_name(),
        "children": {
            parent: [e.id for e in reader.get_children(parent)]
            for parent in [None, *(e.id for e in entries if e.type != "leaf")]
        },
        "stats": attrs.asdict(stats),
        "branch": [e.id for e in reader.get_branch()],
        "path": [e.id for e in reader.get_path_to_root_or_compaction(leaf)] if leaf else [],
        "context": reader.build_context(),
        "app": {
            name: reader.projection(name)
            for name in reader.projection_names
            if name not in ("leaf", "labels", "session_name", "tree", "stats")
        },
    }


def check_invariants(session: Any) -> None:
    """SPEC 2.3 and 2.4 hold for everything in the log, checked from the entries alone."""
    entries = session.get_entries()
    seen: dict[str, Any] = {}
    parent_of: dict[str, str | None] = {}
    leaf: str | None = None
    for position, entry in enumerate(entries):
        assert entry.originator_version == position + 2, entry
        assert entry.id not in seen, f"duplicate id {entry.id}"
        assert entry.parent_id == leaf, f"{entry.id} hangs under {entry.parent_id}, leaf was {leaf}"
        if entry.type in ("label", "leaf") and entry.target_id is not None:
            assert entry.target_id in seen, f"{entry.type} {entry.id} targets unknown {entry.target_id}"
        if entry.type == "leaf" and entry.target_id is not None:
            assert seen[entry.target_id].type != "leaf", "the leaf moved onto a leaf record"
        if entry.type == "compaction" and entry.first_kept_entry_id is not None:
            branch = _walk(parent_of, leaf)
            assert entry.first_kept_entry_id in branch, f"compaction {entry.id} keeps off-branch entry"
        if entry.type == "thinking_level_change":
            assert entry.thinking_level in THINKING_LEVELS
        seen[entry.id] = entry
        parent_of[entry.id] = entry.parent_id
        leaf = leaf_after(entry)
    assert session.leaf_id == leaf
    branch = session.get_branch()
    assert all(e.type != "leaf" for e in branch)
    if branch:
        assert branch[-1].id == leaf
        assert branch[0].parent_id is None
        for parent, child in itertools.pairwise(branch):
            assert child.parent_id == parent.id
    path = session.get_path_to_root_or_compaction(leaf) if leaf else []
    assert all(e.type != "leaf" for e in path)
    assert [e.id for e in path] == [e.id for e in branch[len(branch) - len(path) :]]


def _walk(parent_of: dict[str, str | None], leaf: str | None) -> set[str]:
    out = set()
    while leaf is not None:
        out.add(leaf)
        leaf = parent_of.get(leaf)
    return out


def repo_lines(session: Any) -> list[bytes]:
    """A session's log as the JSON lines any backend stores."""
    codec = native_codec()
    header, entries = session.storage.load()
    return [codec.encode_event(header)] + [codec.encode_event(e) for e in entries]


def conversation(session: Any) -> dict[str, str]:
    """user -> assistant -> user -> assistant, with a label on the first user message."""
    ids = {}
    ids["u1"] = session.append_message(user("first question"))
    ids["a1"] = session.append_message(assistant("first answer"))
    ids["label"] = session.append_label_change(ids["u1"], "start")
    ids["u2"] = session.append_message(user("second question"))
    ids["a2"] = session.append_message(assistant("second answer"))
    return ids
