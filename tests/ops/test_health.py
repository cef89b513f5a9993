"""/healthz and /readyz against the real dependencies: PostgreSQL, Redis (channel
layer and broker), OpenBao (an unsealed one, a sealed one, none) and a real
executor (Chromium) for the per-computer readiness."""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from channels.layers import channel_layers
from django.test import Client

from accounts.models import Account
from computers.models import Computer
from tests.support.live import free_port
from tests.support.screen import register
from tests.support.vault import VaultServer
from vault_bridge.embedded import bao_binary

OPS_TOKEN = "ops-" + "x" * 40


@pytest.fixture
def ops_token(settings: Any) -> str:
    settings.RAM_OPS_TOKEN = OPS_TOKEN
    return OPS_TOKEN


def detail(client: Client, path: str = "/readyz", **extra: Any) -> Any:
    return client.get(path, headers={"Authorization": f"Bearer {OPS_TOKEN}"}, **extra)


def test_healthz_answers_without_touching_anything(db: None, client: Client, django_assert_num_queries: Any, settings: Any) -> None:
    # Orchestrators call it by a private address over plain HTTP.
    settings.SECURE_SSL_REDIRECT = True
    with django_assert_num_queries(0):
        response = client.get("/healthz", HTTP_HOST="10.1.2.3")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"


def test_readyz_without_a_token_says_only_ready(
    db: None, client: Client, vault: VaultServer, ops_token: str) -> None:
    response = client.get("/readyz", HTTP_HOST="10.1.2.3")
    assert response.status_code == 200, response.content
    assert response.json() == {"status": "ready"}


def test_readyz_with_the_token_gives_each_check_and_its_latency_and_no_secret(
    db: None, client: Client, vault: VaultServer, ops_token: str, settings: Any
) -> None:
    response = detail(client)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ready"
    assert set(body["checks"]) == {"database", "channel_layer", "broker", "vault", "executors"}
    for check in body["checks"].values():
        assert check["status"] == "ok"
        assert isinstance(check["latency_ms"], float | int) and check["latency_ms"] >= 0
    assert body["computers"] == []
    text = response.content.decode()
    for secret in (vault.server_token, vault.root_token, OPS_TOKEN, settings.REDIS_URL, vault.addr, settings.SECRET_KEY):
        assert secret not in text


def test_a_wrong_token_gets_the_bare_status(
    db: None, client: Client, vault: VaultServer, ops_token: str) -> None:
    response = client.get("/readyz", headers={"Authorization": "Bearer " + OPS_TOKEN[:-1] + "y"})
    assert response.json() == {"status": "ready"}


def test_probes_accept_only_get(client: Client) -> None:
    response = client.post("/readyz")
    assert response.status_code == 405
    assert response.json() == {"error": "Method POST is not allowed here."}


def test_unreachable_vault_is_not_ready(
    db: None, client: Client, vault: VaultServer, ops_token: str, settings: Any) -> None:
    settings.VAULT_ADDR = f"http://127.0.0.1:{free_port()}"
    response = detail(client)
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not_ready"
    assert body["checks"]["vault"]["status"] == "failed"
    assert body["checks"]["vault"]["reason"].startswith("unreachable")
    assert settings.VAULT_ADDR not in response.content.decode()
    assert client.get("/readyz").json() == {"status": "not_ready"}


@pytest.fixture
def sealed_openbao() -> Iterator[str]:
    """A second dev OpenBao, sealed through its API."""
    port = free_port()
    root = secrets.token_urlsafe(16)
    addr = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [bao_binary(), "server", "-dev", f"-dev-root-token-id={root}", f"-dev-listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{addr}/v1/sys/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.1)
        httpx.put(f"{addr}/v1/sys/seal", headers={"X-Vault-Token": root}, timeout=10).raise_for_status()
        yield addr
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_sealed_vault_is_not_ready(
    db: None, client: Client, vault: VaultServer, ops_token: str, settings: Any, sealed_openbao: str) -> None:
    settings.VAULT_ADDR = sealed_openbao
    body = detail(client).json()
    assert body["status"] == "not_ready"
    assert body["checks"]["vault"] == {"status": "failed", "latency_ms": body["checks"]["vault"]["latency_ms"], "reason": "sealed"}


def test_unreachable_channel_layer_and_broker_are_not_ready(
    db: None, client: Client, vault: VaultServer, ops_token: str, settings: Any
) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [dead]}}
    }
    settings.CELERY_BROKER_URL = dead
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {}

    channel_layers.backends.clear()
    try:
        response = detail(client)
    finally:
        channel_layers.backends.clear()
    body = response.json()
    assert response.status_code == 503
    assert body["checks"]["channel_layer"]["status"] == "failed"
    assert body["checks"]["broker"]["status"] == "failed"
    assert body["checks"]["database"]["status"] == "ok"
    assert dead not in response.content.decode()


def test_computers_without_a_ready_executor_are_not_ready_until_one_registers(
    transactional_db: None,
    client: Client,
    vault: VaultServer,
    ops_token: str,
    executor: Any,
    account: Account,
    make_computer: Callable[..., Computer],
) -> None:
    make_computer(account, "pc-1")
    make_computer(account, "pc-2")
    body = detail(client).json()
    assert body["status"] == "not_ready"
    assert body["checks"]["executors"]["reason"] == "no ready executor"
    assert [c["status"] for c in body["computers"]] == ["not_ready", "not_ready"]

    register(executor)  # the real executor of pc-1 registers its generation and address
    response = detail(client)
    assert response.status_code == 200
    computers = {c["computer_id"]: c for c in response.json()["computers"]}
    assert computers["pc-1"]["status"] == "ready"
    assert 0 <= computers["pc-1"]["heartbeat_age_seconds"] < 5
    assert computers["pc-2"] == {"computer_id": "pc-2", "status": "not_ready", "heartbeat_age_seconds": None}

    # One computer's executor, for that executor's own probe.
    assert detail(client, "/readyz", data={"computer": "pc-1"}).status_code == 200
    assert detail(client, "/readyz", data={"computer": "pc-2"}).status_code == 503
    assert detail(client, "/readyz", data={"computer": "nope"}).status_code == 404
    anonymous = client.get("/readyz", {"computer": "pc-1"})
    assert anonymous.status_code == 401
    assert "pc-1" not in anonymous.content.decode()


def test_an_inactive_computer_does_not_count(
    client: Client, vault: VaultServer, ops_token: str, account: Account, make_computer: Callable[..., Computer]
) -> None:
    computer = make_computer(account, "pc-9")
    Computer.objects.filter(pk=computer.pk).update(is_active=False)
    assert detail(client).json()["status"] == "ready"
