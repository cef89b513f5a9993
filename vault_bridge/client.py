"""Vault clients: the server's role, and one acting with exactly one token (an invite, a one-use grant).

With ``VAULT_ADDR`` set, the server's role token comes from ``VAULT_TOKEN``; otherwise from the
embedded OpenBao under ``var/``. Executors have no role: every read they make brings its own
one-use grant.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import hvac
from django.conf import settings

from vault_bridge import embedded

TIMEOUT_SECONDS = 10


def vault_address() -> str:
    if settings.VAULT_ADDR:
        return str(settings.VAULT_ADDR)
    return embedded.embedded_address(settings.RAM_OPENBAO_PORT)


def server_client() -> hvac.Client:
    token = settings.VAULT_TOKEN if settings.VAULT_ADDR else embedded.embedded_role_tokens(settings.VAR_DIR).server
    return hvac.Client(url=vault_address(), token=token, timeout=TIMEOUT_SECONDS)


def token_client(token: str) -> hvac.Client:
    """A client acting with exactly ``token`` (an invite, a one-use read grant, or an operator token)."""
    return hvac.Client(url=vault_address(), token=token, timeout=TIMEOUT_SECONDS)


@dataclass(frozen=True)
class VaultHealth:
    initialized: bool
    sealed: bool


def vault_health(timeout: float = 2.0) -> VaultHealth:
    """Vault's unauthenticated ``sys/health``: initialised and unsealed, or why not.

    Raises ``OSError`` when Vault cannot be reached; no token is sent.
    """
    try:
        # 200 active, 429 standby, 472/473 other standbys, 501 uninitialised, 503 sealed: all answer JSON.
        response = httpx.get(f"{vault_address()}/v1/sys/health", timeout=timeout)
        data = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise OSError(f"Vault could not be reached ({type(exc).__name__}).") from None
    return VaultHealth(initialized=bool(data.get("initialized")), sealed=bool(data.get("sealed", True)))
