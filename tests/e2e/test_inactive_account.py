"""An inactive account is refused everywhere: every page, the API, MCP, the
WebSocket handshake; and the sockets it had open close."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from playwright.async_api import Browser
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from accounts.models import Account, ApiKey, Membership
from accounts.services import account_activity_set, api_key_create
from computers.models import Computer
from executor.runtime import Executor
from runs.contracts import TakeoverPause
from runs.models import Run
from runs.services import run_create, run_pause
from tests.e2e.conftest import LeakGuard, orm, sign_in
from tests.support.screen import create_session, recv_type, register, reset_executor, start_executor, ws_url
from visual.models import VisualSession

pytestmark = pytest.mark.e2e

PASSWORD = "correct horse battery"


@pytest.fixture(scope="module")
def inactive_executor() -> Iterator[Executor]:
    thread = start_executor("screen-1")
    yield thread.executor
    thread.stop()


def _setup(executor: Executor) -> dict[str, Any]:
    account = Account.objects.create(name="Acme")
    user = User.objects.create_user(username="ana", password=PASSWORD)
    Membership.objects.create(user=user, account=account)
    computer = Computer.objects.create(id="screen-1", account=account, name="Office PC")
    register(executor)
    run = run_create(account=account, computer=computer, task={"goal": "test"}, max_model_calls=3)
    run_pause(run=run, pause=TakeoverPause(kind="takeover", reason="captcha"))
    return {"account": account, "run": run, "key": api_key_create(account=account, kind=ApiKey.Kind.RUNNER)[1]}


async def _all_sessions_ended(seconds: float = 10) -> bool:
    for _ in range(int(seconds * 10)):
        if not await orm(lambda: VisualSession.objects.filter(ended_at__isnull=True, connected_at__isnull=False).exists()):
            return True
        await asyncio.sleep(0.1)
    return False


async def test_an_inactive_account_is_refused_everywhere_and_its_sockets_close(
    human_origin: str, browser: Browser, leak_guard: LeakGuard, inactive_executor: Executor
) -> None:
    leak_guard.watch(PASSWORD)
    made = await orm(lambda: _setup(inactive_executor))
    key, run, account = made["key"], made["run"], made["account"]
    leak_guard.watch(key)
    reset_executor(inactive_executor)
    context = await browser.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=1)
    page = await context.new_page()
    page.on("request", leak_guard.record_request)
    try:
        # While active: the person watches the screen; a native client watches too.
        await page.goto(f"{human_origin}/view?computer_id=screen-1")
        await sign_in(page, "ana", PASSWORD)
        await page.locator("#screen-canvas[data-frames]").wait_for()
        spare = (await create_session(human_origin, key, "screen-1")).json()  # a ticket not yet used
        native = await create_session(human_origin, key, "screen-1")
        native_ticket = native.json()
        ws = await connect(
            ws_url(human_origin),
            subprotocols=[native_ticket["subprotocol"], native_ticket["ticket_protocol_prefix"] + native_ticket["ticket"]],  # type: ignore[list-item]
        )
        await recv_type(ws, "frame")

        await orm(lambda: account_activity_set(account=account, is_active=False, actor="test"))

        # Open sockets close: the native client gets an error and the connection ends.
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(10):
                while True:
                    message = await ws.recv()
                    if isinstance(message, str) and json.loads(message)["type"] == "error":
                        assert "inactive" in json.loads(message)["message"]
        assert await _all_sessions_ended()
        await page.get_by_text("Disconnected").first.wait_for()

        # Every page refuses the signed-in person.
        for path in (
            "/connections",
            "/view?computer_id=screen-1",
            f"/tasks/{run.id}/intervention",
            f"/tasks/{run.id}/credential",
        ):
            response = await page.goto(f"{human_origin}{path}")
            assert response is not None and response.status == 403, path
            await page.get_by_text("Your account is inactive").wait_for()
        # The page's own POST for a screen session is refused too.
        status = await page.evaluate(
            """async () => (await fetch("/api/visual/sessions", {method: "POST", credentials: "same-origin",
                headers: {"Content-Type": "application/json", "X-RAM-Intent": "visual-session"},
                body: JSON.stringify({computer_id: "screen-1", mode: "observe", transport: "jpeg-websocket-v1"})})).status"""
        )
        assert status == 403
    finally:
        await context.close()

    # The API, MCP and the WebSocket handshake refuse the account's key and its unused ticket.
    async with httpx.AsyncClient(base_url=human_origin, timeout=20) as client:
        headers = {"Authorization": f"Bearer {key}"}
        assert (await client.get("/api/runs", headers=headers)).status_code == 403
        assert (await client.get(f"/api/runs/{run.id}/viewer", headers=headers)).status_code == 403
        assert (await create_session(human_origin, key, "screen-1")).status_code == 403
        mcp = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "runs_list", "arguments": {}}},
            headers={**headers, "Accept": "application/json, text/event-stream"},
        )
        assert mcp.status_code == 403 and mcp.json() == {"error": "The account is inactive."}
    with pytest.raises(InvalidStatus) as refused:
        await connect(ws_url(human_origin), subprotocols=[spare["subprotocol"], spare["ticket_protocol_prefix"] + spare["ticket"]])  # type: ignore[list-item]
    assert refused.value.response.status_code == 401
    assert await orm(lambda: Run.objects.filter(account=account).count()) == 1
