"""Vault clients by role: the server's, the executor's, and one for a single invite.

With ``VAULT_ADDR`` set, the role tokens come from ``VAULT_TOKEN`` and
``VAULT_EXECUTOR_TOKEN``; otherwise from the embedded OpenBao under ``var/``.
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


def executor_client() -> hvac.Client:
    token = (
        settings.VAULT_EXECUTOR_TOKEN
        if settings.VAULT_ADDR
        else embedded.embedded_role_tokens(settings.VAR_DIR).executor
    )
    return hvac.Client(url=vault_address(), token=token, timeout=TIMEOUT_SECONDS)


def token_client(token: str) -> hvac.Client:
    """A client acting with exactly ``token`` (an invite, or an operator token)."""
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
