"""The log filter redacts credentials that slip into a record."""

import logging
import os
import subprocess
import sys
from pathlib import Path

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
        ("login with password=hunter2 failed", "hunter2"),
        ("body username=ana&password=hunter2&next=/", "hunter2"),
        ('payload {"username": "ana", "password": "hunter2"}', "hunter2"),
        ('payload {"password":"hun\\"ter2"}', "ter2"),
        ("kwargs {'password': 'hunter2', 'x': 1}", "hunter2"),
        ("totp_secret=JBSWY3DPEHPK3PXP", "JBSWY3DPEHPK3PXP"),
        ('{"totp_secret": "JBSWY3DPEHPK3PXP"}', "JBSWY3DPEHPK3PXP"),
        ("TOTP=123456 sent", "123456"),
        ("client_secret=GOCSPX-abcdef", "GOCSPX-abcdef"),
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


def test_a_username_is_kept() -> None:
    assert redact('{"username": "ana", "password": "x"}') == '{"username": "ana", "password": [redacted]}'


def test_every_configured_handler_redacts_in_a_real_process(tmp_path: Path) -> None:
    """The filter is attached to the handlers the server really logs through, not only importable."""
    script = (
        "import django, logging; django.setup(); "
        "logging.getLogger('runs').warning('login password=hunter2 totp_secret=JBSWY3DPEHPK3PXP'); "
        "logging.getLogger().error('{\"password\": \"hunter2\"}')"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "ramsite.settings", "RAM_VAR_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "[redacted]" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout
    assert "JBSWY3DPEHPK3PXP" not in done.stderr + done.stdout
