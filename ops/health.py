"""Liveness and readiness: what ``/healthz`` and ``/readyz`` check.

Each check touches one dependency the way the processes use it (a query, a
message through the channel layer, a broker connection, Vault's
unauthenticated health endpoint, executor heartbeats), is bounded in time,
and reports only ``ok``/``failed``, its latency and a fixed short reason —
never an address, a token or an exception text that could carry one.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.utils import timezone
from kombu import Connection

from computers.models import Computer
from computers.selectors import computer_is_ready
from vault_bridge.client import vault_health

CHECK_SECONDS = 3.0


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    latency_ms: float
    reason: str = ""

    def to_wire(self) -> dict[str, object]:
        wire: dict[str, object] = {"status": "ok" if self.ok else "failed", "latency_ms": round(self.latency_ms, 2)}
        if self.reason:
            wire["reason"] = self.reason
        return wire


@dataclass(frozen=True)
class ExecutorReadiness:
    computer_id: str
    ready: bool
    heartbeat_age_seconds: float | None

    def to_wire(self) -> dict[str, object]:
        return {
            "computer_id": self.computer_id,
            "status": "ready" if self.ready else "not_ready",
            "heartbeat_age_seconds": None
            if self.heartbeat_age_seconds is None
            else round(self.heartbeat_age_seconds, 1),
        }


@dataclass(frozen=True)
class Readiness:
    checks: list[CheckResult]
    executors: list[ExecutorReadiness] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return all(c.ok for c in self.checks)


def _timed(name: str, probe: Callable[[], str]) -> CheckResult:
    """Run ``probe`` (returns "" when healthy, else a fixed reason); exceptions are failures."""
    started = time.perf_counter()
    try:
        reason = probe()
    except Exception as exc:  # noqa: BLE001 - any failure of a dependency is "failed", named by class only
        reason = f"unreachable ({type(exc).__name__})"
    return CheckResult(name=name, ok=not reason, latency_ms=(time.perf_counter() - started) * 1000, reason=reason)


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return "" if cursor.fetchone() == (1,) else "unexpected answer"


def _channel_layer() -> str:
    layer = get_channel_layer()
    if layer is None:
        return "not configured"

    async def round_trip() -> str:
        async with asyncio.timeout(CHECK_SECONDS):
            channel = await layer.new_channel("readyz.")
            nonce = secrets.token_hex(8)
            await layer.send(channel, {"type": "readyz", "nonce": nonce})
            message = await layer.receive(channel)
        return "" if message.get("nonce") == nonce else "unexpected answer"

    return str(async_to_sync(round_trip)())


def _broker() -> str:
    with Connection(
        settings.CELERY_BROKER_URL,
        transport=settings.CELERY_BROKER_TRANSPORT,
        transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS,
        connect_timeout=CHECK_SECONDS,
    ) as conn:
        conn.ensure_connection(max_retries=1, timeout=CHECK_SECONDS)
    return ""


def _vault() -> str:
    health = vault_health(timeout=CHECK_SECONDS)
    if not health.initialized:
        return "not initialised"
    if health.sealed:
        return "sealed"
    return ""


def executor_readiness(computers: list[Computer], now: datetime | None = None) -> list[ExecutorReadiness]:
    now = now or timezone.now()
    return [
        ExecutorReadiness(
            computer_id=c.id,
            ready=computer_is_ready(c),
            heartbeat_age_seconds=(now - c.last_heartbeat_at).total_seconds() if c.last_heartbeat_at else None,
        )
        for c in computers
    ]


def readiness() -> Readiness:
    """Every dependency, then the executors: ready when at least one is, where computers exist."""
    checks = [
        _timed("database", _database),
        _timed("channel_layer", _channel_layer),
        _timed("broker", _broker),
        _timed("vault", _vault),
    ]
    executors: list[ExecutorReadiness] = []
    started = time.perf_counter()
    if checks[0].ok:
        executors = executor_readiness(list(Computer.objects.filter(is_active=True).order_by("id")))
        reason = "" if not executors or any(e.ready for e in executors) else "no ready executor"
        checks.append(CheckResult("executors", not reason, (time.perf_counter() - started) * 1000, reason))
    else:
        checks.append(CheckResult("executors", False, 0.0, "database unavailable"))
    return Readiness(checks=checks, executors=executors)


def computer_readiness(computer_id: str) -> ExecutorReadiness | None:
    """One active computer's executor, or None when there is no such active computer."""
    computer = Computer.objects.filter(pk=computer_id, is_active=True).first()
    return None if computer is None else executor_readiness([computer])[0]
