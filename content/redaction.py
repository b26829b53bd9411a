"""Redaction on write: secrets in an entry are replaced before it is encoded, so they never reach a file.

A *redactor* is any callable from a str to a str (the same object when it changes nothing). A session runs its
redactors over every string an entry carries (message text and blocks, tool arguments and output, summaries, labels,
names, custom data, unknown fields), then saves the redacted entry: the log, the live session and every projection see
the same values. :class:`SecretRedactor` is the default; its rules (``DEFAULT_RULES``) are high-confidence secret
formats, each a regular expression with the literal text every match contains; see docs/audit.md, *Redaction on write*.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
from ahocorasick_rs import AhoCorasick

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


def _literals(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):  # one literal given bare would become its characters
        return (value,)
    return tuple(value)


@attrs.frozen
class Rule:
    """A named secret format. ``pattern`` is a regular expression; its group ``secret``, when it has one, is the part
    replaced (so ``Authorization: Bearer`` or a URL's user stay readable), else the whole match.

    ``literals``: strings one of which every match contains (its prefix, usually). The redactor looks for every rule's
    literals in one pass over the text, in C (Aho-Corasick), and runs a rule only on text holding one of them.
    ``gate``: for a rule without literals, a character every match contains; strings without it are not searched.
    With neither, the rule searches every string."""

    name: str
    pattern: str
    gate: str = attrs.field(default="", kw_only=True)
    literals: tuple[str, ...] = attrs.field(default=(), kw_only=True, converter=_literals)

    def __attrs_post_init__(self) -> None:
        if len(self.gate) > 1:
            raise ValueError(f"rule {self.name!r}: gate must be one character or empty, not {self.gate!r}")
        re.compile(self.pattern)  # a bad expression fails here, naming nothing else
        if not all(isinstance(x, str) and x for x in self.literals):
            raise ValueError(f"rule {self.name!r}: literals must be non-empty strings, not {self.literals!r}")


_KEY = r"[A-Za-z0-9_\-]"
_TOKEN = r"[A-Za-z0-9\-._~+/]"
_END = r"(?![A-Za-z0-9_\-])"  # a token ends where its alphabet does
_NL = r"(?:\r?\n|\\r?\\n)"  # a line break, or one written as an escape inside a JSON string (a service-account key)
_NAME = r"[\"']?\s{0,8}[:=]\s{0,8}[\"']?"  # what joins a name to its value: KEY=..., "key": "...", key: '...'
_AUTHORIZATION = rf"(?:uthorization|UTHORIZATION){_NAME}"  # the header, its first letter in either case
# a URL's user or password: anything but what ends it, and % only as an escape (%40); a password may hold $ (pa$$)
_URL_USER = r"(?:[^\s/:@\"'<>{}%$]|%[0-9A-Fa-f]{2}){1,256}"
_SECRET_CHARS = r"[A-Za-z0-9_\-+/=.!@#%^&*~]"
_SECRET_VALUE = rf"(?P<secret>(?={_SECRET_CHARS}{{0,255}}[0-9]){_SECRET_CHARS}{{12,256}})(?![A-Za-z0-9_\-+/=.!@#%^&*~$({{<])"
_URL_PASSWORD = r"(?:[^\s/@\"'<>{}%]|%[0-9A-Fa-f]{2}){1,256}"


def _token(name: str, prefix: str, body: str) -> Rule:
    """A token that is a literal prefix and then its body."""
    return Rule(name, rf"{re.escape(prefix)}{body}{_END}", literals=(prefix,))


def _spellings(*names: str) -> tuple[str, ...]:
    """A name as code spells it: lower, UPPER and Capitalised."""
    return tuple(dict.fromkeys(spelt for name in names for spelt in (name, name.upper(), name.capitalize())))


# High-confidence formats only: each has a fixed prefix or structure, so ordinary text does not match. Every repetition
# is bounded (no input makes a search quadratic).
DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("aws-access-key-id", r"A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Za-z0-9])", literals=("AKIA", "ASIA", "ABIA", "ACCA")),
    _token("google-api-key", "AIza", r"[0-9A-Za-z_\-]{35}"),
    Rule("aws-secret-access-key",
         rf"(?:secret_access_key|SECRET_ACCESS_KEY|SecretAccessKey){_NAME}(?P<secret>[A-Za-z0-9/+]{{40}})(?![A-Za-z0-9/+])",
         literals=("secret_access_key", "SECRET_ACCESS_KEY", "SecretAccessKey")),
    Rule("github-token", r"gh[pousr]_[A-Za-z0-9]{36,255}(?![A-Za-z0-9_])", literals=tuple(f"gh{c}_" for c in "pousr")),
    _token("github-token", "github_pat_", "[A-Za-z0-9_]{22,255}"),
    Rule("stripe-key", r"[sr]k_live_[A-Za-z0-9]{20,255}", literals=("k_live_",)),
    Rule("gitlab-token", rf"gl(?:pat|dt|ptt|rt)-{_KEY}{{20,255}}", literals=("glpat-", "gldt-", "glptt-", "glrt-")),
    Rule("slack-token", r"xox[abposr]-[A-Za-z0-9\-]{10,255}", literals=tuple(f"xox{c}-" for c in "abposr")),
    _token("anthropic-api-key", "sk-ant-", rf"{_KEY}{{20,255}}"),
    Rule("openai-api-key", rf"sk-(?:proj-|svcacct-|admin-)?{_KEY}{{20,160}}T3BlbkFJ{_KEY}{{20,160}}", literals=("T3BlbkFJ",)),
    # The body is base64, after up to eight armor headers (Proc-Type, DEK-Info, PGP's Version and Comment); lines may be
    # broken by escapes (a service-account JSON key). The body has no dash, so a search stops at the next "-----".
    Rule("private-key", r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----(?:[ \t]|" + _NL + "){0,4}"
                        r"(?:[A-Za-z][A-Za-z\-]{0,31}:[^\n\\]{0,256}" + _NL + "){0,8}"
                        r"(?:[A-Za-z0-9+/=\s]|\\[nr]){16,16384}?"
                        r"-----END (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----", literals=("PRIVATE KEY",)),
    Rule("slack-webhook", r"hooks\.slack\.com/services/T[A-Za-z0-9_]{1,64}/B[A-Za-z0-9_]{1,64}/[A-Za-z0-9_]{1,64}",
         literals=("hooks.slack.com/services/",)),
    # A password, not a template's placeholder ({password}, $PASSWORD, ${PASSWORD}, %(password)s, <password>).
    Rule("url-password", rf"://{_URL_USER}:(?!\$\{{?[A-Za-z_][A-Za-z0-9_]{{0,64}}\}}?@)(?P<secret>{_URL_PASSWORD})@",
         literals=("://",)),
    # a token has a digit: "Bearer authentication/authorization" in prose is not one
    Rule("bearer-token", rf"(?:Bearer|BEARER)\s{{1,8}}(?P<secret>(?={_TOKEN}{{0,64}}[0-9]){_TOKEN}{{16,4096}}={{0,2}})",
         literals=("Bearer", "BEARER")),
    Rule("bearer-token", rf"{_AUTHORIZATION}(?:[Bb]earer|BEARER)\s{{1,8}}(?P<secret>{_TOKEN}{{16,4096}}={{0,2}})",
         literals=("uthorization", "UTHORIZATION")),
    Rule("basic-auth", rf"{_AUTHORIZATION}(?:[Bb]asic|BASIC)\s{{1,8}}(?P<secret>[A-Za-z0-9+/]{{8,4096}}={{0,2}})",
         literals=("uthorization", "UTHORIZATION")),
    Rule("jwt", r"eyJ[A-Za-z0-9_\-]{8,4096}\.eyJ[A-Za-z0-9_\-]{8,8192}\.[A-Za-z0-9_\-]{8,4096}", literals=("eyJ",)),
    _token("npm-token", "npm_", "[A-Za-z0-9]{36}"),
    _token("pypi-token", "pypi-AgEIcHlwaS5vcmc", r"[A-Za-z0-9_\-]{50,1000}"),
    _token("huggingface-token", "hf_", "[A-Za-z0-9]{34,40}"),
    _token("sendgrid-key", "SG.", r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"),
    Rule("digitalocean-token", rf"do[opr]_v1_[0-9a-f]{{64}}{_END}", literals=("_v1_",)),
    Rule("shopify-token", rf"shp(?:at|ca|pa|ss)_[0-9a-fA-F]{{32}}{_END}", literals=("shpat_", "shpca_", "shppa_", "shpss_")),
    _token("groq-api-key", "gsk_", "[A-Za-z0-9]{52}"),
    _token("xai-api-key", "xai-", "[A-Za-z0-9]{80}"),
    Rule("hashicorp-vault-token", rf"hv[sb]\.[A-Za-z0-9_\-]{{24,255}}{_END}", literals=("hvs.", "hvb.")),
    _token("databricks-token", "dapi", "[0-9a-f]{32}(?:-[0-9])?"),
    _token("age-secret-key", "AGE-SECRET-KEY-1", "[0-9A-Z]{58}"),
    _token("postman-key", "PMAK-", "[0-9a-f]{24}-[0-9a-f]{34}"),
    _token("google-oauth-secret", "GOCSPX-", r"[A-Za-z0-9_\-]{28}"),
    _token("linear-api-key", "lin_api_", "[A-Za-z0-9]{40}"),
    Rule("atlassian-token", r"ATATT3[A-Za-z0-9_\-=]{100,400}(?![A-Za-z0-9_\-=])", literals=("ATATT3",)),
    Rule("sentry-token", rf"sntry[su]_[A-Za-z0-9+/=_\-]{{40,400}}{_END}", literals=("sntrys_", "sntryu_")),
    _token("grafana-token", "glsa_", "[A-Za-z0-9]{32}_[0-9a-f]{8}"),
    _token("grafana-token", "glc_", "[A-Za-z0-9+/]{32,400}={0,2}"),
    _token("newrelic-key", "NRAK-", "[A-Z0-9]{27}"),
    Rule("twilio-key", r"(?<![A-Za-z0-9])SK[0-9a-f]{32}(?![A-Za-z0-9])", literals=("SK",)),
    _token("mailgun-key", "key-", "[0-9a-f]{32}"),
    _token("supabase-token", "sbp_", "[0-9a-f]{40}"),
    Rule("planetscale-token", rf"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.\-]{{32,64}}{_END}", literals=("pscale_",)),
    Rule("doppler-token", rf"dp\.(?:st|ct|sa|scim|audit|pt)\.[A-Za-z0-9_.\-]{{16,255}}{_END}", literals=("dp.",)),
    Rule("telegram-bot-token", r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])", literals=(":AA",)),
    Rule("azure-storage-key", r"AccountKey=(?P<secret>[A-Za-z0-9+/]{86}==)", literals=("AccountKey=",)),
    # A value assigned to a name that says it is a secret: at least 12 characters, one of them a digit, and not a
    # template or an expression (no $, {, <, (, spaces); "password = getpass()" and "TOKEN=${TOKEN}" stay.
    Rule("generic-secret", r"(?i:password|passwd|secret|api_?key|access_?token|auth_?token|private_?key)" + _NAME + _SECRET_VALUE,
         literals=_spellings("password", "passwd", "secret", "api_key", "apikey", "apiKey", "access_token", "accessToken",
                             "auth_token", "authToken", "private_key", "privateKey")),
)


def marker(rule: str) -> str:
    """What replaces a secret: it names the rule that matched and holds nothing of the secret."""
    return f"[REDACTED:{rule}]"


def replacer(name: str, has_secret: bool) -> Callable[[re.Match[str]], str]:
    if not has_secret:
        return lambda match: marker(name)

    def replace(match: re.Match[str]) -> str:
        whole, offset = match.group(0), match.start()
        return whole[: match.start("secret") - offset] + marker(name) + whole[match.end("secret") - offset :]

    return replace


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
                rest = {k: v for k, v in item.items() if k != tag}
                walked = self.mapping(rest)
                if walked is rest:
                    new = item
                else:  # rebuilt, keys too (a redacted key replaces the old one), with the tag back where it was
                    pairs = list(walked.items())
                    if tag in item:
                        pairs.insert(list(item).index(tag), (tag, item[tag]))
                    new = dict(pairs)
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
