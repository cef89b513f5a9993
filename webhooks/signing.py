"""Standard Webhooks signing, and the endpoint secrets at rest.

A secret is ``whsec_`` + base64 of 32 random bytes. A delivery carries
``webhook-id``, ``webhook-timestamp`` (Unix seconds, taken at each attempt)
and ``webhook-signature``: ``v1,`` + base64 HMAC-SHA256, keyed with the
secret's bytes, over ``<id>.<timestamp>.<body>``; several space-separated
signatures while a rotated-out secret still signs.

Secrets are stored encrypted with Fernet (AES-128-CBC and HMAC-SHA256) under
``RAM_WEBHOOK_SECRET_KEYS``, which live outside the database: a copy of the
database alone does not give them. (RAM must read them back to sign, so a
digest will not do; see docs/webhooks.md for why not Vault.)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable

from cryptography.fernet import Fernet, MultiFernet
from django.conf import settings

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


def secret_generate() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _fernet() -> MultiFernet:
    return MultiFernet([Fernet(key.encode()) for key in settings.RAM_WEBHOOK_SECRET_KEYS])


def secret_encrypt(secret: str) -> str:
    return _fernet().encrypt(secret.encode()).decode()


def secret_decrypt(encrypted: str) -> str:
    return _fernet().decrypt(encrypted.encode()).decode()


def _key_bytes(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def signature(secret: str, *, message_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(_key_bytes(secret), signed, hashlib.sha256).digest()).decode()


def signature_header(secrets_: Iterable[str], *, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header: one signature per live secret, space-separated."""
    return " ".join(signature(s, message_id=message_id, timestamp=timestamp, body=body) for s in secrets_)
