"""The TypeScript SDK (``sdk/js``) under ``node --test`` against the live server.

This test starts what the Python tests use — uvicorn on loopback with the leak
guard, a real OpenBao, a real executor (Chromium) for ``pc-1``, a local portal
and Chromium for the person — then runs the package's tests. The node tests act
as the harness through the TypeScript client; what a harness cannot do itself
(the worker's run loop, the person in the browser, looking at the computer's
page) they ask of a small "world" endpoint this test serves on loopback.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from playwright.async_api import Page, Route, async_playwright

from accounts.models import Account, ApiKey
from accounts.services import account_top_up
from computers.models import Computer
from computers.services import executor_heartbeat
from executor.runtime import CHROMIUM_ARGS, Executor
from runs import loop
from runs.models import Run
from tests.e2e.conftest import LeakGuard, orm, sign_in
from tests.support.portals import PASSWORD as PORTAL_PASSWORD
from tests.support.portals import USERNAME as PORTAL_USERNAME
from tests.support.portals import Portal, serve_portal
from tests.support.screen import on_executor, register, reset_executor
from tests.support.tiers import live
from tests.support.vault import VaultServer

pytestmark = pytest.mark.e2e

SDK = Path(__file__).resolve().parents[2] / "sdk" / "js"
PERSON_PASSWORD = "correct horse battery"

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


async def serve_world(handlers: dict[str, Handler]) -> tuple[asyncio.Server, str]:
    """A minimal JSON-over-HTTP endpoint on loopback: ``POST /<name>`` runs ``handlers[name](body)``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            _, path, _ = head[0].split(" ", 2)
            headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
            body = json.loads(await reader.readexactly(int(headers.get("content-length", "0"))) or b"{}")
            try:
                status, answer = 200, await handlers[path.strip("/")](body)
            except Exception as exc:  # noqa: BLE001 - reported to the node test, which fails with it
                status, answer = 500, {"error": f"{type(exc).__name__}: {exc}"}
            data = json.dumps(answer).encode()
            writer.write(
                b"HTTP/1.1 %d OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
                % (status, len(data))
                + data
            )
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


@pytest.fixture
@live
def portal(allow_egress: Callable[[str], None]) -> Iterator[Portal]:
    with serve_portal() as served:
        allow_egress(served.origin)
        yield served


def _drive(run_id: str) -> dict[str, Any]:
    for _ in range(20):
        if not loop.run_step_advance(run_id=run_id):
            break
    run = Run.objects.get(pk=run_id)
    return {"status": run.status, "pause_kind": run.pause_kind}


async def test_typescript_sdk_against_the_live_server(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    vault: VaultServer,
    executor: Executor,
    account: Account,
    make_user: Callable[..., User],
    make_computer: Callable[..., Computer],
    make_key: Callable[..., str],
    runner_key: str,
    portal: Portal,
    settings: Any,
) -> None:
    assert (SDK / "dist" / "index.js").is_file(), "build the package first: make sdk-js (npm ci && npm run build in sdk/js)"
    person = await orm(lambda: make_user(account, "ana", PERSON_PASSWORD))
    await orm(lambda: make_computer(account, "pc-1"))
    await orm(lambda: register(executor))
    await orm(lambda: reset_executor(executor))
    await orm(lambda: account_top_up(account=account, microcredits=1_000_000, actor="test"))
    observer_key = await orm(lambda: make_key(account, ApiKey.Kind.TASK_OBSERVER))
    leak_guard.watch(PORTAL_PASSWORD, PERSON_PASSWORD, runner_key, observer_key)
    signed_in = False

    async def drive(body: dict[str, Any]) -> Any:
        return await orm(lambda: _drive(body["run_id"]))

    async def save_credential(body: dict[str, Any]) -> Any:
        # The person opens the locator the harness showed, signs in, opens the form and saves.
        nonlocal signed_in
        await page.goto(body["url"])
        if not signed_in:
            await sign_in(page, person.username, PERSON_PASSWORD)
            signed_in = True
        async with page.expect_navigation():
            await page.get_by_role("button", name="Open the credential form").click()
        await page.get_by_label("Username").fill(PORTAL_USERNAME)
        await page.get_by_label("Password").fill(PORTAL_PASSWORD)
        await page.get_by_role("button", name="Save in the vault").click()
        await page.get_by_text("Saved in the vault. This is not a sign-in").wait_for()
        return {"saved": True}

    async def screen_page(body: dict[str, Any]) -> Any:
        await asyncio.to_thread(on_executor, executor, lambda: executor.page.set_content(body["html"]))
        return {}

    async def screen_read(body: dict[str, Any]) -> Any:
        value = await asyncio.to_thread(on_executor, executor, lambda: executor.page.evaluate(body["expression"]))
        return {"value": value, "control": executor.control.state}

    async def portal_posts(body: dict[str, Any]) -> Any:
        return {"count": len(portal.posts)}

    async def action_wait(body: dict[str, Any]) -> Any:
        # How long an action's request waits before answering 202 (the node test restores it).
        previous = settings.RAM_EXTERNAL_ACTION_WAIT_SECONDS
        settings.RAM_EXTERNAL_ACTION_WAIT_SECONDS = float(body["seconds"])
        return {"previous": previous}

    server, world = await serve_world(
        {
            "drive": drive,
            "person/save-credential": save_credential,
            "screen/page": screen_page,
            "screen/read": screen_read,
            "portal/posts": portal_posts,
            "settings/action-wait": action_wait,
        }
    )
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(
        RAM_TEST_URL=human_origin,
        RAM_TEST_KEY=runner_key,
        RAM_TEST_OBSERVER_KEY=observer_key,
        RAM_TEST_WORLD=world,
        RAM_TEST_COMPUTER="pc-1",
        RAM_TEST_PORTAL=portal.origin,
    )

    async def heartbeat() -> None:
        # The executor of this test registers once and does not heartbeat by itself: beat for it, as a
        # running executor would, so the computer stays ready however long the node tests take.
        while True:
            await asyncio.sleep(5)
            await orm(lambda: executor_heartbeat(computer_id="pc-1", generation=executor.generation))

    beating = asyncio.create_task(heartbeat())
    try:
        process = await asyncio.create_subprocess_exec(
            "node", "--test", "--test-concurrency=1", *sorted(f"test/{p.name}" for p in (SDK / "test").glob("*.test.mjs")),
            cwd=SDK, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(process.communicate(), 300)
    finally:
        beating.cancel()
        server.close()
        await server.wait_closed()
    report = out.decode()
    print(report)
    assert process.returncode == 0, report[-6000:]
    assert "# fail 0" in report and "# pass 0" not in report
    for secret in (runner_key, observer_key, PORTAL_PASSWORD):
        assert secret not in report


BROWSER_PAGE = """<!doctype html><meta charset=utf-8><meta name=referrer content=no-referrer><title>sdk</title>
<script type=module>
import { bindHumanGestures, openScreen } from './browser.js';
window.refusesKey = () => openScreen({ origin: location.origin, session: {}, apiKey: 'k', renderJpeg() {} })
  .then(() => false, (error) => error instanceof TypeError);
window.control = async (session, text) => {
  const seen = [];
  const stream = await openScreen({ origin: location.origin, session,
    renderJpeg: (jpeg, frame) => seen.push({ soi: jpeg[0] === 0xff && jpeg[1] === 0xd8, generation: frame.generation }) });
  const states = [];
  const gestures = bindHumanGestures(stream, (state) => states.push(state), 20000);
  await stream.firstFrame(15000);
  await gestures.takeover();
  for (const input of [
    { type: 'pointer', phase: 'down', x: 500, y: 320 }, { type: 'pointer', phase: 'up', x: 500, y: 320 },
    { type: 'text', text }, { type: 'key', phase: 'down', key: 'Enter' }, { type: 'key', phase: 'up', key: 'Enter' },
  ]) await gestures.input(input);
  await gestures.release();
  stream.close();
  return { frames: seen.length, soi: seen[0].soi, generation: seen[0].generation,
    uncertain: states.some((s) => s.uncertain), controlled: states.some((s) => s.controlling) };
};
window.ready = true;
</script>"""
FORM = """<!doctype html><title>t</title>
<style>body{margin:0} #t{position:absolute;left:400px;top:300px;width:300px;height:40px}</style>
<form onsubmit="event.preventDefault(); document.body.dataset.sent = document.getElementById('t').value">
<input id="t" autocomplete="off"></form>"""


async def test_browser_entry_controls_the_screen_from_a_session_the_server_minted(
    human_origin: str,
    executor: Executor,
    account: Account,
    make_computer: Callable[..., Computer],
    runner_key: str,
) -> None:
    """``@ram/sdk/browser`` in Chromium, served from the RAM origin: no API key in the page."""
    assert (SDK / "dist" / "browser.js").is_file(), "build the package first: make sdk-js"
    await orm(lambda: make_computer(account, "pc-1"))
    await orm(lambda: register(executor))
    await orm(lambda: reset_executor(executor, FORM))

    async def serve_sdk(route: Route) -> None:
        name = route.request.url.rsplit("/sdk-test/", 1)[1]
        if name == "index.html":
            await route.fulfill(body=BROWSER_PAGE, content_type="text/html")
        elif name.endswith(".js") and "/" not in name and (SDK / "dist" / name).is_file():
            await route.fulfill(body=(SDK / "dist" / name).read_text(), content_type="text/javascript")
        else:
            await route.fulfill(status=404, body="")

    # The test page is answered by the browser's own request interception, not by the loopback
    # server, so Chromium would treat it as a public page reaching a local address (Local Network
    # Access) and block the socket; a deployed page is served by its real host.
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=[*CHROMIUM_ARGS, "--disable-features=LocalNetworkAccessChecks"]
        )
        try:
            page = await browser.new_page()
            await _control_in_the_page(page, human_origin, runner_key, serve_sdk, executor)
        finally:
            await browser.close()
    sent = await asyncio.to_thread(on_executor, executor, lambda: executor.page.evaluate("document.body.dataset.sent"))
    assert sent == "Olá"
    assert executor.control.state == "released"


async def _control_in_the_page(page: Page, human_origin: str, runner_key: str, serve_sdk: Any, executor: Executor) -> None:
    await page.route(f"{human_origin}/sdk-test/**", serve_sdk)
    await page.goto(f"{human_origin}/sdk-test/index.html")
    await page.wait_for_function("window.ready === true")
    assert await page.evaluate("window.refusesKey()") is True

    # The trusted server mints the session with its runner key; the page gets only the answer.
    async with httpx.AsyncClient(base_url=human_origin, timeout=20) as client:
        response = await client.post(
            "/api/visual/sessions",
            json={"computer_id": "pc-1", "mode": "control", "transport": "jpeg-websocket-v1"},
            headers={"Authorization": f"Bearer {runner_key}", "X-RAM-Intent": "visual-session"},
        )
    assert response.status_code == 201, response.text
    result = await page.evaluate("([session, text]) => window.control(session, text)", [response.json(), "Olá"])
    assert result["frames"] >= 1 and result["soi"] is True and result["generation"] == str(executor.generation)
    assert result["controlled"] is True and result["uncertain"] is False
