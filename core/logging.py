"""A logging filter that removes credentials from every record before output.

Defence in depth: code never logs secrets on purpose, and this filter redacts
bearer values, API keys, tickets and invite fragments should one slip through.
"""

import logging
import re

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
