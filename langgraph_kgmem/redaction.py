"""Secrets out of text: API keys, tokens and passwords replaced by ``<redacted>``.

Provider errors, connection strings and model replies can quote a key; whatever is kept (a
fallback record, a trace, a storage error) passes through :func:`redact_secrets` first. It depends
on nothing else in the package, so the model layer, the storage layer and tracing all use it
without importing each other.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

REDACTED = "<redacted>"
# keys whose values are secrets, whatever they hold
SECRET_KEY = re.compile(r"(api[_-]?key|apikey|authorization|auth[_-]?token|access[_-]?token|refresh[_-]?token|"
                        r"secret|password|passwd|pwd|credential|cookie|session[_-]?id|private[_-]?key)$|^token$",
                        re.IGNORECASE)
# separators between a secret's name and its value: ASCII, fullwidth and small forms of ":" and "="
_SEP = "=:\uff1a\uff1d\ufe55\ufe66\ufe13"
# a secret's name in "name=value" / "name: value" / '"name": "value"' (query strings, env lines,
# headers, JSON): the word may carry prefixes (openai_api_key, x-api-key, aws_secret_access_key,
# Ocp-Apim-Subscription-Key); the bare words key, sig and auth only count before "=", where prose
# does not put them
_SECRET_NAME = (r"(?:[a-z0-9]{1,40}[_\-.]){0,4}(?:api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|secret|"
                r"subscription[_\-]?key|password|passwd|pwd|token|authorization|credentials?|signature)")
_SECRET_VALUE = r"(\"[^\"]*\"|'[^']*'|[^\s,;&'\"<>]+)"
# after a password's name an unquoted value may hold spaces: it runs to the end of the line or of
# the field, or to the next "name=" of a connection string
_PASSWORD_NAME = r"(?:[a-z0-9]{1,40}[_\-.]){0,4}(?:password|passwd|pwd|passphrase)"
_PASSWORD_VALUE = r"([^\s\"'<>,;&][^\n\r,;&\"'<>]{0,255}?)(?=\s+[a-z_][\w.\-]*\s*[" + _SEP + r"]|\s*[\n\r,;&\"'<>]|\s*$)"
# an HTTP authentication scheme the header names before the credential (kept, the credential goes)
_SCHEME = r"(?:(?:bearer|basic|token|digest|negotiate|apikey|sso-key)\s+)?"
# a token that looks random: 20+ characters of the alphabets keys are written in, mixing capitals,
# small letters and digits, with the character entropy of a random string (see token_looks_random)
RANDOM_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=_\-.])[A-Za-z0-9+/_\-]{20,}={0,2}(?![A-Za-z0-9+/=_\-])")
MIN_TOKEN_ENTROPY = 3.7   # bits per character; measured on the shipped corpora, see docs/reliability.md
# secrets inside free text: provider keys, bearer/basic credentials, key=value pairs, URI passwords
_SECRET_TEXT = [
    # a PEM private key, whole (an unterminated one to the end of the text)
    (re.compile(r"-----BEGIN ([A-Z0-9 ]{0,40})PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|\Z)", re.S),
     "-----BEGIN \\1PRIVATE KEY-----" + REDACTED),
    # provider keys by their prefixes (OpenAI, Anthropic, Stripe, LangSmith, GitHub, GitLab, Hugging
    # Face, Groq, xAI, npm, PyPI, Slack, Google, AWS); "*" because providers echo keys half-masked
    (re.compile(r"\b(sk|pk|rk)-(proj-|svcacct-|admin-|live-|test-|ant-(api\d\d-)?)?[A-Za-z0-9_\-*]{16,}"), REDACTED),
    (re.compile(r"\b(sk|pk|rk)_(live|test)_[A-Za-z0-9]{16,}"), REDACTED),
    (re.compile(r"\b(lsv2|ls)_(pt|sk)_[A-Za-z0-9_]{16,}"), REDACTED),
    (re.compile(r"\b(ghp|gho|ghu|ghs|ghr|github_pat|hf|gsk|npm)_[A-Za-z0-9_]{16,}"), REDACTED),
    (re.compile(r"\b(glpat|xai)-[A-Za-z0-9_\-]{16,}"), REDACTED),
    (re.compile(r"\bpypi-[A-Za-z0-9_\-]{16,}"), REDACTED),
    (re.compile(r"\bxox[a-z]-[A-Za-z0-9\-]{10,}"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"), REDACTED),
    (re.compile(r"\bya29\.[0-9A-Za-z_\-]{16,}"), REDACTED),
    (re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), REDACTED),   # JWT
    # webhook URLs carry their secret in the path (Slack, Discord, Teams/Office connectors)
    (re.compile(r"(?i)(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_\-]+"), r"\1" + REDACTED),
    (re.compile(r"(?i)(discord(?:app)?\.com/api/webhooks/)[A-Za-z0-9/_\-]+"), r"\1" + REDACTED),
    (re.compile(r"(?i)(\.webhook\.office\.com/webhookb2/)[A-Za-z0-9/@_\-]+"), r"\1" + REDACTED),
    # a credential after its scheme word: it has a digit or a capital inside, so "basic training"
    # and "Basic Interest Scales" stay
    (re.compile(r"\b((?i:bearer|basic|token))\s+(?=[A-Za-z0-9._~+/\-]*?(?:\d|[a-z][A-Z]))[A-Za-z0-9._~+/\-]{7,}"
                r"[A-Za-z0-9=]=?=?"), r"\1 " + REDACTED),
    # a password's value may hold spaces ("password=hunter 2")
    (re.compile(r"(?i)(?<![a-z0-9])(" + _PASSWORD_NAME + r")([\"']?\s*[" + _SEP + r"]\s*)" + _PASSWORD_VALUE),
     r"\1\2" + REDACTED),
    (re.compile(r"(?i)(?<![a-z0-9])(" + _SECRET_NAME + r")([\"']?\s*[" + _SEP + r"]\s*" + _SCHEME + r")"
                + r"(?!(?:bearer|basic|token|digest|negotiate)\b)" + _SECRET_VALUE),
     r"\1\2" + REDACTED),
    # a header whose name ends in -key/-token/-secret ("X-Goog-Api-Key:", "X-Vault-Token:")
    (re.compile(r"(?i)(?<![a-z0-9_\-.])((?:[a-z0-9]{1,40}-){1,4}(?:key|token|secret))(\s*[" + _SEP + r"]\s*)"
                + _SECRET_VALUE), r"\1\2" + REDACTED),
    (re.compile(r"(?i)(?<![a-z0-9_\-.])((?:[a-z0-9]{1,40}[_\-.]){0,4}(?:key|sig|auth))(\s*[=\uff1d]\s*)" + _SECRET_VALUE),
     r"\1\2" + REDACTED),
    # a key named in prose: "Invalid API key: 3f9c...", "the api key is abc123...", "access token was ..."
    (re.compile(r"(?i)\b((?:api|access|secret|private|subscription|auth(?:entication)?|session|bearer|refresh)"
                r"[ _\-]?(?:key|token|secret)s?(?:\s+(?:provided|given|used|supplied|sent|is|was|of|=|:|\uff1a))*"
                r"\s*[" + _SEP + r"]?\s*)(?=[^\s]*\d)([A-Za-z0-9_\-+/=.*]{6,})"), r"\1" + REDACTED),
]


_WORDLIKE = re.compile(r"[A-Z]?[a-z]{3,}")


def token_looks_random(token: str) -> bool:
    """Whether ``token`` (20+ characters of a key alphabet) reads as a random key rather than a
    word, name, id or number: a run of 16+ characters without ``-``, ``_`` or ``.`` (compounds such
    as ``Hewlett-Packard-Compaq-2002`` are words), capitals, small letters and digits mixed and
    alternating often (a key changes class at about 3 of 5 characters, CamelCase words at their
    word starts only), and a character entropy of at least :data:`MIN_TOKEN_ENTROPY` bits.
    Lower-case hex (content hashes, git ids, UUIDs) has no capitals and stays."""
    if max(len(part) for part in re.split(r"[-_.]", token)) < 16:
        return False
    if not (any(c.isupper() for c in token) and any(c.islower() for c in token) and any(c.isdigit() for c in token)):
        return False
    classes = [0 if c.isupper() else 1 if c.islower() else 2 if c.isdigit() else 3 for c in token]
    if sum(a != b for a, b in zip(classes, classes[1:])) < len(token) / 4:
        return False
    # CamelCase words: most letters sit in capitalised runs of 3+ small letters
    if sum(len(w) for w in _WORDLIKE.findall(token)) >= len(token) / 2:
        return False
    counts: dict[str, int] = {}
    for c in token:
        counts[c] = counts.get(c, 0) + 1
    n = len(token)
    return -sum(k / n * math.log2(k / n) for k in counts.values()) >= MIN_TOKEN_ENTROPY


def _random_token(match: "re.Match[str]") -> str:
    return REDACTED if token_looks_random(match.group(0)) else match.group(0)


# a URI's user information: "scheme://user:password@host"; the password may itself hold "@", ":",
# "/" or (unencoded) a space, so it ends at the LAST "@" before a host
_URI_START = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://")
_URI_HOST_END = re.compile(r"[^@\s\"'<>/?#]*(?:[/?#\s\"'<>,;)\]}]|$)")
_PORT = re.compile(r"\d{1,5}(?:[/?#].*)?$", re.S)
MAX_PASSWORD_CHARS = 4096


def _redact_uri_passwords(text: str) -> str:
    out, pos = [], 0
    for m in _URI_START.finditer(text):
        if m.start() < pos:
            continue
        i = m.end()
        user_end = i
        while user_end < len(text) and text[user_end] not in ":/@ \t\r\n\"'<>":
            user_end += 1
        if user_end >= len(text) or text[user_end] != ":":
            continue
        stop = min(len(text), user_end + 1 + MAX_PASSWORD_CHARS)
        line_end = text.find("\n", user_end, stop)
        stop = stop if line_end < 0 else line_end
        token_end = user_end + 1
        while token_end < stop and not text[token_end].isspace():
            token_end += 1
        # the password's end: the last "@" of the token followed by a host, else (a space in the
        # password) the first "@" + host further on the line, unless the token was a port
        at = _last_host_at(text, user_end + 1, token_end)
        if at < 0 and not _PORT.match(text, user_end + 1, token_end):
            at = _last_host_at(text, token_end, min(stop, token_end + 256), first=True)
        if at < 0:
            continue
        out.append(text[pos:user_end + 1] + REDACTED)
        pos = at
    return "".join(out) + text[pos:]


def _last_host_at(text: str, start: int, end: int, *, first: bool = False) -> int:
    found = -1
    at = text.find("@", start, end)
    while at >= 0:
        if _URI_HOST_END.match(text, at + 1):
            found = at
            if first:
                return at
        at = text.find("@", at + 1, end)
    return found


def holds_secret(key: str, value: Any) -> bool:
    """Whether ``value`` sits under a secret-named ``key`` and is worth hiding (an empty or missing
    value says nothing, and stays visible so a reader sees the key was unset)."""
    return bool(SECRET_KEY.search(key)) and not (value is None or (isinstance(value, str) and not value))


def redact_secrets(text: str) -> str:
    """``text`` with API keys, bearer tokens, ``password=...``/``key=...`` pairs and URI passwords
    replaced by ``<redacted>`` (for traces, errors and the raw model output kept in fallback records)."""
    text = _redact_uri_passwords(text)
    for pattern, repl in _SECRET_TEXT:
        text = pattern.sub(repl, text)
    return RANDOM_TOKEN.sub(_random_token, text)


def redact(value: Any, _depth: int = 0) -> Any:
    """``value`` with every secret redacted and nothing else changed (no cutting, no placeholders):
    strings through :func:`redact_secrets`, values under secret-named keys replaced, containers
    walked. For what a trace must keep whole: a run's error, metadata, events, serialized model."""
    if isinstance(value, str):
        return redact_secrets(value)
    if _depth > 20:   # deeper than any run payload: not walked, so not kept either
        return f"<{type(value).__name__}>"
    if isinstance(value, Mapping):
        return {k: REDACTED if isinstance(k, str) and holds_secret(k, v) else redact(v, _depth + 1)
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, _depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(redact(v, _depth + 1) for v in value)
    return value
