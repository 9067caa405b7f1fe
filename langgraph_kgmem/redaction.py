"""Secrets out of text: API keys, tokens and passwords replaced by ``<redacted>``.

Provider errors, connection strings and model replies can quote a key; whatever is kept (a
fallback record, a trace, a storage error) passes through :func:`redact_secrets` first. It depends
on nothing else in the package, so the model layer, the storage layer and tracing all use it
without importing each other.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

REDACTED = "<redacted>"
# keys whose values are secrets, whatever they hold
SECRET_KEY = re.compile(r"(api[_-]?key|apikey|authorization|auth[_-]?token|access[_-]?token|refresh[_-]?token|"
                        r"secret|password|passwd|pwd|credential|cookie|session[_-]?id|private[_-]?key)$|^token$",
                        re.IGNORECASE)
# a secret's name in "name=value" / "name: value" / '"name": "value"' (query strings, env lines,
# headers, JSON): the word may carry prefixes (openai_api_key, x-api-key, aws_secret_access_key);
# the bare words key, sig and auth only count before "=", where prose does not put them
_SECRET_NAME = (r"(?:[a-z0-9]{1,40}[_\-.]){0,4}(?:api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|secret|"
                r"password|passwd|pwd|token|authorization|credentials?|signature)")
_SECRET_VALUE = r"(\"[^\"]*\"|'[^']*'|[^\s,;&'\"<>]+)"
# secrets inside free text: provider keys, bearer/basic credentials, key=value pairs, URI passwords
_SECRET_TEXT = [
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
    (re.compile(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE), r"\1 " + REDACTED),
    (re.compile(r"(?i)(?<![a-z0-9])(" + _SECRET_NAME + r")([\"']?\s*[=:]\s*)" + _SECRET_VALUE), r"\1\2" + REDACTED),
    (re.compile(r"(?i)(?<![a-z0-9_\-.])((?:[a-z0-9]{1,40}[_\-.]){0,4}(?:key|sig|auth))(\s*=\s*)" + _SECRET_VALUE),
     r"\1\2" + REDACTED),
    # a URI password may itself hold "@": the userinfo ends at the LAST "@" before the host (a
    # password is not longer than 256 characters, which also bounds the regex's work)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^:/@\s\"'<>]*):([^\s\"'<>]{0,256})@(?=[^@\s\"'<>/?#]*(?:[/?#\s\"'<>,;)\]}]|$))"),
     r"\1:" + REDACTED + "@"),
]


def holds_secret(key: str, value: Any) -> bool:
    """Whether ``value`` sits under a secret-named ``key`` and is worth hiding (an empty or missing
    value says nothing, and stays visible so a reader sees the key was unset)."""
    return bool(SECRET_KEY.search(key)) and not (value is None or (isinstance(value, str) and not value))


def redact_secrets(text: str) -> str:
    """``text`` with API keys, bearer tokens, ``password=...``/``key=...`` pairs and URI passwords
    replaced by ``<redacted>`` (for traces, errors and the raw model output kept in fallback records)."""
    for pattern, repl in _SECRET_TEXT:
        text = pattern.sub(repl, text)
    return text


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


__all__ = ["REDACTED", "SECRET_KEY", "holds_secret", "redact", "redact_secrets"]
