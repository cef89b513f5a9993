"""Long waits hold no web thread (core/waits.py) and are bounded per account (RAM_ACCOUNT_MAX_LONG_WAITS).

Against a real uvicorn on a loopback port with real HTTP clients. A "long action" is an external
run's step recorded as started by the action service itself and not yet settled; the test ends it
through the loop's own settle, which is what the thread running a tool does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.utils import timezone

from accounts.models import Account
from accounts.services import account_top_up
from computers.models import Computer
from core import waits
from runs import external, loop
from runs.contracts import ToolResult
from runs.models import LongWait, Run, RunStep
from runs.tool_calls import ToolCall
from tests.conftest import Api
from tests.support.screen import reset_executor
from tests.support.waits import eventually_async

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def funded(account: Account) -> Account:
    account_top_up(account=account, microcredits=1_000_000, actor="test")
    return account


@pytest.fixture
def long_action(
    funded: Account, make_computer: Callable[..., Computer], runner_key: str
) -> Callable[..., tuple[str, Any]]:
    """A running external run on a new computer with one action recorded as started: (run id, claim)."""
    made = [0]

    def make() -> tuple[str, Any]:
        made[0] += 1
        computer = make_computer(funded, f"pc-wait-{made[0]}")
        created = Api(Client()).post(
            "/api/runs",
            {"task": {"goal": "wait"}, "computer_id": computer.pk, "agent": {"type": "external"}, "max_model_calls": 5},
            key=runner_key,
        )
        assert created.status_code == 201, created.content
        run_id = created.json()["id"]
        loop.run_ready(Run.objects.get(pk=run_id).pk)
        call = ToolCall(tool="wait_for", arguments={"selector": "#never", "timeout_ms": 20_000})
        step, claimed = external._record(
            Run.objects.get(pk=run_id).pk, call, f"long-{made[0]:04d}", external._digest(call)
        )
        assert claimed is not None and step.state == RunStep.State.STARTED
        return run_id, claimed

    return make


def settle(claimed: Any) -> None:
    """What the thread running the tool does when it answers: settle the step (which publishes its end)."""
    loop._settle(claimed, result=ToolResult(content="Found."), needs_person=False, check_next=False)


def web_threads() -> int:
    from ramsite.asgi import django_application  # noqa: PLC0415 - the app the live server built; importing builds it

    return int(django_application.pool._max_workers)


def test_long_polls_beyond_the_thread_pool_hold_no_thread_and_another_tenant_is_answered_meanwhile(
    live_origin: str,
    long_action: Callable[..., tuple[str, Any]],
    runner_key: str,
    make_account: Callable[..., Account],
    make_key: Callable[..., str],
    settings: Any,
) -> None:
    polls = web_threads() + 1
    settings.RAM_ACCOUNT_MAX_LONG_WAITS = polls
    run_id, claimed = long_action()
    other_key = make_key(make_account("Other tenant"))

    async def scenario() -> None:
        mine = {"Authorization": f"Bearer {runner_key}"}
        async with httpx.AsyncClient(base_url=live_origin, timeout=60) as client:
            pending = [
                asyncio.create_task(client.get(f"/api/runs/{run_id}/actions/{claimed.step_id}?wait=25", headers=mine))
                for _ in range(polls)
            ]
            # Every long-poll is now waiting on the event loop, each holding a slot of the account.
            await eventually_async(lambda: waits.waiting_count() == polls and LongWait.objects.count() == polls, 20, interval=0.01, thread=True)
            async with httpx.AsyncClient(base_url=live_origin, timeout=60) as other:
                listed = await other.get("/api/runs", headers={"Authorization": f"Bearer {other_key}"})
            assert listed.status_code == 200 and listed.json()["count"] == 0
            # The other tenant was answered while every long-poll still waits.
            assert not any(task.done() for task in pending)
            assert waits.waiting_count() == polls
            await sync_to_async(settle, thread_sensitive=False)(claimed)
            answers = await asyncio.gather(*pending)
        for answer in answers:
            assert answer.status_code == 200, answer.content
            assert answer.json()["step_id"] == claimed.step_id and answer.json()["state"] == "succeeded"

    asyncio.run(scenario())
    assert LongWait.objects.count() == 0  # every slot was given back


def test_a_long_poll_beyond_the_account_bound_answers_the_current_state_at_once(
    live_origin: str, long_action: Callable[..., tuple[str, Any]], runner_key: str, settings: Any
) -> None:
    settings.RAM_ACCOUNT_MAX_LONG_WAITS = 2
    run_id, claimed = long_action()

    async def scenario() -> None:
        mine = {"Authorization": f"Bearer {runner_key}"}
        url = f"/api/runs/{run_id}/actions/{claimed.step_id}?wait=25"
        async with httpx.AsyncClient(base_url=live_origin, timeout=60) as client:
            held = [asyncio.create_task(client.get(url, headers=mine)) for _ in range(2)]
            await eventually_async(lambda: waits.waiting_count() == 2, 20, interval=0.01, thread=True)
            beyond = await client.get(url, headers=mine)
            assert beyond.status_code == 202, beyond.content
            assert beyond.json()["state"] == "started" and beyond.json()["step_id"] == claimed.step_id
            assert not any(task.done() for task in held)
            await sync_to_async(settle, thread_sensitive=False)(claimed)
            for answer in await asyncio.gather(*held):
                assert answer.status_code == 200 and answer.json()["state"] == "succeeded"

    asyncio.run(scenario())
    assert LongWait.objects.count() == 0


def test_a_client_that_leaves_during_a_long_poll_cancels_its_wait_and_frees_its_slot(
    live_origin: str, long_action: Callable[..., tuple[str, Any]], runner_key: str, settings: Any
) -> None:
    """The project's handler replaces Django's stock one (core/asgi_handler.py): the disconnect
    handling Django's handler has is its own here, during a long wait on the event loop."""
    settings.RAM_ACCOUNT_MAX_LONG_WAITS = 1
    run_id, claimed = long_action()
    host, port = live_origin.removeprefix("http://").rsplit(":", 1)

    async def scenario() -> float:
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            f"GET /api/runs/{run_id}/actions/{claimed.step_id}?wait=25 HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {runner_key}\r\n\r\n".encode()
        )
        await writer.drain()
        await eventually_async(lambda: waits.waiting_count() == 1 and LongWait.objects.count() == 1, 20, interval=0.01, thread=True)
        left = time.monotonic()
        writer.close()  # the client leaves mid-wait: uvicorn sends http.disconnect
        await writer.wait_closed()
        await eventually_async(lambda: waits.waiting_count() == 0 and LongWait.objects.count() == 0, 20, interval=0.01, thread=True)
        freed = time.monotonic() - left
        assert await reader.read() == b""  # nothing was answered on the closed connection
        # The account's one slot is free again: the next long-poll waits (and is answered) as usual.
        async with httpx.AsyncClient(base_url=live_origin, timeout=60) as client:
            held = asyncio.create_task(
                client.get(
                    f"/api/runs/{run_id}/actions/{claimed.step_id}?wait=25",
                    headers={"Authorization": f"Bearer {runner_key}"},
                )
            )
            await eventually_async(lambda: waits.waiting_count() == 1, 20, interval=0.01, thread=True)
            await sync_to_async(settle, thread_sensitive=False)(claimed)
            answer = await held
        assert answer.status_code == 200 and answer.json()["state"] == "succeeded"
        return freed

    freed = asyncio.run(scenario())
    assert freed < 5  # freed by the disconnect, not by the 25 s wait running out
    assert RunStep.objects.get(pk=claimed.step_id).state == RunStep.State.SUCCEEDED  # the action itself went on
    assert LongWait.objects.count() == 0


def test_an_action_beyond_the_account_bound_is_recorded_started_and_answered_202_at_once(
    screen: Any,
    live_origin: str,
    long_action: Callable[..., tuple[str, Any]],
    runner_key: str,
    funded: Account,
    settings: Any,
) -> None:
    settings.RAM_ACCOUNT_MAX_LONG_WAITS = 1
    settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS = 2  # the run holding the wait and the run acting
    held_run, held_claim = long_action()
    reset_executor(screen, "<title>Never</title><body></body>")
    created = Api(Client()).post(
        "/api/runs",
        {"task": {"goal": "act"}, "computer_id": "pc-1", "agent": {"type": "external"}, "max_model_calls": 5},
        key=runner_key,
    )
    run_id = created.json()["id"]

    async def scenario() -> None:
        mine = {"Authorization": f"Bearer {runner_key}"}
        async with httpx.AsyncClient(base_url=live_origin, timeout=60) as client:
            held = asyncio.create_task(
                client.get(f"/api/runs/{held_run}/actions/{held_claim.step_id}?wait=25", headers=mine)
            )
            await eventually_async(lambda: waits.waiting_count() == 1, 20, interval=0.01, thread=True)
            body = {
                "tool": "wait_for",
                "arguments": {"selector": "#never", "timeout_ms": 4000},
                "idempotency_key": "beyond-0001",
            }
            acted = await client.post(f"/api/runs/{run_id}/actions", json=body, headers=mine)
            # Recorded, debited and started — not refused, not failed — and answered before it ends.
            assert acted.status_code == 202, acted.content
            step = await sync_to_async(RunStep.objects.get, thread_sensitive=False)(pk=acted.json()["step_id"])
            assert acted.json()["state"] == "started" and step.state == RunStep.State.STARTED
            assert not held.done()
            # The account's one wait is held: the action's long-poll answers its current state at once.
            polled = await client.get(f"/api/runs/{run_id}/actions/{step.pk}?wait=25", headers=mine)
            assert polled.status_code == 202 and polled.json()["state"] == "started"
            await sync_to_async(settle, thread_sensitive=False)(held_claim)
            assert (await held).json()["state"] == "succeeded"
            # With the slot free again, a long-poll waits for the action's own end (its 4 s timeout).
            done = await client.get(f"/api/runs/{run_id}/actions/{step.pk}?wait=25", headers=mine)
            assert done.status_code == 200, done.content
            assert done.json()["state"] == "failed" and done.json()["result"]["isError"] is True

    asyncio.run(scenario())
    assert Run.objects.get(pk=run_id).model_calls == 1 and RunStep.objects.filter(run_id=run_id).count() == 1
    assert LongWait.objects.count() == 0


def test_a_slot_left_by_a_dead_process_expires_and_is_taken_again(funded: Account, settings: Any) -> None:
    settings.RAM_ACCOUNT_MAX_LONG_WAITS = 2
    first = external.long_wait_take(account_id=funded.pk, seconds=25)
    second = external.long_wait_take(account_id=funded.pk, seconds=25)
    assert first is not None and second is not None
    assert external.long_wait_take(account_id=funded.pk, seconds=25) is None
    # Its holder died without giving it back: once past its expiry the slot is free.
    LongWait.objects.filter(pk=first).update(expires_at=timezone.now() - timedelta(seconds=1))
    again = external.long_wait_take(account_id=funded.pk, seconds=25)
    assert again is not None and LongWait.objects.filter(account=funded).count() == 2
    external.long_wait_release(slot=second)
    external.long_wait_release(slot=again)
    assert not LongWait.objects.exists()
