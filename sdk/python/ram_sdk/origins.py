"""Origins the SDK talks to: HTTPS, or plain HTTP on local loopback only."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ram_sdk.errors import UnsafeOrigin

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


def checked_origin(base_url: str) -> str:
    """The origin ``scheme://host[:port]`` of ``base_url``, if it is HTTPS or plain HTTP on loopback.

    Refuses credentials in the URL, a path other than ``/``, a query and a fragment.
    """
    parts = urlsplit(base_url)
    if (
        parts.username is not None
        or parts.password is not None
        or "?" in base_url
        or "#" in base_url
        or parts.path not in ("", "/")
        or not parts.hostname
        or not (parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS))
    ):
        raise UnsafeOrigin("Use an HTTPS origin or local loopback.")
    return origin_of(parts)


def origin_of(parts: Any) -> str:
    default = {"http": 80, "https": 443}[parts.scheme]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    port = parts.port or default
    return f"{parts.scheme}://{host}" + ("" if port == default else f":{port}")


def same_origin(url: str, origin: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    try:
        return origin_of(parts) == origin
    except ValueError:  # an invalid port
        return False
