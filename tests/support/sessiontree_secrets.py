"""A corpus of secrets in the formats their issuers use, each inside the kind of text an agent sees (an env file, a
JSON config, a curl command, a traceback). Values are drawn from a seeded generator, so none is a live credential.

Each sample is ``(format, text, secret)``: ``secret`` is the part that must never be stored.
"""

from __future__ import annotations

import base64
import random
import string

_rng = random.Random(20261203)
_ALNUM = string.ascii_letters + string.digits
_HEX = "0123456789abcdef"
_B64 = string.ascii_letters + string.digits + "+/"


def _draw(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _b64_body(n_bytes: int, width: int = 64, newline: str = "\n") -> str:
    raw = base64.b64encode(bytes(_rng.randrange(256) for _ in range(n_bytes))).decode()
    return newline.join(raw[i:i + width] for i in range(0, len(raw), width))


def _pem(kind: str, newline: str = "\n", headers: str = "") -> str:
    label = f"{kind} PRIVATE KEY" if kind else "PRIVATE KEY"
    return f"-----BEGIN {label}-----{newline}{headers}{_b64_body(180, newline=newline)}{newline}-----END {label}-----"


def _samples() -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []

    def add(fmt: str, template: str, secret: str) -> None:
        out.append((fmt, template.format(s=secret), secret))

    aws_id = "AKIA" + _draw(string.ascii_uppercase + string.digits, 16)
    add("aws-access-key-id", "export AWS_ACCESS_KEY_ID={s}", aws_id)
    add("aws-access-key-id", '{{"AccessKeyId": "{s}"}}', "ASIA" + _draw(string.ascii_uppercase + string.digits, 16))
    aws_secret = _draw(_ALNUM + "/+", 40)
    add("aws-secret-access-key", "aws_secret_access_key = {s}", aws_secret)
    add("aws-secret-access-key", "AWS_SECRET_ACCESS_KEY={s}", _draw(_ALNUM + "/+", 40))
    add("aws-secret-access-key", '"SecretAccessKey": "{s}",', _draw(_ALNUM + "/+", 40))
    add("google-api-key", "https://maps.googleapis.com/maps/api/geocode/json?key={s}", "AIza" + _draw(_ALNUM + "_-", 35))
    for prefix in ("ghp_", "gho_", "ghs_", "ghu_", "ghr_"):
        add("github-token", "git clone https://x-access-token:{s}@github.com/acme/app", prefix + _draw(_ALNUM, 36))
    add("github-token", "GITHUB_TOKEN={s}", "github_pat_" + _draw(_ALNUM, 22) + "_" + _draw(_ALNUM, 59))
    add("gitlab-token", "PRIVATE-TOKEN: {s}", "glpat-" + _draw(_ALNUM + "_-", 20))
    add("stripe-key", "stripe.api_key = '{s}'", "sk_live_" + _draw(_ALNUM, 99))
    add("stripe-key", "STRIPE_RESTRICTED={s}", "rk_live_" + _draw(_ALNUM, 24))
    add("slack-token", "SLACK_BOT_TOKEN={s}", "xoxb-" + _draw(string.digits, 12) + "-" + _draw(string.digits, 13) + "-" + _draw(_ALNUM, 24))
    add("slack-token", "token: {s}", "xoxp-" + _draw(string.digits, 12) + "-" + _draw(string.digits, 12) + "-" + _draw(_HEX, 32))
    add("slack-webhook", "curl -X POST https://{s} -d '{{}}'",
        "hooks.slack.com/services/T" + _draw(_ALNUM.upper(), 8) + "/B" + _draw(_ALNUM.upper(), 10) + "/" + _draw(_ALNUM, 24))
    add("anthropic-api-key", "ANTHROPIC_API_KEY={s}", "sk-ant-api03-" + _draw(_ALNUM + "_-", 93) + "AA")
    add("anthropic-api-key", "x-api-key: {s}", "sk-ant-admin01-" + _draw(_ALNUM + "_-", 80))
    add("openai-api-key", "OPENAI_API_KEY={s}", "sk-proj-" + _draw(_ALNUM + "_-", 74) + "T3BlbkFJ" + _draw(_ALNUM + "_-", 74))
    add("openai-api-key", "client = OpenAI(api_key='{s}')", "sk-" + _draw(_ALNUM, 20) + "T3BlbkFJ" + _draw(_ALNUM, 20))
    add("private-key", "$ cat ~/.ssh/id_ed25519\n{s}\n", _pem("OPENSSH"))
    add("private-key", "key.pem:\n{s}", _pem("RSA"))
    add("private-key", "{s}", _pem("EC"))
    add("private-key", "{s}", _pem("", headers=""))
    add("private-key", "{s}", _pem("ENCRYPTED"))
    add("private-key", "{s}", _pem("RSA", headers="Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,"
                                                  + _draw(_HEX, 32).upper() + "\n\n"))
    # a service-account JSON key: the PEM written with \n escapes inside a JSON string
    sa_key = _pem("", newline="\\n")
    add("private-key", '{{"type": "service_account", "project_id": "acme-prod", "private_key_id": "' + _draw(_HEX, 40)
        + '", "private_key": "{s}\\n", "client_email": "svc@acme-prod.iam.gserviceaccount.com"}}', sa_key)
    pgp = ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nComment: GPGTools - https://gpgtools.org\n\n" + _b64_body(240)
           + "\n=" + _draw(_ALNUM, 4) + "\n-----END PGP PRIVATE KEY BLOCK-----")
    add("private-key", "gpg --export-secret-keys -a:\n{s}", pgp)
    add("private-key", "{s}", "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\nComment: backup key\n\n"
        + _b64_body(200) + "\n=" + _draw(_ALNUM, 4) + "\n-----END PGP PRIVATE KEY BLOCK-----")
    add("bearer-token", "curl -H 'Authorization: Bearer {s}' https://api.example.com/v1/me",
        "eyJ" + _draw(_ALNUM, 30) + "." + _draw(_ALNUM + "_-", 80) + "." + _draw(_ALNUM + "_-", 43))
    add("bearer-token", '{{"headers": {{"authorization": "Bearer {s}"}}}}', _draw(_ALNUM, 40) + "9")
    add("basic-auth", "Authorization: Basic {s}", base64.b64encode(b"admin:" + _draw(_ALNUM, 16).encode()).decode())
    add("url-password", "DATABASE_URL=postgresql://app:{s}@db.internal:5432/prod", _draw(_ALNUM, 20))
    add("url-password", "redis://default:{s}@cache:6379/0", "p%40ss" + _draw(_ALNUM, 8) + "%21")
    add("url-password", "mongodb+srv://admin:{s}@cluster0.mongodb.net/", "Pa$$w0rd" + _draw(_ALNUM, 6))
    add("url-password", "amqp://user%40corp:{s}@mq:5672/", _draw(_ALNUM, 14) + "%2F" + _draw(_ALNUM, 3))
    add("url-password", "https://deploy:{s}@git.example.com/repo.git", "x$" + _draw(_ALNUM, 12) + "%"+ "7E")
    add("jwt", "cookie: session={s}", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIx" + _draw(_ALNUM, 40) + "." + _draw(_ALNUM + "_-", 43))
    add("npm-token", "//registry.npmjs.org/:_authToken={s}", "npm_" + _draw(_ALNUM, 36))
    add("pypi-token", "password = {s}", "pypi-AgEIcHlwaS5vcmc" + _draw(_ALNUM + "_-", 60))
    add("huggingface-token", "HF_TOKEN={s}", "hf_" + _draw(_ALNUM, 34))
    add("sendgrid-key", "SENDGRID_API_KEY={s}", "SG." + _draw(_ALNUM + "_-", 22) + "." + _draw(_ALNUM + "_-", 43))
    add("digitalocean-token", "DIGITALOCEAN_TOKEN={s}", "dop_v1_" + _draw(_HEX, 64))
    add("shopify-token", "X-Shopify-Access-Token: {s}", "shpat_" + _draw(_HEX, 32))
    add("groq-api-key", "GROQ_API_KEY={s}", "gsk_" + _draw(_ALNUM, 52))
    add("xai-api-key", "XAI_API_KEY={s}", "xai-" + _draw(_ALNUM, 80))
    add("hashicorp-vault-token", "VAULT_TOKEN={s}", "hvs." + _draw(_ALNUM + "_-", 90))
    add("databricks-token", "DATABRICKS_TOKEN={s}", "dapi" + _draw(_HEX, 32))
    add("age-secret-key", "# created: 2026-01-01\n{s}", "AGE-SECRET-KEY-1" + _draw(string.ascii_uppercase + "023456789", 58))
    add("postman-key", "POSTMAN_API_KEY={s}", "PMAK-" + _draw(_HEX, 24) + "-" + _draw(_HEX, 34))
    add("telegram-bot-token", "bot = Bot(token='{s}')", _draw(string.digits, 10) + ":AA" + _draw(_ALNUM + "_-", 33))
    add("azure-storage-key", "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={s};EndpointSuffix=core.windows.net",
        _draw(_B64, 86) + "==")
    add("google-oauth-secret", '{{"client_secret": "{s}"}}', "GOCSPX-" + _draw(_ALNUM + "_-", 28))
    add("linear-api-key", "LINEAR_API_KEY={s}", "lin_api_" + _draw(_ALNUM, 40))
    add("atlassian-token", "JIRA_TOKEN={s}", "ATATT3xFfGF0" + _draw(_ALNUM + "_-", 170) + "=" + _draw(_HEX.upper(), 8))
    add("sentry-token", "SENTRY_AUTH_TOKEN={s}", "sntrys_" + _draw(_ALNUM, 60))
    add("grafana-token", "GRAFANA_TOKEN={s}", "glsa_" + _draw(_ALNUM, 32) + "_" + _draw(_HEX, 8))
    add("newrelic-key", "NEW_RELIC_API_KEY={s}", "NRAK-" + _draw(string.ascii_uppercase + string.digits, 27))
    add("twilio-key", "TWILIO_API_KEY={s}", "SK" + _draw(_HEX, 32))
    add("mailgun-key", "MAILGUN_API_KEY={s}", "key-" + _draw(_HEX, 32))
    add("supabase-token", "SUPABASE_ACCESS_TOKEN={s}", "sbp_" + _draw(_HEX, 40))
    add("planetscale-token", "PLANETSCALE_TOKEN={s}", "pscale_tkn_" + _draw(_ALNUM + "_-", 43))
    add("doppler-token", "DOPPLER_TOKEN={s}", "dp.st.prd." + _draw(_ALNUM, 40))
    add("generic-secret", "DB_PASSWORD={s}", _draw(_ALNUM, 18) + "7")
    add("generic-secret", "export API_SECRET='{s}'", _draw(_ALNUM, 32))
    add("generic-secret", '"client_secret": "{s}"', _draw(_ALNUM + "_-", 40))
    return out


SAMPLES: list[tuple[str, str, str]] = _samples()

# Text that looks like secrets but is not: placeholders, docs, identifiers and prose an agent sees every day.
LOOKALIKES: list[str] = [
    'url = f"postgresql://{user}:{password}@{host}/db"', "postgres://${PGUSER}:${PGPASSWORD}@db/app",
    "mysql://%(user)s:%(password)s@%(host)s/db", "DATABASE_URL=postgres://<user>:<password>@localhost/dev",
    "The Bearer authentication/authorization scheme", 'if pem.startswith("-----BEGIN PRIVATE KEY-----"):\n    load(pem)',
    "AKIA is the prefix of an AWS access key id", "git@github.com:acme/app.git", "ssh://git@github.com/acme/app",
    "export PASSWORD=$(cat /run/secrets/db)", "DB_PASSWORD=${DB_PASSWORD}", "API_SECRET=changeme", "password = getpass()",
    "token = os.environ['GITHUB_TOKEN']", "sk-learn is not a key", "hf_hub_download(repo_id='gpt2')",
    "npm_config_cache=/tmp/npm", "key-value store", "SG.default configuration", "the sha256 is " + "0123456789abcdef" * 4,
    "uuid 123e4567-e89b-12d3-a456-426614174000", "https://user@example.com/path", "mailto:someone@example.com",
    "def test_stripe_key_live_mode(): ...", "glsa_ is Grafana's prefix", "commit 3f2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a",
    "Authorization header missing", "SKU-12345", "dapi is a Databricks prefix",
]
