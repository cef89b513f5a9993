"""A logging filter that removes credentials from every record before output.

Defence in depth: code never logs secrets on purpose, and this filter redacts
bearer values, API keys, tickets, invite fragments and named secrets (``password=…``,
``{"password": "…"}``, ``totp_secret=…``) should one slip through.
"""

import logging
import re

# Field names whose values are secrets wherever they appear (username-free: a username is not a secret).
_SECRET_NAMES = r"(?:password|passwd|pwd|passphrase|secret|client_secret|totp_secret|totp|otp|api_key|apikey|private_key)"

_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(r"ram_(?:rk|ok)_[A-Za-z0-9]+_[A-Za-z0-9_-]+"),
    re.compile(r"ram-ticket\.[A-Za-z0-9_-]+"),
    re.compile(r"#(?:invite|token)=[^\s\"']+"),
    re.compile(r"(?i)(x-(?:vault-token|ram-invite)['\"]?\s*[:=]\s*['\"]?)[^\s'\"]+"),
    # One-time values in a query string (OAuth code and state, tokens, tickets, invites).
    re.compile(r"(?i)([?&](?:code|state|token|ticket|invite|access_token|refresh_token)=)[^&\s\"']+"),
    # Webhook signing secrets (Standard Webhooks).
    re.compile(r"whsec_[A-Za-z0-9+/=_-]+"),
    # Vault/OpenBao tokens.
    re.compile(r"\b(?:hv[sbr]|[sbr])\.[A-Za-z0-9_-]{20,}"),
    # A named secret as JSON or a Python repr: {"password": "hunter2"}, {'totp_secret': '...'}.
    re.compile(rf"(?i)(['\"]{_SECRET_NAMES}['\"]\s*:\s*)(?:\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^\s,}}]+)"),
    # A named secret as key=value (form bodies, query strings, messages).
    re.compile(rf"(?i)(\b{_SECRET_NAMES}\s*=\s*)[^\s&,;'\"]+"),
]


def redact(text: str) -> str:
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "[redacted]", text)
    return text


class RedactSecretsFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True
