"""The ram-dialogs-v1 addition to jpeg-websocket-v1 through the real gateway: a client that
does not offer it sees exactly the spec's messages and cannot answer a dialog; a client that
offers it gets ``dialogs`` messages and answers a dialog under its grant, a site's sign-in
prompt with a username and password that reach only the site (real uvicorn, websockets,
Chromium, a loopback site that checks the Authorization header)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection

from executor.backends import LocalBackend
from executor.runtime import Executor
from tests.support.screen import (
    LOCAL_AND_CDP,
    executor_on,
    on_executor,
    open_socket,
    recv_json,
    recv_type,
    recv_until_closed,
    reset_executor,
    take_control,
)
from tests.support.site import STAGING_REALM, serve_site
from tests.support.tiers import live

SPEC_TYPES = {"hello", "frame", "state", "ack", "error"}


@pytest.fixture(scope="module", params=LOCAL_AND_CDP)
@live
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    """The dialogs addition works the same on the executor's own Chromium and on one reached over CDP."""
    yield from executor_on(request.param)


PAGE = """<title>Draft</title><body><p id=answer>untouched</p>
<script>function ask() { setTimeout(() => {
  const v = prompt('New name?', 'draft'); document.getElementById('answer').textContent = v === null ? 'unnamed' : v;
}, 0); }</script></body>"""


async def open_prompt(screen: Any) -> None:
    reset_executor(screen, PAGE)
    on_executor(screen, lambda: screen.page.evaluate("() => ask()"))
    for _ in range(100):
        if pending(screen):
            return
        await asyncio.sleep(0.05)


def pending(screen: Any) -> list[dict[str, Any]]:
    return list(on_executor(screen, lambda: _describe(screen)))


async def _describe(screen: Any) -> list[dict[str, Any]]:
    return list(screen.pages.dialogs_describe())


async def answer_text(screen: Any) -> str:
    for _ in range(100):
        text = on_executor(screen, lambda: screen.page.inner_text("#answer"))
        if text != "untouched":
            return str(text)
        await asyncio.sleep(0.05)
    return "untouched"


async def texts_for(ws: ClientConnection, seconds: float) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(seconds):
            while True:
                message = await ws.recv()
                if isinstance(message, str):
                    seen.append(json.loads(message))
    except TimeoutError:
        return seen


def answer(sequence: int, dialog: str, **fields: Any) -> str:
    return json.dumps({"type": "input", "sequence": sequence, "input": {"type": "dialog", "dialog": dialog, **fields}})


async def test_a_spec_client_sees_only_spec_messages_and_cannot_answer(screen: Any, live_origin: str, runner_key: str) -> None:
    reset_executor(screen, PAGE)
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    on_executor(screen, lambda: screen.page.evaluate("() => ask()"))
    seen = await texts_for(ws, 2)
    assert {m["type"] for m in seen} <= SPEC_TYPES
    [waiting] = pending(screen)
    await ws.send(answer(1, waiting["id"], accept=True))
    closing = await recv_until_closed(ws)
    assert [m["type"] for m in closing if isinstance(m, dict)][-1] == "error"
    assert [d["id"] for d in pending(screen)] == [waiting["id"]]


async def test_a_dialogs_client_sees_the_dialog_and_answers_it_under_its_grant(
    screen: Any, live_origin: str, runner_key: str
) -> None:
    reset_executor(screen, PAGE)
    observer = await open_socket(live_origin, runner_key, "pc-1", "observe", extra_protocols=("ram-dialogs-v1",))
    assert observer.subprotocol == "ram-jpeg-v1"
    assert (await recv_type(observer, "dialogs"))["dialogs"] == []
    on_executor(screen, lambda: screen.page.evaluate("() => ask()"))
    shown = await recv_json(observer, lambda m: m["type"] == "dialogs" and m["dialogs"])
    [dialog] = shown["dialogs"]
    assert dialog == {"id": dialog["id"], "tab": "t1", "kind": "prompt", "message": "New name?", "default_text": "draft"}
    # An observer cannot answer: its session ends, the dialog still waits.
    await observer.send(answer(1, dialog["id"], accept=True))
    await recv_until_closed(observer)
    assert [d["id"] for d in pending(screen)] == [dialog["id"]]

    controller = await open_socket(live_origin, runner_key, "pc-1", "control", extra_protocols=("ram-dialogs-v1",))
    assert (await recv_type(controller, "dialogs"))["dialogs"] == [dialog]
    await take_control(controller)
    await controller.send(answer(1, dialog["id"], accept=True, text="Plan B"))
    wanted = [{"type": "ack", "sequence": 1}, {"type": "dialogs", "dialogs": []}]
    while wanted:
        message = await recv_json(controller, lambda m: m["type"] in ("ack", "dialogs", "error"))
        assert message["type"] != "error", message
        if message in wanted:
            wanted.remove(message)
    assert await answer_text(screen) == "Plan B"
    assert pending(screen) == []
    # A stale id: the executor refuses it and the session ends without repeating anything.
    await controller.send(answer(2, dialog["id"], accept=True))
    assert (await recv_json(controller, lambda m: m["type"] in ("ack", "error")))["type"] == "error"


async def test_malformed_answers_and_tab_inputs_without_tabs_end_the_session(
    screen: Any, live_origin: str, runner_key: str
) -> None:
    await open_prompt(screen)
    [waiting] = pending(screen)
    bad_inputs = (
        {"type": "dialog", "dialog": waiting["id"], "accept": "yes"},
        {"type": "dialog", "dialog": waiting["id"]},
        {"type": "dialog", "dialog": waiting["id"], "accept": True, "extra": 1},
        {"type": "dialog", "dialog": "../d1", "accept": True},
        {"type": "dialog", "dialog": waiting["id"], "accept": True, "text": "x" * 4001},
        {"type": "tab", "action": "switch", "tab": "t1"},  # ram-tabs-v1 was not offered
    )
    for bad in bad_inputs:
        controller = await open_socket(live_origin, runner_key, "pc-1", "control", extra_protocols=("ram-dialogs-v1",))
        await take_control(controller)
        await controller.send(json.dumps({"type": "input", "sequence": 1, "input": bad}))
        closing = await recv_until_closed(controller)
        assert [m["type"] for m in closing if isinstance(m, dict)][-1] == "error", bad
        assert [d["id"] for d in pending(screen)] == [waiting["id"]]


async def _both(ws: ClientConnection, *wanted: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """The first message matching each of ``wanted``, in whatever order they come (an error fails)."""
    found: list[dict[str, Any] | None] = [None] * len(wanted)
    while any(f is None for f in found):
        message = await recv_json(ws, lambda m: m["type"] != "frame")
        assert message["type"] != "error", message
        for index, check in enumerate(wanted):
            if found[index] is None and check(message):
                found[index] = message
                break
    return [f for f in found if f is not None]


async def test_a_sign_in_prompt_reaches_a_dialogs_client_and_its_answer_only_the_site(
    screen: Any, live_origin: str, runner_key: str, allow_egress: Callable[[str], None], caplog: pytest.LogCaptureFixture
) -> None:
    if not isinstance(screen.backend, LocalBackend):
        pytest.skip("a remote backend's egress routing answers a site's challenge first (README: sign-in prompts)")
    caplog.set_level(logging.DEBUG)
    secret = "Gateway-Secret-7781"
    with serve_site() as site:
        site.basic_users["ana"] = secret
        allow_egress(site.origin)
        reset_executor(screen)
        controller = await open_socket(live_origin, runner_key, "pc-1", "control", extra_protocols=("ram-dialogs-v1",))
        assert (await recv_type(controller, "dialogs"))["dialogs"] == []
        await take_control(controller)
        go = {"type": "input", "sequence": 1, "input": {"type": "navigate", "url": site.origin + "/staging"}}
        await controller.send(json.dumps(go))
        shown, ack = await _both(
            controller, lambda m: m["type"] == "dialogs" and bool(m["dialogs"]), lambda m: m["type"] == "ack"
        )
        assert ack == {"type": "ack", "sequence": 1}  # the navigation is acknowledged at the challenge
        [prompt] = shown["dialogs"]
        assert prompt == {"id": prompt["id"], "tab": "t1", "kind": "auth", "origin": site.origin, "realm": STAGING_REALM}

        # A malformed answer (a password without its username) ends that session naming the field only.
        other = await open_socket(live_origin, runner_key, "pc-1", "observe", extra_protocols=("ram-dialogs-v1",))
        await other.send(answer(1, prompt["id"], accept=True, password=secret))
        closing = await recv_until_closed(other)
        assert [m["type"] for m in closing if isinstance(m, dict)][-1] == "error"
        assert secret not in json.dumps([m for m in closing if isinstance(m, dict)])
        assert site.authorizations == []

        await controller.send(answer(2, prompt["id"], accept=True, username="ana", password=secret))
        await _both(controller, lambda m: m == {"type": "ack", "sequence": 2}, lambda m: m == {"type": "dialogs", "dialogs": []})
        for _ in range(100):
            if site.authorizations:
                break
            await asyncio.sleep(0.05)
        assert site.authorizations == ["Basic " + base64.b64encode(f"ana:{secret}".encode()).decode()]
        await controller.close()
    assert secret not in caplog.text
