"""The server's Vault client: ``VAULT_ADDR``/``VAULT_TOKEN``, or the embedded OpenBao."""

from __future__ import annotations

import hvac
from django.conf import settings

from vault_bridge import embedded


def vault_address_and_token() -> tuple[str, str]:
    if settings.VAULT_ADDR:
        return settings.VAULT_ADDR, settings.VAULT_TOKEN
    return embedded.embedded_credentials(settings.VAR_DIR, settings.RAM_OPENBAO_PORT)


def server_client() -> hvac.Client:
    addr, token = vault_address_and_token()
    return hvac.Client(url=addr, token=token, timeout=10)
