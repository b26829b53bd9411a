"""Redaction on write: secrets in an entry are replaced before it is encoded, so they never reach a file.

A *redactor* is any callable from a str to a str (the same object when it changes nothing). A session runs its
redactors over every string an entry carries (message text and blocks, tool arguments and output, summaries, labels,
names, custom data, unknown fields), then saves the redacted entry: the log, the live session and every projection see
the same values. :class:`SecretRedactor` is the default; see docs/audit.md, *Redaction on write*.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
from ahocorasick_rs import AhoCorasick

# the default redactor and its rules, re-exported: sessiontree.content.redaction is where apps find them
from sessiontree.content.secret_rules import DEFAULT_RULES as DEFAULT_RULES
from sessiontree.content.secret_rules import Rule as Rule
from sessiontree.content.secret_rules import marker as marker
from sessiontree.content.secret_rules import replacer
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import MessageAppended
from sessiontree.domain.messages import (
    AssistantMessage,
    Extra,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UnknownMessage,
    Usage,
    UserMessage,
)

Redactor = Callable[[str], str]

class SecretRedactor:
    """The default redactor: replaces every match of its rules (``DEFAULT_RULES``, plus ``extra_rules``) with
    ``[REDACTED:<rule>]``.

    One pass in C (an Aho-Corasick automaton over every rule's literals) tells which rules can match a string; most
    strings hold none, and only the rules whose literals occur are run (docs/performance.md, *Redaction*)."""

    def __init__(self, rules: Iterable[Rule] = DEFAULT_RULES, *, extra_rules: Iterable[Rule] = ()) -> None:
        self.rules = (*rules, *extra_rules)
        compiled: list[tuple[Any, Any, str]] = []
        literals: dict[str, list[int]] = {}
        by_gate: dict[str, list[tuple[Any, Any, str]]] = {}
        for rule in self.rules:
            if not isinstance(rule, Rule):
                raise TypeError(f"rules must be Rule objects, not {rule!r}")
            pattern = re.compile(rule.pattern)
            one = (pattern, replacer(rule.name, "secret" in pattern.groupindex), rule.name)
            if rule.literals:
                for literal in rule.literals:
                    literals.setdefault(literal, []).append(len(compiled))
                compiled.append(one)
            else:
                by_gate.setdefault(rule.gate, []).append(one)
        self._compiled = tuple(compiled)
        self._by_literal = tuple(tuple(rules) for rules in literals.values())
        self._finder = AhoCorasick(list(literals)) if literals else None
        self._gates = tuple((gate, tuple(found)) for gate, found in by_gate.items())

    def __repr__(self) -> str:
        return f"SecretRedactor({len(self.rules)} rules)"

    def _candidates(self, text: str) -> list[tuple[Any, Any, str]]:
        """The rules that can match ``text``, in their order."""
        found: list[tuple[Any, Any, str]] = []
        if self._finder is not None:
            try:
                hits = self._finder.find_matches_as_indexes(text, overlapping=True)
            except UnicodeEncodeError as error:  # a lone surrogate: no JSON line can hold it (as without a redactor)
                raise SessionError("invalid_entry", f"a string of the entry is not valid Unicode: {error}") from None
            if hits:
                by_literal = self._by_literal
                wanted = sorted({rule for literal, _, _ in hits for rule in by_literal[literal]})
                found = [self._compiled[n] for n in wanted]
        for gate, gated in self._gates:
            if gate in text:
                found.extend(gated)
        return found

    def __call__(self, text: str) -> str:
        for pattern, replace, _ in self._candidates(text):
            if pattern.search(text) is not None:
                text = pattern.sub(replace, text)
        return text

    def findings(self, text: str) -> list[str]:
        """The names of the rules that match ``text`` (what a scan of old logs would report)."""
        return [name for pattern, _, name in self._candidates(text) for _ in pattern.finditer(text)]


DEFAULT: Any = "default"  # the redactors a session has unless told otherwise: one SecretRedactor


@functools.cache
def default_redactors() -> tuple[Redactor, ...]:
    return (SecretRedactor(),)


def check_redactors(redactors: Any) -> tuple[Redactor, ...]:
    """``redactors`` as a tuple of callables: None or ``()`` turns redaction off, ``DEFAULT`` is the default."""
    if redactors is None:
        return ()
    if isinstance(redactors, str) and redactors == DEFAULT:
        return default_redactors()
    if callable(redactors):
        redactors = (redactors,)
    if isinstance(redactors, (str, bytes)) or not isinstance(redactors, Sequence):
        raise TypeError(f"redactors must be a sequence of callables (str -> str) or None, not {redactors!r}")
    for redactor in redactors:
        if not callable(redactor):
            raise TypeError(f"a redactor must be a callable (str -> str), not {redactor!r}")
    return tuple(redactors)


# Fields that hold ids, times, tags and settings from closed lists: never free text, never rewritten. A thinking block's
# ``signature`` is the provider's opaque seal over it (base64): a match inside it is noise, and rewriting it would make the
# provider refuse the block. Names a writer chooses (model, provider, tool name, tool-call id, custom type) are redacted
# like text: a tool-call id is redacted the same way on the call and on its result, so they still pair.
_STRUCTURAL = frozenset({
    "type", "originator_id", "originator_version", "timestamp", "id", "parent_id", "target_id", "first_kept_entry_id",
    "from_id", "role", "api", "stop_reason", "thinking_level", "mime_type", "signature", "is_error", "display", "from_hook",
})
_NUMBERS = frozenset({"int", "float", "bool", "int | None", "float | None", "bool | None"})


_FIELDS: dict[type, tuple[str, ...]] = {}


def _text_fields(cls: type) -> tuple[str, ...]:
    """The fields of an attrs class that may hold text (annotations are strings: the modules use deferred ones). An
    image's data is not text: a match inside base64 would corrupt the image, not remove a secret."""
    found = _FIELDS.get(cls)
    if found is None:
        skip = _STRUCTURAL | ({"data"} if issubclass(cls, ImageContent) else set())
        if issubclass(cls, ToolCall):  # a tool call's id is the provider's, not an entry id
            skip = skip - {"id"}
        found = tuple(f.name for f in attrs.fields(cls) if f.name not in skip and str(f.type) not in _NUMBERS)
        _FIELDS[cls] = found
    return found


class _Walk:
    """One redaction pass over a value: strings run through every redactor; containers and attrs values are rebuilt
    only where something changed, so an entry without secrets comes back as the very same object. Written for the
    append path: no call per string or per empty field."""

    __slots__ = ("one", "redactors")

    def __init__(self, redactors: tuple[Redactor, ...]) -> None:
        self.redactors = redactors
        self.one = redactors[0] if len(redactors) == 1 else None

    def text(self, value: str) -> str:
        for redactor in self.redactors:
            value = redactor(value)
        return value

    def value(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return self.one(value) if self.one is not None else self.text(value)
        if isinstance(value, str):  # a str subclass (an enum, a YAML scalar): redacted as the plain text it is
            return self.text(str(value))
        if kind is tuple or kind is list:
            return self.items(value)
        if getattr(kind, "__attrs_attrs__", None) is not None:
            return self.obj(value)
        if isinstance(value, dict) or (kind not in _ATOMS and isinstance(value, Mapping)):
            return self.mapping(value)
        return value

    def items(self, value: Any) -> Any:
        out = None
        for n, item in enumerate(value):
            if item:
                new = self.value(item)
                if new is not item:
                    out = out or list(value)
                    out[n] = new
        return value if out is None else type(value)(out)

    def mapping(self, value: Mapping[str, Any]) -> Any:
        pairs = [(self.value(key), item if not item else self.value(item), key, item) for key, item in value.items()]
        if all(new_key is key and new is item for new_key, new, key, item in pairs):
            return value
        rebuilt = {new_key: new for new_key, new, _, _ in pairs}  # keys too: a token can be a key
        if isinstance(value, Extra):  # keep what the wire needs to write the value back (absent and null fields)
            return Extra(rebuilt, value.absent, value.nulls)
        return rebuilt

    def entry(self, entry: Any) -> Any:
        """The redacted entry: the most common one, a message of known blocks, is checked without the walk."""
        if entry.__class__ is MessageAppended and self.one is not None and self.plain_message(entry):
            return entry
        return self.obj(entry)

    def plain_message(self, entry: Any) -> bool:
        """Does no string of this message entry change? (False also when it holds what only the walk handles.)"""
        one: Redactor = self.one  # type: ignore[assignment]  # entry() calls this only with one redactor
        message = entry.message
        kind = message.__class__
        if kind not in _MESSAGES or entry.extra or message.extra:
            return False
        content = message.content
        if content.__class__ is str:
            if content and one(content) is not content:
                return False
        else:
            for block in content:
                kind_of = block.__class__
                if kind_of not in _BLOCKS or block.extra:
                    return False
                text = block.text if kind_of is TextContent else block.thinking if kind_of is ThinkingContent else None
                if text is not None:
                    if text and one(text) is not text:
                        return False
                elif kind_of is ToolCall:
                    name, args, call_id = block.name, block.arguments, block.id
                    if one(name) is not name or (call_id and one(call_id) is not call_id) or self.mapping(args) is not args:
                        return False
        if kind is AssistantMessage:
            usage, error = message.usage, message.error_message
            for name in (message.provider, message.model):
                if name and one(name) is not name:
                    return False
            return not (error and one(error) is not error) and (usage is None or not (usage.extra or usage.cost.extra))
        if kind is ToolResultMessage:
            for name in (message.tool_call_id, message.tool_name):
                if name and one(name) is not name:
                    return False
            details = message.details
            return details is None or self.value(details) is details
        return True

    def obj(self, value: Any) -> Any:
        changes = None
        one = self.one
        for name in _text_fields(type(value)):
            item = getattr(value, name)
            if not item:  # empty text, blocks or extra hold nothing to redact
                continue
            kind = type(item)
            new: Any
            if kind is str:
                new = one(item) if one is not None else self.text(item)
            elif name == "data" and type(value) in _TAGGED:  # an unknown role or block: its tag stays as it is
                tag = _TAGGED[type(value)]
                new = self.mapping({k: v for k, v in item.items() if k != tag})
                new = item if all(new[k] is item[k] for k in new) else {**item, **new}
            elif kind is Usage:
                if not item.extra and not item.cost.extra:  # numbers only
                    continue
                new = self.obj(item)
            else:
                new = self.value(item)
            if new is not item:
                changes = changes or {}
                changes[name] = new
        return attrs.evolve(value, **changes) if changes else value


_ATOMS = frozenset({int, float, bool, type(None)})
_MESSAGES = frozenset({UserMessage, AssistantMessage, ToolResultMessage})
_BLOCKS = frozenset({TextContent, ThinkingContent, ToolCall, ImageContent})
_TAGGED: dict[type, str] = {UnknownMessage: "role", UnknownContent: "type"}


def _unchanged(entry: Any) -> Any:
    return entry


def entry_redactor(redactors: tuple[Redactor, ...]) -> Callable[[Any], Any]:
    """A function from an entry (any attrs value) to the same entry with every string its fields carry run through
    ``redactors``: the very same object when none changed."""
    return _Walk(redactors).entry if redactors else _unchanged


def redact_entry(entry: Any, redactors: tuple[Redactor, ...]) -> Any:
    """``entry`` redacted once (see :func:`entry_redactor`)."""
    return entry_redactor(redactors)(entry)


__all__ = [
    "DEFAULT", "DEFAULT_RULES", "Redactor", "Rule", "SecretRedactor", "check_redactors", "default_redactors", "entry_redactor",
    "marker", "redact_entry",
]
