"""Messages and content blocks: immutable value objects (SPEC 2.1).

Field types are checked by :func:`check_fields` where the log takes a value in (the append command), not by the
constructors: a value read from a log was checked by the decoder. Every class carries ``extra``: the fields a
producer wrote that this library does not know, kept and written back unchanged, so nothing is ever dropped. Roles
and block types it does not know at all become :class:`UnknownMessage` and :class:`UnknownContent`, which keep every
field.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import isfinite
from typing import Any, ClassVar, get_args

import attrs
from attrs import field, frozen


class Extra(dict[str, Any]):
    """The ``extra`` of a value read from the wire: its unknown fields, as a plain dict.

    ``absent`` names the known fields (attribute names) the producer left out, and ``nulls`` those it wrote as ``null``
    where the writer of its dialect leaves a None out; writing the value back repeats both, so the line round-trips byte
    for byte. Neither takes part in equality: an ``Extra`` equals the plain dict of the same fields.
    """

    __slots__ = ("absent", "nulls")

    def __init__(self, fields: Any = (), absent: frozenset[str] = frozenset(), nulls: frozenset[str] = frozenset()) -> None:
        super().__init__(fields)
        self.absent = absent
        self.nulls = nulls

    def __reduce__(self) -> Any:  # a copy, a deep copy or a pickle is a plain, writable Extra
        return (Extra, (dict(self), self.absent, self.nulls))


class FrozenExtra(Extra):
    """A read-only ``Extra``, shared by the values that have no unknown fields (rather than an empty dict apiece)."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("this extra is shared and read-only; copy it (dict(extra)) to change it")

    # one refusal stands in for every mutator, whatever its signature
    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _read_only


NO_EXTRA: Mapping[str, Any] = FrozenExtra()
"""The ``extra`` of every value with nothing unknown, absent or null (the default)."""


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _checks_of(cls: type) -> tuple[tuple[Any, Any], ...]:
    found = _CHECKS.get(cls)
    if found is None:
        found = _CHECKS[cls] = tuple((a, a.metadata["check"]) for a in attrs.fields(cls) if "check" in a.metadata)
    return found


_CHECKS: dict[type, tuple[tuple[Any, Any], ...]] = {}


def check_fields(value: Any) -> None:
    """The type checks of a value's fields, and of the blocks, usage and cost it holds: ``TypeError`` naming the class,
    the field and the value. The append command runs them (a value is checked once, where the log takes it in); a
    value read from a log was checked by the decoder, so the constructors do not check again."""
    for a, check in _checks_of(value.__class__):
        item = getattr(value, a.name)
        check(value, a, item)
        if a.name == "content" and isinstance(item, tuple):  # an app's tuple subclass too
            for block in item:
                check_fields(block)
        elif a.name in ("usage", "cost") and item is not None:
            check_fields(item)


def _kind(types: type | tuple[type, ...], what: str, *, optional: bool = False) -> Any:
    """A validator whose TypeError is one sentence naming the class, the field and the value."""

    flags = bool in (types if isinstance(types, tuple) else (types,))

    def check(instance: Any, attribute: Any, value: Any) -> None:
        # a bool is an int to Python, but ``true`` on the wire, which the reader takes for no number
        if not ((value is None and optional) or (isinstance(value, types) and (flags or value.__class__ is not bool))):
            raise TypeError(
                f"{type(instance).__name__}.{attribute.name} must be {what}"
                f"{' or None' if optional else ''}, not {value!r:.80}"
            )

    return check


# The widest integer a count, an amount or a time may be: an erasure keeps them, and verify refuses a stub holding a
# wider one (it could carry what was erased: erasure.py), so the append command refuses them here.
INT_LIMIT = 2**63 - 1


def _within_64_bits(attribute: Any, value: Any) -> None:
    if isinstance(value, int) and not -INT_LIMIT <= value <= INT_LIMIT:
        raise ValueError(f"{attribute.name} must be within 64 bits, not a {len(str(abs(value)))}-digit integer")


def _number(types: type | tuple[type, ...], what: str) -> Any:
    """A validator of a count or an amount (a bool is neither)."""

    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value.__class__ is int and -INT_LIMIT <= value <= INT_LIMIT:  # the common case
            return
        if isinstance(value, bool) or not isinstance(value, types):
            raise TypeError(f"{attribute.name} must be {what}, not {value!r}")
        _within_64_bits(attribute, value)
        if isinstance(value, float) and not isfinite(value):  # JSON has none: written as null, read as corrupt
            raise ValueError(f"{attribute.name} must be a finite number, not {value!r}")

    return check


_int = _count = _number(int, "an int")  # a time or a count
_amount = _number((int, float), "a number")
_str = _kind(str, "a str")
_opt_str = _kind(str, "a str", optional=True)
_mapping = _kind(Mapping, "a mapping (dict)")


@frozen
class TextContent:
    """A run of text."""

    type: ClassVar[str] = "text"
    text: str = field(metadata={"check": _str})
    extra: Mapping[str, Any] = field(default=NO_EXTRA, kw_only=True)


@frozen
class ImageContent:
    """An image, base64 ``data`` with its ``mime_type``."""

    type: ClassVar[str] = "image"
    data: str = field(metadata={"check": _str})
    mime_type: str = field(metadata={"check": _str})
    extra: Mapping[str, Any] = field(default=NO_EXTRA, kw_only=True)


@frozen
class ThinkingContent:
    """The model's reasoning, optionally with the provider's signature."""

    type: ClassVar[str] = "thinking"
    thinking: str = field(metadata={"check": _str})
    signature: str | None = field(default=None, metadata={"check": _opt_str}, kw_only=True)
    extra: Mapping[str, Any] = field(default=NO_EXTRA, kw_only=True)


@frozen(kw_only=True)
class ToolCall:
    """A tool call requested by the assistant."""

    type: ClassVar[str] = "tool_call"
    id: str = field(metadata={"check": _str})
    name: str = field(metadata={"check": _str})
    arguments: Mapping[str, Any] = field(factory=dict, metadata={"check": _mapping})
    extra: Mapping[str, Any] = NO_EXTRA


@frozen(kw_only=True)
class UnknownContent:
    """A content block of a type this library does not know; ``data`` holds all its fields."""

    type: str = field(validator=_str)
    data: Mapping[str, Any] = field(factory=dict, validator=_mapping)

    def __attrs_post_init__(self) -> None:
        _carry_tag(self, "type", self.type)


def _carry_tag(obj: Any, key: str, tag: str) -> None:
    """``data`` holds all the wire fields, the tag included (added if the caller left it out)."""
    if key not in obj.data:
        object.__setattr__(obj, "data", {**obj.data, key: tag})
    elif obj.data[key] != tag:
        raise TypeError(f"{key} {tag!r} disagrees with data[{key!r}] = {obj.data[key]!r}")


Content = TextContent | ImageContent | ThinkingContent | ToolCall | UnknownContent
CONTENT_TYPES: tuple[type, ...] = get_args(Content)
_BLOCKS = "a list of content blocks (TextContent, ImageContent, ThinkingContent, ToolCall)"


def _blocks(instance: Any, attribute: Any, value: Any) -> None:
    if not isinstance(value, tuple):
        raise TypeError(f"{type(instance).__name__}.{attribute.name} must be {_BLOCKS}, not {value!r:.80}")
    for block in value:
        if not isinstance(block, CONTENT_TYPES):
            raise TypeError(f"{type(instance).__name__}.{attribute.name} must be {_BLOCKS}; {block!r:.80} is not a block")


def _user_content(instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, str):
        return
    if not isinstance(value, tuple):
        raise TypeError(f"{type(instance).__name__}.{attribute.name} must be a str or {_BLOCKS}, not {value!r:.80}")
    _blocks(instance, attribute, value)


@frozen(kw_only=True)
class Cost:
    """Dollar cost of a model call."""

    input: float = field(default=0.0, metadata={"check": _amount})
    output: float = field(default=0.0, metadata={"check": _amount})
    cache_read: float = field(default=0.0, metadata={"check": _amount})
    cache_write: float = field(default=0.0, metadata={"check": _amount})
    total: float = field(default=0.0, metadata={"check": _amount})
    extra: Mapping[str, Any] = NO_EXTRA


@frozen(kw_only=True)
class Usage:
    """Token counts of a model call and their cost."""

    input: int = field(default=0, metadata={"check": _count})
    output: int = field(default=0, metadata={"check": _count})
    cache_read: int = field(default=0, metadata={"check": _count})
    cache_write: int = field(default=0, metadata={"check": _count})
    total_tokens: int = field(default=0, metadata={"check": _count})
    cost: Cost = field(factory=Cost, metadata={"check": _kind(Cost, "a Cost")})
    extra: Mapping[str, Any] = NO_EXTRA


_opt_usage = _kind(Usage, "a Usage", optional=True)


@frozen
class UserMessage:
    """What the user said: a string or text/image blocks."""

    role: ClassVar[str] = "user"
    content: str | tuple[Content, ...] = field(converter=_as_tuple, metadata={"check": _user_content})
    timestamp: int = field(default=0, metadata={"check": _int}, kw_only=True)
    extra: Mapping[str, Any] = field(default=NO_EXTRA, kw_only=True)


@frozen
class AssistantMessage:
    """A model reply: text, thinking and tool-call blocks, with its model and usage."""

    role: ClassVar[str] = "assistant"
    content: tuple[Content, ...] = field(converter=_as_tuple, metadata={"check": _blocks})
    provider: str = field(default="", metadata={"check": _str}, kw_only=True)
    model: str = field(default="", metadata={"check": _str}, kw_only=True)
    api: str | None = field(default=None, metadata={"check": _opt_str}, kw_only=True)
    usage: Usage | None = field(default=None, metadata={"check": _opt_usage}, kw_only=True)
    stop_reason: str = field(default="stop", metadata={"check": _str}, kw_only=True)
    error_message: str | None = field(default=None, metadata={"check": _opt_str}, kw_only=True)
    timestamp: int = field(default=0, metadata={"check": _int}, kw_only=True)
    extra: Mapping[str, Any] = field(default=NO_EXTRA, kw_only=True)


@frozen
class ToolResultMessage:
    """The result of one tool call."""

    role: ClassVar[str] = "tool_result"
    tool_call_id: str = field(metadata={"check": _str}, kw_only=True)
    tool_name: str = field(metadata={"check": _str}, kw_only=True)
    content: tuple[Content, ...] = field(factory=tuple, converter=_as_tuple, metadata={"check": _blocks})
    is_error: bool = field(default=False, metadata={"check": _kind(bool, "a bool")}, kw_only=True)
    details: Any = field(default=None, kw_only=True)
    timestamp: int = field(default=0, metadata={"check": _int}, kw_only=True)
    extra: Mapping[str, Any] = field(default=NO_EXTRA, kw_only=True)


@frozen
class CustomMessage:
    """An app-defined message that reaches the model (from a ``custom_message`` entry)."""

    role: ClassVar[str] = "custom"
    custom_type: str = field(metadata={"check": _str}, kw_only=True)
    content: str | tuple[Content, ...] = field(converter=_as_tuple, metadata={"check": _user_content})
    display: bool = field(default=True, kw_only=True)
    details: Any = field(default=None, kw_only=True)
    timestamp: int = field(default=0, metadata={"check": _int}, kw_only=True)
    extra: Mapping[str, Any] = field(default=NO_EXTRA, kw_only=True)


@frozen(kw_only=True)
class CompactionSummaryMessage:
    """The summary that stands in for compacted turns."""

    role: ClassVar[str] = "compaction_summary"
    summary: str = field(metadata={"check": _str})
    tokens_before: int = field(default=0, metadata={"check": _amount})  # some producers write a float
    timestamp: int = field(default=0, metadata={"check": _int})
    extra: Mapping[str, Any] = NO_EXTRA


@frozen(kw_only=True)
class BranchSummaryMessage:
    """The summary of a branch that was left."""

    role: ClassVar[str] = "branch_summary"
    summary: str = field(metadata={"check": _str})
    from_id: str = field(metadata={"check": _str})
    timestamp: int = field(default=0, metadata={"check": _int})
    extra: Mapping[str, Any] = NO_EXTRA


@frozen(kw_only=True)
class UnknownMessage:
    """A message whose role this library does not know; ``data`` holds all its fields."""

    role: str = field(validator=_str)
    data: Mapping[str, Any] = field(factory=dict, validator=_mapping)

    def __attrs_post_init__(self) -> None:
        _carry_tag(self, "role", self.role)

    @property
    def timestamp(self) -> Any:
        return self.data.get("timestamp", 0)


Message = (
    UserMessage | AssistantMessage | ToolResultMessage | CustomMessage | CompactionSummaryMessage
    | BranchSummaryMessage | UnknownMessage
)
MESSAGE_TYPES: tuple[type, ...] = get_args(Message)


def message_text(message: Any) -> str:
    """The plain text of a message's text blocks (for listings and previews)."""
    content = getattr(message, "content", None)
    if isinstance(content, str):
        return content
    if content is None:
        summary = getattr(message, "summary", None)
        return summary if isinstance(summary, str) else ""
    return "".join(b.text for b in content if isinstance(b, TextContent))
