"""The log filter redacts credentials that slip into a record."""

import logging

import pytest

from core.logging import RedactSecretsFilter, redact


@pytest.mark.parametrize(
    "text,secret",
    [
        ("Authorization: Bearer ram_rk_0123456789ab_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ", "abcdefghijklmnop"),
        ("key=ram_ok_0123456789ab_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ", "abcdefghijklmnop"),
        ("protocols ram-jpeg-v1, ram-ticket.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcdefg", "AbCdEfGhIjKlMnOp"),
        ("redirect to /vault/form#invite=s.abcdefghijkl", "s.abcdefghijkl"),
        ("X-Vault-Token: hvs.CAESIabcdef", "hvs.CAESIabcdef"),
        ('"GET /connections/callback?code=4/0AbCdEf-123&state=xyz789abc HTTP/1.1" 302', "4/0AbCdEf-123"),
        ('"GET /connections/callback?code=4/0AbCdEf-123&state=xyz789abc HTTP/1.1" 302', "xyz789abc"),
        ("/accounts/delegated#token=AbCdEfGhIjKlMnOp", "AbCdEfGhIjKlMnOp"),
        ("headers {'X-RAM-Invite': 's.0123456789abcdefghijKLMN'}", "0123456789abcdefghij"),
        ("token s.0123456789abcdefghijKLMN revoked", "0123456789abcdefghij"),
    ],
)
def test_secrets_are_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "%s", (text,), None)
    RedactSecretsFilter().filter(record)
    assert secret not in record.getMessage()
    assert "[redacted]" in record.getMessage()


def test_plain_messages_are_untouched() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "run %s paused", ("abc",), None)
    RedactSecretsFilter().filter(record)
    assert record.getMessage() == "run abc paused"
