"""Standard Webhooks signatures: RAM's verify with the official ``standardwebhooks``
package and with the SDK's dependency-free verifier, and a forged, altered, replayed
or wrongly keyed webhook fails both. The secret is redacted from any log line."""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime

import pytest
from ram_sdk import WebhookVerificationError, sign_webhook, verify_webhook
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError as StandardError

from core.logging import redact
from webhooks.signing import secret_generate, signature, signature_header

BODY = b'{"type":"run.paused","timestamp":"2026-11-30T18:00:00.000Z","data":{"run_id":"x"}}'


def headers(secret: str | list[str], *, message_id: str = "msg_1", timestamp: int | None = None, body: bytes = BODY) -> dict[str, str]:
    stamp = int(time.time()) if timestamp is None else timestamp
    secrets = [secret] if isinstance(secret, str) else secret
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": signature_header(secrets, message_id=message_id, timestamp=stamp, body=body),
    }


def test_secrets_are_whsec_and_32_random_bytes() -> None:
    secret = secret_generate()
    assert secret.startswith("whsec_") and len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    assert secret_generate() != secret


def test_rams_signature_verifies_with_the_official_package_and_the_sdk() -> None:
    secret = secret_generate()
    sent = headers(secret)
    assert Webhook(secret).verify(BODY, sent)["type"] == "run.paused"
    assert verify_webhook(secret, BODY, sent)["type"] == "run.paused"
    # The same bytes as the official signer.
    stamp = int(sent["webhook-timestamp"])
    official = Webhook(secret).sign("msg_1", datetime.fromtimestamp(stamp, tz=UTC), BODY.decode())
    assert official == signature(secret, message_id="msg_1", timestamp=stamp, body=BODY)
    assert official == sign_webhook(secret, message_id="msg_1", timestamp=stamp, body=BODY)


def test_during_rotation_either_secret_verifies() -> None:
    old, new = secret_generate(), secret_generate()
    sent = headers([new, old])
    assert len(sent["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        Webhook(secret).verify(BODY, sent)
        verify_webhook(secret, BODY, sent)
    verify_webhook([secret_generate(), new], BODY, sent)  # a receiver holding both


@pytest.mark.parametrize(
    "tamper",
    ["forged_signature", "altered_body", "other_id", "other_secret", "old_timestamp", "future_timestamp", "missing_header", "v2_only"],
)
def test_a_forged_or_tampered_webhook_fails_both_verifiers(tamper: str) -> None:
    secret = secret_generate()
    body, sent, key = BODY, headers(secret), secret
    if tamper == "forged_signature":
        sent["webhook-signature"] = "v1," + base64.b64encode(b"\0" * 32).decode()
    elif tamper == "altered_body":
        body = BODY.replace(b"run.paused", b"run.succeeded")
    elif tamper == "other_id":
        sent["webhook-id"] = "msg_2"
    elif tamper == "other_secret":
        key = secret_generate()
    elif tamper == "old_timestamp":
        sent = headers(secret, timestamp=int(time.time()) - 600)
    elif tamper == "future_timestamp":
        sent = headers(secret, timestamp=int(time.time()) + 600)
    elif tamper == "missing_header":
        del sent["webhook-signature"]
    elif tamper == "v2_only":
        sent["webhook-signature"] = sent["webhook-signature"].replace("v1,", "v2,")
    with pytest.raises(StandardError):
        Webhook(key).verify(body, sent)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(key, body, sent)


def test_the_sdk_verifier_refuses_a_secret_that_is_not_whsec() -> None:
    with pytest.raises(ValueError, match="whsec_"):
        verify_webhook("not-a-secret", BODY, headers(secret_generate()))


def test_a_secret_in_a_log_line_is_redacted() -> None:
    secret = secret_generate()
    assert secret not in redact(f"endpoint created with {secret} for account x")
    assert "whsec_" not in redact(f"secret={secret}").replace("[redacted]", "")
