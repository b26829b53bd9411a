"""The default redactor's rules: high-confidence secret formats, each a regular expression led by literal text and
gated on one character (docs/audit.md, *Redaction on write*; docs/performance.md for the engines measured)."""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs


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


def replacer(name: str, has_secret: bool) -> Callable[[re.Match[str]], str]:
    if not has_secret:
        return lambda match: marker(name)

    def replace(match: re.Match[str]) -> str:
        whole, offset = match.group(0), match.start()
        return whole[: match.start("secret") - offset] + marker(name) + whole[match.end("secret") - offset :]

    return replace


__all__ = ["DEFAULT_RULES", "Rule", "marker", "replacer"]
