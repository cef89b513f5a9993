"""Deployment checks of RAM's own settings (``manage.py check --deploy``)."""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

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
