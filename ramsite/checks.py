"""Deployment checks of RAM's own settings (``manage.py check --deploy``)."""

from __future__ import annotations

import base64
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
def check_web_workers(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Several web processes need the Redis channel layer: with the in-memory one, revoking a key or
    deactivating an account ends the screen sockets of the process that did it at once, and those of
    the other processes only at their next 2 s binding check."""
    if int(settings.RAM_WEB_WORKERS) < 1:
        return [checks.Error("RAM_WEB_WORKERS must be at least 1.", id="ram.E002")]
    if int(settings.RAM_WEB_WORKERS) > 1 and not settings.REDIS_URL:
        return [
            checks.Warning(
                f"RAM_WEB_WORKERS={settings.RAM_WEB_WORKERS} without REDIS_URL: the in-memory channel layer does "
                "not reach across processes, so a revoked key or a deactivated account ends screen sockets held "
                "by the other web processes only at their next binding check (up to 2 s) instead of at once.",
                hint="Set REDIS_URL (the Redis channel layer), or keep one web process (the embedded default).",
                id="ram.W001",
            )
        ]
    return []


def check_profile_store_keys(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Stored browser profiles are encrypted under RAM_PROFILE_STORE_KEYS, which every web host must share."""
    problems: list[checks.CheckMessage] = []
    for key in settings.RAM_PROFILE_STORE_KEYS:
        try:
            valid = len(base64.urlsafe_b64decode(key.encode())) == 32
        except (ValueError, TypeError):
            valid = False
        if not valid:
            problems.append(
                checks.Error(
                    "An entry of RAM_PROFILE_STORE_KEYS is not 32 url-safe base64-encoded bytes.",
                    hint='Generate one with: python -c "import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())"',
                    id="ram.E011",
                )
            )
    if not settings.EMBEDDED and not settings.RAM_PROFILE_STORE_KEYS_SET:
        problems.append(
            checks.Warning(
                "RAM_PROFILE_STORE_KEYS is not set: this host encrypts stored browser profiles under a key of its own "
                "in RAM_VAR_DIR, which the other web hosts do not have (they cannot restore them).",
                hint="Set the same RAM_PROFILE_STORE_KEYS on every web host.",
                id="ram.W011",
            )
        )
    return problems
