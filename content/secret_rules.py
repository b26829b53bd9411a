"""The default redactor's rules: high-confidence secret formats, each a regular expression with the literal text that
every match contains (docs/audit.md, *Redaction on write*; docs/performance.md for the engines measured)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import attrs


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


__all__ = ["DEFAULT_RULES", "Rule", "marker", "replacer"]
