"""A real OpenBao (``bao server -dev``) on a free loopback port for the test session."""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.support.live import free_port


@dataclass(frozen=True)
class VaultServer:
    addr: str
    root_token: str
    server_token: str
    executor_token: str
    kv_mount: str


@pytest.fixture(scope="session")
def openbao() -> Iterator[VaultServer]:
    import hvac

    from vault_bridge.embedded import bao_binary
    from vault_bridge.policies import vault_configure

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
        yield VaultServer(addr, root, tokens.server, tokens.executor, "ram-test")
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def vault(openbao: VaultServer, settings: Any) -> VaultServer:
    """Point the project at the test OpenBao with the least-privilege role tokens."""
    settings.VAULT_ADDR = openbao.addr
    settings.VAULT_TOKEN = openbao.server_token
    settings.VAULT_EXECUTOR_TOKEN = openbao.executor_token
    settings.VAULT_KV_MOUNT = openbao.kv_mount
    return openbao
