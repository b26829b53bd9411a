"""Tool calls and their results: the problems a context can have, and the rule that repairs them (docs/concepts.md,
*Tool calls and results*).

Providers refuse a request whose tool calls and results do not pair up: every call answered by exactly one result in
the tool-result run right after its assistant message, no result without its call, no call id used twice. A log keeps
what happened (an interrupted run, a fork or a compaction that cut between a call and its result), so the context of a
branch may break those rules. :func:`find_problems` names every break, and :func:`repair_tool_pairs`, an entry
transform, removes them from the context by one deterministic rule, never touching the log:

* a call id already used earlier in the context is renamed (``<id>_2``, ...) in the context, with its results;
* a missing result becomes a synthetic error result right after its call;
* a result out of place moves to right after its call;
* an orphan result, or a second result for a call, is left out.

What the transform changes is exactly what :func:`find_problems` reports, and applying it twice changes nothing more.
Both look at messages: a ``message`` entry's message, a compaction's summary and retained tail, a ``custom_message`` or
``branch_summary`` (a turn boundary, as every message but a tool result is). ``custom`` entries carry no message here
(a projector's messages are not seen). Pure: imports only the domain and the context projection.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from sessiontree.domain.events import ContextCompacted, MessageAppended
from sessiontree.domain.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage
from sessiontree.projections.context import SessionContextBuildOptions, context_entries

MISSING_RESULT = "missing_result"
ORPHAN_RESULT = "orphan_result"
DUPLICATE_RESULT = "duplicate_result"
RESULT_OUT_OF_PLACE = "result_out_of_place"
DUPLICATE_CALL_ID = "duplicate_call_id"
PROBLEM_KINDS = (MISSING_RESULT, ORPHAN_RESULT, DUPLICATE_RESULT, RESULT_OUT_OF_PLACE, DUPLICATE_CALL_ID)

SYNTHETIC_TEXT = "No result was recorded for this tool call (interrupted)."
SYNTHETIC_ID_PREFIX = "synthetic-result-"
_TAIL_ID = "{}.tail.{}"  # the id of a retained-tail message made into its own context entry


@attrs.frozen(kw_only=True)
class ContextProblem:
    """One way a context breaks the tool-call rules: its ``kind`` (one of :data:`PROBLEM_KINDS`), the entry it is in
    (a retained tail's messages are in their compaction), the tool-call id where one applies, and a one-line message."""

    kind: str
    entry_id: str | None
    tool_call_id: str | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class _Item:
    """One thing of the context in order: an entry's message (or the entry alone, when it carries none)."""

    entry: Any
    message: Any  # None: an entry that adds no message (a label, a model change, a ``custom`` entry)
    tail: int | None = None  # the index in its compaction's retained tail


def _items(entries: Iterable[Any]) -> list[_Item]:
    items: list[_Item] = []
    for entry in entries:
        messages = _messages_of(entry)
        if entry.type == "compaction":  # its summary (a turn boundary), then its retained tail
            items.append(_Item(entry, messages[0]))
            items.extend(_Item(entry, m, i) for i, m in enumerate(messages[1:]))
        else:
            items.append(_Item(entry, messages[0] if messages else None))
    return items


def _calls(message: Any) -> list[ToolCall]:
    if isinstance(message, AssistantMessage):
        return [b for b in message.content if isinstance(b, ToolCall)]
    return []


@attrs.define
class _Call:
    item: int  # the assistant message's item
    turn: int  # the first assistant message of its turn (the message itself, unless ``runs``)
    block: ToolCall
    id: str  # the id in the repaired context (renamed when it repeats an earlier call's)
    results: list[int] = attrs.field(factory=list)  # items of the results that answer it, in order


@attrs.define
class _Analysis:
    items: list[_Item]
    problems: list[tuple[int, int, ContextProblem]]  # (item, order within the item, problem)
    renamed: dict[int, dict[str, str]]  # assistant item -> {block position as str: new id}; result item -> {"": new id}
    dropped: set[int]
    inserted: dict[int, list[Any]]  # item -> what goes right after it: a moved result's item, or a call (synthetic)


def _messages_of(entry: Any) -> tuple[Any, ...]:
    """The messages of an entry as :func:`_items` sees them (a summary or a custom message as its type's name)."""
    kind = entry.type
    if kind == "message":
        return (entry.message,)
    if kind == "compaction":
        return ("summary", *(entry.retained_tail or ()))
    if kind == "custom_message" or (kind == "branch_summary" and entry.summary):
        return (kind,)
    return ()


class PairingCheck:
    """The one-pass check that nothing breaks the rules, kept so that it can go on over entries appended later
    (``feed``): the common case, a valid context, costs one pass, and an append costs only its own entries."""

    def __init__(self, *, runs: bool = False) -> None:
        self.runs = runs
        self.count = 0  # entries fed
        self.last: Any = None  # the last entry fed
        self.broken = False
        self._seen: set[str] = set()
        self._pending: set[str] = set()  # the calls of the current turn not answered yet
        self._state: str | None = None  # "calls" after an assistant message, "results" in its results, else None

    @property
    def valid(self) -> bool:
        return not self.broken and not self._pending

    def feed(self, entries: Iterable[Any]) -> PairingCheck:
        for entry in entries:
            self.count += 1
            self.last = entry
            if not self.broken:
                self.broken = not all(self._take(message) for message in _messages_of(entry))
        return self

    def _take(self, message: Any) -> bool:
        pending = self._pending
        if isinstance(message, ToolResultMessage):
            if self._state is None or message.tool_call_id not in pending:
                return False
            pending.discard(message.tool_call_id)
            self._state = "results"
        elif isinstance(message, AssistantMessage):
            if pending and not (self.runs and self._state == "calls"):
                return False
            for block in message.content:
                if isinstance(block, ToolCall):
                    if block.id in self._seen:
                        return False
                    self._seen.add(block.id)
                    pending.add(block.id)
            self._state = "calls"
        else:
            if pending:
                return False
            self._state = None
        return True


def _analyse(entries: Sequence[Any], runs: bool = False) -> _Analysis:
    if PairingCheck(runs=runs).feed(entries).valid:
        return _Analysis([], [], {}, set(), {})
    items = _items(entries)
    is_result = [isinstance(it.message, ToolResultMessage) for it in items]
    turn_of = _turns(items, runs)
    region_of: dict[int, int] = {}  # a tool-result item -> the turn whose run of results it is in
    region_end: dict[int, int] = {}  # a turn -> the last item of its run of results (its last message when none)
    last_of: dict[int, int] = {}
    for index, head in turn_of.items():
        last_of[head] = index
    for head, end in last_of.items():
        for j in range(end + 1, len(items)):
            if items[j].message is None:
                continue
            if not is_result[j]:
                break
            region_of[j] = head
            end = j
        region_end[head] = end
    calls: list[_Call] = []
    by_original: dict[str, list[_Call]] = {}
    problems: list[tuple[int, int, ContextProblem]] = []
    taken = {b.id for it in items for b in _calls(it.message)}
    renamed: dict[int, dict[str, str]] = {}
    for index, item in enumerate(items):
        blocks = _calls(item.message)
        if not blocks:
            continue
        for position, block in enumerate(blocks):
            effective = block.id
            earlier = by_original.get(block.id)
            if earlier:
                n = 2
                while f"{block.id}_{n}" in taken:
                    n += 1
                effective = f"{block.id}_{n}"
                taken.add(effective)
                renamed.setdefault(index, {})[str(position)] = effective
                problems.append((index, position, ContextProblem(
                    kind=DUPLICATE_CALL_ID, entry_id=item.entry.id, tool_call_id=block.id,
                    message=f"tool call id {block.id!r} in entry {item.entry.id} repeats the call in entry "
                            f"{items[earlier[0].item].entry.id}",
                )))
            call = _Call(index, turn_of[index], block, effective)
            calls.append(call)
            by_original.setdefault(block.id, []).append(call)
    dropped: set[int] = set()
    for index, item in enumerate(items):
        if not is_result[index]:
            continue
        owner = _pair(by_original.get(item.message.tool_call_id, []), index, region_of.get(index))
        if owner is None:
            dropped.add(index)
            problems.append((index, 0, ContextProblem(
                kind=ORPHAN_RESULT, entry_id=item.entry.id, tool_call_id=item.message.tool_call_id,
                message=f"tool result in entry {item.entry.id} answers call {item.message.tool_call_id!r}, "
                        "which is not in the context",
            )))
            continue
        owner.results.append(index)
        if owner.id != item.message.tool_call_id:
            renamed[index] = {"": owner.id}
    inserted: dict[int, list[Any]] = {}
    for call in calls:
        call_entry = items[call.item].entry.id
        in_place = [r for r in call.results if region_of.get(r) == call.turn]
        chosen = in_place[0] if in_place else (call.results[0] if call.results else None)
        for result in call.results:
            if result == chosen:
                continue
            dropped.add(result)
            problems.append((result, 0, ContextProblem(
                kind=DUPLICATE_RESULT, entry_id=items[result].entry.id, tool_call_id=call.block.id,
                message=f"tool result in entry {items[result].entry.id} is another result for call {call.block.id!r} "
                        f"(entry {call_entry})",
            )))
        if chosen is None:
            inserted.setdefault(region_end[call.turn], []).append(call)
            problems.append((call.item, len(_calls(items[call.item].message)) + 1, ContextProblem(
                kind=MISSING_RESULT, entry_id=call_entry, tool_call_id=call.block.id,
                message=f"tool call {call.block.id!r} ({call.block.name}) in entry {call_entry} has no result before "
                        + ("the next message" if _next_message(items, region_end[call.turn]) else "the end of the branch"),
            )))
        elif chosen not in in_place:
            dropped.add(chosen)
            inserted.setdefault(region_end[call.turn], []).append(chosen)
            problems.append((chosen, 0, ContextProblem(
                kind=RESULT_OUT_OF_PLACE, entry_id=items[chosen].entry.id, tool_call_id=call.block.id,
                message=f"tool result in entry {items[chosen].entry.id} is not in the results right after its call "
                        f"{call.block.id!r} (entry {call_entry})",
            )))
    problems.sort(key=lambda p: (p[0], p[1]))
    return _Analysis(items, problems, renamed, dropped, inserted)


def _turns(items: list[_Item], runs: bool) -> dict[int, int]:
    """Each assistant message's turn: itself; with ``runs``, the first of the consecutive assistant messages it is in
    (the Responses API's items: one reply is a message, reasoning and function calls, each its own item)."""
    turn_of: dict[int, int] = {}
    head: int | None = None
    for index, item in enumerate(items):
        if item.message is None:
            continue
        if isinstance(item.message, AssistantMessage):
            head = head if runs and head is not None else index
            turn_of[index] = head
        else:
            head = None
    return turn_of


def _pair(candidates: list[_Call], index: int, region: int | None) -> _Call | None:
    """The call a result at ``index`` answers: in the run after an assistant message with calls of its id, the first of
    them still unanswered there (else the last); elsewhere the nearest call of its id before it, else the first after."""
    mine = [c for c in candidates if c.turn == region] if region is not None else []
    if mine:
        return next((c for c in mine if not any(r > c.item for r in c.results)), mine[-1])
    before = [c for c in candidates if c.item < index]
    return before[-1] if before else (candidates[0] if candidates else None)


def _next_message(items: list[_Item], after: int) -> bool:
    return any(it.message is not None for it in items[after + 1 :])


def find_problems(entries: Sequence[Any], *, runs: bool = False) -> list[ContextProblem]:
    """Every break of the tool-call rules in the context whose entries (after compaction) are ``entries``, in the order
    they occur. ``runs``: consecutive assistant messages are one turn (for histories of Responses items)."""
    return [problem for _, _, problem in _analyse(entries, runs).problems]


def repair_tool_pairs(entries: list[Any]) -> list[Any]:
    """An entry transform (``SessionContextBuildOptions(entry_transforms=[repair_tool_pairs])``): the context with
    every problem :func:`find_problems` reports repaired by the module's rule. The log is never touched; a context with
    no problem is returned as it is."""
    return repair(entries)


def repair(entries: Sequence[Any], *, runs: bool = False) -> list[Any]:
    """:func:`repair_tool_pairs`, with ``runs`` as in :func:`find_problems`."""
    analysis = _analyse(entries, runs)
    if not analysis.problems:
        return list(entries)
    items, out = analysis.items, []
    for index, item in enumerate(items):
        if index not in analysis.dropped:
            out.append(_entry_of(item, analysis.renamed.get(index)))
        for thing in analysis.inserted.get(index, ()):
            if isinstance(thing, _Call):
                out.append(_synthetic(items[thing.item].entry, items[thing.item].message, thing))
            else:
                out.append(_entry_of(items[thing], analysis.renamed.get(thing)))
    return out


def unrepaired_entries(path: Sequence[Any], options: SessionContextBuildOptions) -> list[Any]:
    """The context entries of a branch (root-first ``path``) under ``options`` with :func:`repair_tool_pairs` left
    out: what the repair sees, and what ``check_context`` checks."""
    kept = [t for t in options.entry_transforms if t is not repair_tool_pairs]
    return context_entries(path, attrs.evolve(options, entry_transforms=kept))


def _incremental(entry: Any) -> bool:
    """Appending ``entry`` leaves the repaired context before it unchanged when it can neither answer, nor repeat, nor
    close over a call in a way the repair has not already seen: a user message, a reply without calls, a non-message."""
    if entry.type == "compaction":
        return False
    message = getattr(entry, "message", None) if entry.type == "message" else None
    return not isinstance(message, ToolResultMessage) and not _calls(message)


repair_tool_pairs.incremental = _incremental  # type: ignore[attr-defined]  # read by SessionContextBuildOptions.extends_with


def _entry_of(item: _Item, renames: dict[str, str] | None) -> Any:
    """The context entry for an item: the entry itself, a compaction without its tail, or a tail message on its own."""
    entry, message = item.entry, item.message
    if renames:
        if isinstance(message, ToolResultMessage):
            message = attrs.evolve(message, tool_call_id=renames[""])
        else:
            blocks, position = [], 0
            for block in message.content:
                if isinstance(block, ToolCall):
                    block = attrs.evolve(block, id=renames.get(str(position), block.id))
                    position += 1
                blocks.append(block)
            message = attrs.evolve(message, content=tuple(blocks))
    if isinstance(entry, ContextCompacted):
        if item.tail is None:
            return attrs.evolve(entry, retained_tail=()) if entry.retained_tail else entry
        return _message_entry(entry, _TAIL_ID.format(entry.id, item.tail), message)
    return entry if message is item.message else attrs.evolve(entry, message=message)


def _message_entry(like: Any, entry_id: str, message: Any) -> MessageAppended:
    return MessageAppended(
        originator_id=like.originator_id, originator_version=like.originator_version, timestamp=like.timestamp,
        id=entry_id, parent_id=like.id, message=message,
    )


def synthetic_result(call: ToolCall, timestamp: int = 0, *, call_id: str | None = None) -> ToolResultMessage:
    """The error result that stands in for a call whose result was never recorded."""
    return ToolResultMessage(
        tool_call_id=call.id if call_id is None else call_id, tool_name=call.name, content=(TextContent(SYNTHETIC_TEXT),),
        is_error=True, details={"synthetic": True, "reason": MISSING_RESULT}, timestamp=timestamp,
    )


def _synthetic(call_entry: Any, assistant: Any, call: _Call) -> MessageAppended:
    message = synthetic_result(call.block, assistant.timestamp, call_id=call.id)
    return _message_entry(call_entry, SYNTHETIC_ID_PREFIX + call.id, message)


def is_synthetic(message: Any) -> bool:
    """Was this tool result made by the repair (in a context, or appended by ``Session.repair``)?"""
    details = getattr(message, "details", None)
    return isinstance(message, ToolResultMessage) and isinstance(details, dict) and details.get("synthetic") is True


def trailing_missing(entries: Sequence[Any]) -> list[tuple[ToolCall, Any]]:
    """The calls of the context's last assistant message that have no result, when nothing but tool results follows
    it (the leaf's own trailing turn): ``(call, assistant message)``, in call order. A result appended with the call's
    own id answers it, even when the id repeats an earlier call's (a result pairs with the nearest call before it)."""
    analysis = _analyse(entries)
    items = analysis.items
    if not analysis.problems:
        return []
    start = len(items) - 1
    while start >= 0 and (items[start].message is None or isinstance(items[start].message, ToolResultMessage)):
        start -= 1
    if start < 0 or not _calls(items[start].message):
        return []
    missing = {p.tool_call_id for i, _, p in analysis.problems if p.kind == MISSING_RESULT and i == start}
    return [(block, items[start].message) for block in _calls(items[start].message) if block.id in missing]


__all__ = [
    "DUPLICATE_CALL_ID", "DUPLICATE_RESULT", "MISSING_RESULT", "ORPHAN_RESULT", "PROBLEM_KINDS", "RESULT_OUT_OF_PLACE",
    "SYNTHETIC_TEXT", "ContextProblem", "PairingCheck", "find_problems", "is_synthetic", "repair_tool_pairs", "synthetic_result",
    "trailing_missing", "unrepaired_entries",
]
