"""Verify RAM's webhooks: Standard Webhooks signatures, with the standard library only.

RAM posts each event as JSON with three headers: ``webhook-id`` (the same at
every attempt of one event: de-duplicate on it), ``webhook-timestamp`` (Unix
seconds of this attempt) and ``webhook-signature`` (``v1,<base64>`` HMAC-SHA256
of ``<id>.<timestamp>.<body>`` keyed with your ``whsec_`` secret; several,
space-separated, while RAM rotates the secret). Verify the raw body bytes,
before parsing them::

    from ram_sdk.webhooks import WebhookVerificationError, verify_webhook

    try:
        event = verify_webhook(secret, body, headers)   # the parsed JSON
    except WebhookVerificationError:
        ...  # answer 400 and ignore it

Signatures are the format of the official ``standardwebhooks`` packages: any
of them verifies RAM's webhooks too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ram_sdk.errors import RamError

SECRET_PREFIX = "whsec_"
DEFAULT_TOLERANCE_SECONDS = 300


class WebhookVerificationError(RamError):
    """The request is not a webhook RAM signed with this secret, or it is too old or too new."""


def _key(secret: str) -> bytes:
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        raise ValueError("A webhook secret is the whsec_ value RAM showed when the endpoint was created or rotated.")
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error:
        raise ValueError("The webhook secret is not whsec_ followed by base64.") from None
    if not key:
        raise ValueError("The webhook secret is empty.")
    return key


def sign_webhook(secret: str, *, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``v1,<base64>`` signature of one webhook (what RAM sends; for tests of your receiver)."""
    digest = hmac.new(_key(secret), f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def verify_webhook(
    secret: str | Iterable[str],
    body: bytes | str,
    headers: Mapping[str, str],
    *,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> Any:
    """The webhook's parsed JSON body when one of its signatures is by ``secret`` (or one of several).

    ``headers`` are the request's (any case); ``body`` its raw bytes. Raises
    ``WebhookVerificationError`` when a header is missing, the timestamp is more than
    ``tolerance_seconds`` away from now (a replay), or no signature matches.
    """
    secrets = [secret] if isinstance(secret, str) else list(secret)
    keys = [_key(s) for s in secrets]
    raw = body.encode() if isinstance(body, str) else bytes(body)
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    message_id = lower.get("webhook-id", "")
    stamp = lower.get("webhook-timestamp", "")
    signatures = lower.get("webhook-signature", "")
    if not (message_id and stamp and signatures):
        raise WebhookVerificationError("Missing webhook-id, webhook-timestamp or webhook-signature.")
    if not stamp.isdigit() or len(stamp) > 12:
        raise WebhookVerificationError("Invalid webhook-timestamp.")
    current = time.time() if now is None else now
    if abs(current - int(stamp)) > tolerance_seconds:
        raise WebhookVerificationError("The webhook-timestamp is too old or too new.")
    signed = f"{message_id}.{stamp}.".encode() + raw
    expected = [hmac.new(key, signed, hashlib.sha256).digest() for key in keys]
    for candidate in signatures.split(" "):
        version, _, encoded = candidate.partition(",")
        if version != "v1":
            continue
        try:
            given = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            continue
        if any(hmac.compare_digest(given, digest) for digest in expected):
            try:
                return json.loads(raw)
            except ValueError:
                raise WebhookVerificationError("The signed body is not JSON.") from None
    raise WebhookVerificationError("No signature matches the secret.")
