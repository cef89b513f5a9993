"""A person's control of a run's computer, through the real gateway (uvicorn, a
websockets client, an executor with Chromium): the run records ``control_taken`` and
``control_released``, and its endpoint gets ``intervention.control_taken`` and
``intervention.control_released``, signed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from standardwebhooks import Webhook

from accounts.models import Account
from computers.models import Computer
from runs.models import Run, RunEvent
from tests.support.screen import open_socket, recv_type, take_control
from tests.support.webhooks import Receiver
from webhooks import services
from webhooks.models import WebhookDelivery


async def _events(run: Run) -> list[str]:
    return await sync_to_async(lambda: list(RunEvent.objects.filter(run=run).values_list("kind", flat=True)))()


async def test_taking_and_releasing_control_are_run_events_and_webhooks(
    screen: Any,
    live_origin: str,
    runner_key: str,
    account: Account,
    receiver: Receiver,
    make_paused_run: Callable[..., Run],
) -> None:
    computer = await sync_to_async(Computer.objects.get)(pk="pc-1")
    run = await sync_to_async(make_paused_run)(account, computer, "takeover")
    finished = await sync_to_async(make_paused_run)(account, computer, "takeover")
    await sync_to_async(Run.objects.filter(pk=finished.pk).update)(status="cancelled")
    _, secret = await sync_to_async(services.webhook_create)(
        account=account, url=receiver.url, event_types=["intervention.control_taken", "intervention.control_released"]
    )
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    await ws.send(json.dumps({"type": "release"}))
    assert (await recv_type(ws, "state"))["control"] == "released"
    await ws.close()
    for _ in range(100):
        if "control_released" in await _events(run):
            break
        await asyncio.sleep(0.05)
    kinds = await _events(run)
    assert kinds[-2:] == ["control_taken", "control_released"]
    assert "control_taken" not in await _events(finished)  # a finished run is not concerned
    taken = await sync_to_async(RunEvent.objects.get)(run=run, kind="control_taken")
    assert taken.data["computer_id"] == "pc-1" and set(taken.data) <= {"computer_id", "by"}

    def deliver() -> None:
        for delivery in WebhookDelivery.objects.filter(status="pending").order_by("created_at"):
            services.delivery_attempt(delivery_id=delivery.pk)

    await sync_to_async(deliver)()
    requests = receiver.wait_for(2)
    payloads = [Webhook(secret).verify(r.body, r.headers) for r in requests]
    assert [p["type"] for p in payloads] == ["intervention.control_taken", "intervention.control_released"]
    assert all(p["data"]["run_id"] == str(run.id) and p["data"]["computer_id"] == "pc-1" for p in payloads)


async def test_a_socket_closed_while_holding_control_releases_it_in_the_log(
    screen: Any, live_origin: str, runner_key: str, account: Account, make_paused_run: Callable[..., Run]
) -> None:
    computer = await sync_to_async(Computer.objects.get)(pk="pc-1")
    run = await sync_to_async(make_paused_run)(account, computer, "takeover")
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    await ws.close()
    for _ in range(100):
        if "control_released" in await _events(run):
            break
        await asyncio.sleep(0.05)
    assert (await _events(run))[-2:] == ["control_taken", "control_released"]
