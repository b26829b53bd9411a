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

from sessiontree.domain.events import MessageAppended
from sessiontree.domain.extra import Extra
from sessiontree.domain.messages import (
    AssistantMessage,
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


@attrs.frozen
class Rule:
    """A named secret format. ``pattern`` is a regular expression; its group ``secret``, when it has one, is the part
    replaced (so ``Authorization: Bearer`` or a URL's user stay readable), else the whole match. ``gate``: a character
    every match contains; strings without it are not searched (finding one character is far cheaper than running the
    expression). The default ``""`` searches every string."""

    name: str
    pattern: str
    gate: str = attrs.field(default="", kw_only=True)

    def __attrs_post_init__(self) -> None:
        if len(self.gate) > 1:
            raise ValueError(f"rule {self.name!r}: gate must be one character or empty, not {self.gate!r}")
        re.compile(self.pattern)  # a bad expression fails here, naming nothing else


_KEY = r"[A-Za-z0-9_\-]"
_TOKEN = r"[A-Za-z0-9\-._~+/]"
# High-confidence formats only: each has a fixed prefix or structure, so ordinary text does not match. Each pattern
# starts with literal text (which the regex engine searches for fast), every repetition is bounded (no input makes a
# search quadratic), and each gate is a character the format cannot lack and ordinary prose seldom has.
DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("aws-access-key-id", r"A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Za-z0-9])", gate="A"),
    Rule("google-api-key", r"AIza[0-9A-Za-z_\-]{35}(?![A-Za-z0-9_\-])", gate="A"),
    *(Rule("aws-secret-access-key", rf"{name}[\"']?\s{{0,8}}[:=]\s{{0,8}}[\"']?(?P<secret>[A-Za-z0-9/+]{{40}})(?![A-Za-z0-9/+])",
           gate="_") for name in ("secret_access_key", "SECRET_ACCESS_KEY")),
    Rule("aws-secret-access-key", r"SecretAccessKey[\"']?\s{0,8}[:=]\s{0,8}[\"']?(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
         gate="K"),
    Rule("github-token", r"gh[pousr]_[A-Za-z0-9]{36,255}(?![A-Za-z0-9_])", gate="_"),
    Rule("github-token", r"github_pat_[A-Za-z0-9_]{22,255}", gate="_"),
    *(Rule("stripe-key", rf"{kind}k_live_[A-Za-z0-9]{{20,255}}", gate="_") for kind in "sr"),
    Rule("gitlab-token", rf"gl(?:pat|dt|ptt|rt)-{_KEY}{{20,255}}", gate="-"),
    Rule("slack-token", r"xox[abposr]-[A-Za-z0-9\-]{10,255}", gate="-"),
    Rule("anthropic-api-key", rf"sk-ant-{_KEY}{{20,255}}", gate="-"),
    Rule("openai-api-key", rf"sk-(?:proj-|svcacct-|admin-)?{_KEY}{{20,160}}T3BlbkFJ{_KEY}{{20,160}}", gate="-"),
    # the body is base64 (and an encrypted key's two header lines): no dash, so a search stops at the next "-----"
    Rule("private-key", r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----\s{0,4}(?:Proc-Type:[^\n]{0,64}\n)?"
                        r"(?:DEK-Info:[^\n]{0,128}\n)?[A-Za-z0-9+/=\s:,]{16,16384}?"
                        r"-----END (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----", gate="-"),
    Rule("slack-webhook", r"hooks\.slack\.com/services/T[A-Za-z0-9_]{1,64}/B[A-Za-z0-9_]{1,64}/[A-Za-z0-9_]{1,64}", gate="/"),
    # a password, not a template's placeholder ({password}, $PASSWORD, %(password)s, <password>)
    Rule("url-password", r"://[^\s/:@\"'<>{}$%]{1,256}:(?P<secret>[^\s/@\"'<>{}$%]{1,256})@", gate="@"),
    # a token has a digit: "Bearer authentication/authorization" in prose is not one
    *(Rule("bearer-token", rf"{name}\s{{1,8}}(?P<secret>(?={_TOKEN}{{0,64}}[0-9]){_TOKEN}{{16,4096}}={{0,2}})", gate="B")
      for name in ("Bearer", "BEARER")),
    *(Rule("bearer-token", rf"{name}[\"']?\s{{0,8}}[:=]\s{{0,8}}[\"']?(?:[Bb]earer|BEARER)\s{{1,8}}"
                           rf"(?P<secret>{_TOKEN}{{16,4096}}={{0,2}})", gate=gate)
      for name, gate in (("uthorization", "z"), ("UTHORIZATION", "Z"))),
)


def marker(rule: str) -> str:
    """What replaces a secret: it names the rule that matched and holds nothing of the secret."""
    return f"[REDACTED:{rule}]"


def _replacer(name: str, has_secret: bool) -> Callable[[re.Match[str]], str]:
    if not has_secret:
        return lambda match: marker(name)

    def replace(match: re.Match[str]) -> str:
        whole, offset = match.group(0), match.start()
        return whole[: match.start("secret") - offset] + marker(name) + whole[match.end("secret") - offset :]

    return replace


class SecretRedactor:
    """The default redactor: replaces every match of its rules (``DEFAULT_RULES``, plus ``extra_rules``) with
    ``[REDACTED:<rule>]``."""

    def __init__(self, rules: Iterable[Rule] = DEFAULT_RULES, *, extra_rules: Iterable[Rule] = ()) -> None:
        self.rules = (*rules, *extra_rules)
        by_gate: dict[str, list[tuple[Any, Any, str]]] = {}
        for rule in self.rules:
            if not isinstance(rule, Rule):
                raise TypeError(f"rules must be Rule objects, not {rule!r}")
            pattern = re.compile(rule.pattern)
            replace = _replacer(rule.name, "secret" in pattern.groupindex)
            by_gate.setdefault(rule.gate, []).append((pattern, replace, rule.name))
        self._gates = tuple((gate, tuple(found)) for gate, found in by_gate.items())

    def __repr__(self) -> str:
        return f"SecretRedactor({len(self.rules)} rules)"

    def __call__(self, text: str) -> str:
        for gate, found in self._gates:
            if gate in text:
                for pattern, replace, _ in found:
                    if pattern.search(text) is not None:
                        text = pattern.sub(replace, text)
        return text

    def findings(self, text: str) -> list[str]:
        """The names of the rules that match ``text`` (what a scan of old logs would report)."""
        return [name for gate, found in self._gates if gate in text for pattern, _, name in found
                for _ in pattern.finditer(text)]


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


# Fields that hold ids, times, tags, names and settings: never free text, never rewritten.
_STRUCTURAL = frozenset({
    "type", "originator_id", "originator_version", "timestamp", "id", "parent_id", "target_id", "first_kept_entry_id",
    "from_id", "role", "provider", "model", "model_id", "api", "stop_reason", "thinking_level", "mime_type",
    "tool_call_id", "tool_name", "custom_type", "signature", "is_error", "display", "from_hook",
})
_NUMBERS = frozenset({"int", "float", "bool", "int | None", "float | None", "bool | None"})


_FIELDS: dict[type, tuple[str, ...]] = {}


def _text_fields(cls: type) -> tuple[str, ...]:
    """The fields of an attrs class that may hold text (annotations are strings: the modules use deferred ones). An
    image's data is not text: a match inside base64 would corrupt the image, not remove a secret."""
    found = _FIELDS.get(cls)
    if found is None:
        skip = _STRUCTURAL | ({"data"} if issubclass(cls, ImageContent) else set())
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
                    name, args = block.name, block.arguments
                    if one(name) is not name or self.mapping(args) is not args:
                        return False
        if kind is AssistantMessage:
            usage, error = message.usage, message.error_message
            return not (error and one(error) is not error) and (usage is None or not (usage.extra or usage.cost.extra))
        if kind is ToolResultMessage:
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
