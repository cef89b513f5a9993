"""Deployment checks of RAM's own settings (``manage.py check --deploy``)."""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from cryptography.fernet import Fernet
from django.conf import settings
from django.core import checks


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_public_origin(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Passwords, session cookies and tickets travel to ``RAM_PUBLIC_ORIGIN``: only https off loopback."""
    origin = urlsplit(settings.RAM_PUBLIC_ORIGIN)
    if origin.scheme == "https" and origin.hostname:
        return []
    if origin.scheme == "http" and origin.hostname and _is_loopback(origin.hostname):
        return []
    return [
        checks.Error(
            f"RAM_PUBLIC_ORIGIN {settings.RAM_PUBLIC_ORIGIN!r} is not https: sign-in passwords, session cookies "
            "and screen tickets would cross the network in clear text.",
            hint="Serve RAM behind TLS and set RAM_PUBLIC_ORIGIN=https://<host>; plain http is only for loopback.",
            id="ram.E001",
        )
    ]


def check_webhook_secret_keys(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Webhook secrets are encrypted under RAM_WEBHOOK_SECRET_KEYS, which every web and worker host must share."""
    problems: list[checks.CheckMessage] = []
    for key in settings.RAM_WEBHOOK_SECRET_KEYS:
        try:
            Fernet(key.encode())
        except (ValueError, TypeError):
            problems.append(
                checks.Error(
                    "An entry of RAM_WEBHOOK_SECRET_KEYS is not a Fernet key (32 url-safe base64-encoded bytes).",
                    hint='Generate one with: python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"',
                    id="ram.E010",
                )
            )
    if not settings.EMBEDDED and not settings.RAM_WEBHOOK_SECRET_KEYS_SET:
        problems.append(
            checks.Warning(
                "RAM_WEBHOOK_SECRET_KEYS is not set: this host encrypts webhook secrets under a key of its own in "
                "RAM_VAR_DIR, which the other web and worker hosts do not have.",
                hint="Set the same RAM_WEBHOOK_SECRET_KEYS on every web and worker host.",
                id="ram.W010",
            )
        )
    return problems
