"""Helpers for tests of the computer's screen: a real executor (Chromium) in a
background thread, and a real ``websockets`` client speaking jpeg-websocket-v1."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from django.db import connections
from django.test import override_settings
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from computers.services import executor_register
from executor.backends import CdpBackend
from executor.contracts import CdpOptions
from executor.runtime import Executor, ExecutorThread
from tests.support.vendors import RemoteChromium

RECV_SECONDS = 15


def start_executor(computer_id: str = "pc-1") -> ExecutorThread:
    # In the test process (root on the project's machines) the browser runs without its sandbox;
    # executors started with run_executor run it sandboxed as an unprivileged user.
    return ExecutorThread(Executor(computer_id=computer_id, register=False, sandbox=False)).start()


# The suites of the screen, control and browser_login run on both backends RAM can test
# without a vendor: the executor's own Chromium, and a Chromium reached over CDP.
LOCAL_AND_CDP = ["local", "cdp"]


def executor_on(backend: str, computer_id: str = "pc-1") -> Iterator[Executor]:
    """A started executor on ``backend`` (``local``, or ``cdp``: a real Chromium with remote
    debugging on loopback, the egress policy's partial form accepted); stopped after use."""
    if backend == "local":
        thread = start_executor(computer_id)
        try:
            yield thread.executor
        finally:
            thread.stop()
        return
    chromium = RemoteChromium()
    accept = override_settings(RAM_BROWSER_EGRESS_REMOTE_ACCEPT=True)
    accept.enable()
    try:
        cdp = CdpBackend(CdpOptions(endpoint=chromium.ws_url))
        thread = ExecutorThread(Executor(computer_id=computer_id, register=False, sandbox=False, backend=cdp)).start()
        try:
            yield thread.executor
        finally:
            thread.stop()
    finally:
        accept.disable()
        chromium.close()


# The same, as a context manager: a test's own executor (a restart, a browser that fails) on its suite's backend.
running_executor = contextlib.contextmanager(executor_on)


def on_executor(executor: Executor, coroutine_factory: Callable[[], Any], timeout: float = 30) -> Any:
    """Run ``coroutine_factory()`` on the executor's loop (to set up or inspect the page)."""
    if executor.loop is None:
        raise RuntimeError("executor not started")
    return asyncio.run_coroutine_threadsafe(coroutine_factory(), executor.loop).result(timeout)


def reset_executor(executor: Executor, html: str = "<title>blank</title><body></body>") -> None:
    async def reset() -> None:
        control = executor.control
        control.grant = None
        control.lease = None
        control.state = "available"
        # Dialogs a test left open are dismissed (a page blocked by one answers nothing); a sign-in
        # prompt is cancelled, and its page then loads the site's refusal before anything else.
        for waiting in executor.pages.dialogs.describe():
            if waiting["kind"] == "auth":
                await executor.pages.auth_answer(waiting["id"], None)
            else:
                await executor.pages.dialog_answer(waiting["id"], accept=False, text=None)
        # Pages a test left open (popups, tabs) close: the next test starts with one page.
        for page in list(executor.context.pages):
            if page is not executor.page:
                await page.close()
        await executor.page.set_content(html)

    on_executor(executor, reset)


def register(executor: Executor) -> None:
    executor_register(computer_id=executor.computer_id, generation=executor.generation, address=executor.address)


async def create_session(
    origin: str, key: str, computer_id: str, mode: str = "observe", **overrides: Any
) -> httpx.Response:
    body = {"computer_id": computer_id, "mode": mode, "transport": "jpeg-websocket-v1"}
    body.update(overrides.pop("body", {}))
    headers = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "X-RAM-Intent": "visual-session",
        **overrides.pop("headers", {}),
    }
    async with httpx.AsyncClient(base_url=origin, timeout=20) as client:
        return await client.post("/api/visual/sessions", content=json.dumps(body), headers=headers)


def ws_url(origin: str) -> str:
    return origin.replace("http://", "ws://") + "/api/visual/stream"


async def open_socket(
    origin: str, key: str, computer_id: str, mode: str = "observe", *, extra_protocols: tuple[str, ...] = (), **kwargs: Any
) -> ClientConnection:
    response = await create_session(origin, key, computer_id, mode)
    assert response.status_code == 201, response.text
    session = response.json()
    return await connect(
        ws_url(origin),
        subprotocols=[session["subprotocol"], *extra_protocols, session["ticket_protocol_prefix"] + session["ticket"]],  # type: ignore[list-item]
        open_timeout=RECV_SECONDS,
        **kwargs,
    )


async def recv_json(ws: ClientConnection, wanted: Callable[[dict[str, Any]], bool], seconds: float = RECV_SECONDS) -> dict[str, Any]:
    """The next JSON message matching ``wanted``, skipping frames and their JPEG bytes."""
    async with asyncio.timeout(seconds):
        while True:
            message = await ws.recv()
            if isinstance(message, bytes):
                continue
            data = json.loads(message)
            if wanted(data):
                return data


async def recv_type(ws: ClientConnection, kind: str, seconds: float = RECV_SECONDS) -> dict[str, Any]:
    return await recv_json(ws, lambda m: m["type"] == kind, seconds)


async def recv_until_closed(ws: ClientConnection, seconds: float = RECV_SECONDS) -> list[Any]:
    """Everything received until the server ends the connection."""
    messages: list[Any] = []
    async with asyncio.timeout(seconds):
        try:
            while True:
                message = await ws.recv()
                messages.append(message if isinstance(message, bytes) else json.loads(message))
        except ConnectionClosed:
            return messages


async def frame_pair(ws: ClientConnection, seconds: float = RECV_SECONDS) -> tuple[dict[str, Any], bytes]:
    """The next ``frame`` message and the JPEG that follows it."""
    meta = await recv_type(ws, "frame", seconds)
    jpeg = await asyncio.wait_for(ws.recv(), seconds)
    assert isinstance(jpeg, bytes)
    return meta, jpeg


async def take_control(ws: ClientConnection) -> dict[str, Any]:
    await recv_type(ws, "frame")
    await ws.send(json.dumps({"type": "takeover"}))
    transition = await recv_type(ws, "state")
    assert transition == {"type": "state", "control": "transition"}
    return await recv_type(ws, "state")


async def send_input(ws: ClientConnection, sequence: int, value: dict[str, Any]) -> dict[str, Any]:
    await ws.send(json.dumps({"type": "input", "sequence": sequence, "input": value}))
    return await recv_json(ws, lambda m: m["type"] in ("ack", "error"))




async def db[T](fn: Callable[[], T]) -> T:
    """Run ORM code off the event loop, closing that thread's connection after."""
    def run() -> T:
        try:
            return fn()
        finally:
            connections.close_all()

    return await asyncio.to_thread(run)
