"""64 WebSocket handshakes at once, real clients against uvicorn on PostgreSQL: the
per-account and per-gateway socket limits hold (admission counts and connects under one
lock, so concurrent handshakes never overshoot them), and every refused handshake used
its ticket up (one connection attempt per ticket)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from django.db import connection
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from accounts.models import Account, ApiKey
from tests.support.screen import db, recv_type, ws_url
from visual.contracts import SUBPROTOCOL, TICKET_PROTOCOL_PREFIX
from visual.models import VisualSession
from visual.services import visual_session_create

CONCURRENT = 64

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the race needs concurrent writers (PostgreSQL)")


async def _handshake(origin: str, ticket: str, start: asyncio.Event) -> tuple[str, ClientConnection | None]:
    await start.wait()
    try:
        ws = await connect(ws_url(origin), subprotocols=[SUBPROTOCOL, TICKET_PROTOCOL_PREFIX + ticket], open_timeout=60)  # type: ignore[list-item]
    except InvalidStatus as refused:
        return f"refused {refused.response.status_code}", None
    return "open", ws


@pytest.mark.parametrize(
    ("per_account", "gateway", "opened"),
    [(2, 4, 2), (8, 4, 4)],
    ids=["the account's limit", "the gateway's limit"],
)
async def test_64_concurrent_handshakes_open_no_more_sockets_than_the_limits(
    screen: Any,
    live_origin: str,
    account: Account,
    runner_key: str,
    settings: Any,
    per_account: int,
    gateway: int,
    opened: int,
) -> None:
    settings.RAM_VISUAL_MAX_SOCKETS_PER_ACCOUNT = per_account
    settings.RAM_VISUAL_MAX_SOCKETS = gateway
    settings.RAM_VISUAL_MAX_PENDING_TICKETS_PER_ACCOUNT = settings.RAM_VISUAL_MAX_PENDING_TICKETS = CONCURRENT

    def tickets_of_the_runner_key() -> list[str]:
        key = ApiKey.objects.get(account=account, kind=ApiKey.Kind.RUNNER)
        return [
            visual_session_create(account=account, computer_id="pc-1", mode="observe", api_key=key)[1]
            for _ in range(CONCURRENT)
        ]

    tickets = await db(tickets_of_the_runner_key)
    start = asyncio.Event()
    attempts = [asyncio.create_task(_handshake(live_origin, ticket, start)) for ticket in tickets]
    start.set()  # every handshake released at once
    results = await asyncio.gather(*attempts)
    sockets = [ws for _, ws in results if ws is not None]
    try:
        assert Counter(outcome for outcome, _ in results) == {"open": opened, "refused 429": CONCURRENT - opened}
        for ws in sockets:
            await recv_type(ws, "hello")
        connected = await db(lambda: VisualSession.objects.filter(connected_at__isnull=False).count())
        assert connected == opened
        # Every refused handshake used its ticket up and ended its session.
        ended = await db(lambda: VisualSession.objects.filter(connected_at__isnull=True, ended_at__isnull=False).count())
        assert ended == CONCURRENT - opened
    finally:
        for ws in sockets:
            await ws.close()
    # Once the sockets closed there is room again, but a refused ticket does not get a second attempt.
    refused_ticket = next(ticket for ticket, (_, ws) in zip(tickets, results, strict=True) if ws is None)
    retry = asyncio.Event()
    retry.set()
    for _ in range(50):
        if await db(lambda: VisualSession.objects.filter(connected_at__isnull=False, ended_at__isnull=True).count()) == 0:
            break
        await asyncio.sleep(0.1)
    outcome, ws = await _handshake(live_origin, refused_ticket, retry)
    assert outcome == "refused 401" and ws is None
