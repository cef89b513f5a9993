"""A real OpenBao (``bao server -dev``) on a free loopback port for the test session, and what
tests read back from it the way RAM reads: with a one-use grant the server's role mints (there is
no role that reads every account's secrets)."""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import hvac
import pytest

from tests.support.live import free_port
from tests.support.tiers import live
from vault_bridge.credentials import (
    account_read_grant,
    browser_vendor_read_grant,
    browser_vendor_secret_read,
    computer_proxy_credentials_read,
    computer_proxy_credentials_read_grant,
    portal_credential_read,
)
from vault_bridge.embedded import bao_binary
from vault_bridge.policies import vault_configure


@dataclass(frozen=True)
class VaultServer:
    addr: str
    root_token: str
    server_token: str
    kv_mount: str


@pytest.fixture(scope="session")
@live
def openbao() -> Iterator[VaultServer]:
    port = free_port()
    root = secrets.token_urlsafe(24)
    addr = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [bao_binary(), "server", "-dev", f"-dev-root-token-id={root}", f"-dev-listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{addr}/v1/sys/health", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("bao server -dev did not start")
            time.sleep(0.1)
        tokens = vault_configure(client=hvac.Client(url=addr, token=root), kv_mount="ram-test")
        yield VaultServer(addr, root, tokens.server, "ram-test")
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
@live
def vault(openbao: VaultServer, settings: Any) -> VaultServer:
    """Point the project at the test OpenBao with the least-privilege role tokens."""
    settings.VAULT_ADDR = openbao.addr
    settings.VAULT_TOKEN = openbao.server_token
    settings.VAULT_KV_MOUNT = openbao.kv_mount
    return openbao


def portal_credential_read_back(*, account_id: Any, credential_id: str) -> Any:
    """The portal credential Vault holds (None when absent), read with a one-use account read grant."""
    grant = account_read_grant(account_id=account_id)
    return portal_credential_read(account_id=account_id, credential_id=credential_id, grant=grant)


def proxy_credentials_read_back(*, account_id: Any, computer_id: str) -> tuple[str, str] | None:
    """A computer's upstream proxy credentials in Vault (None when absent), read with a one-use grant."""
    grant = computer_proxy_credentials_read_grant(account_id=account_id, computer_id=computer_id)
    return computer_proxy_credentials_read(account_id=account_id, computer_id=computer_id, grant=grant)


def vendor_secret_read_back(*, account_id: Any, vendor: str) -> str | None:
    """An account's browser vendor secret in Vault (None when absent), read with a one-use grant."""
    grant = browser_vendor_read_grant(account_id=account_id, vendor=vendor)
    return browser_vendor_secret_read(account_id=account_id, vendor=vendor, grant=grant)
