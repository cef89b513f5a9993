"""The ram-tabs-v1 addition to jpeg-websocket-v1 through the real gateway: a client that
does not offer it sees exactly the spec's messages (the frame's ``url`` follows the
active page) and cannot send a ``tab`` input; a client that offers it gets ``tabs``
messages and switches tabs under its grant (real uvicorn, websockets, Chromium)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection

from executor.runtime import Executor
from tests.support.screen import (
    LOCAL_AND_CDP,
    executor_on,
    on_executor,
    open_socket,
    recv_json,
    recv_type,
    recv_until_closed,
    take_control,
)
from tests.support.site import Site, serve_site
from tests.support.tiers import live

SPEC_TYPES = {"hello", "frame", "state", "ack", "error"}


@pytest.fixture(scope="module", params=LOCAL_AND_CDP)
@live
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    """The tabs addition works the same on the executor's own Chromium and on one reached over CDP."""
    yield from executor_on(request.param)


@pytest.fixture
def site(allow_egress: Callable[[str], None]) -> Iterator[Site]:
    with serve_site() as served:
        allow_egress(served.origin)
        yield served


def open_popup(screen: Any, site: Site) -> None:
    async def go() -> None:
        await screen.page.goto(site.origin + "/docs")
        # A window name of its own (a page keeps its name across navigations).
        await screen.page.evaluate("() => window.open('/oauth/authorize', 'oauth-' + Date.now())")

    on_executor(screen, go)


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


async def test_a_spec_client_sees_only_spec_messages_and_the_frame_url_follows_the_popup(
    screen: Any, live_origin: str, runner_key: str, site: Site
) -> None:
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    assert ws.subprotocol == "ram-jpeg-v1"
    await take_control(ws)
    open_popup(screen, site)
    seen = await texts_for(ws, 3)
    assert {m["type"] for m in seen} <= SPEC_TYPES
    assert any(m["type"] == "frame" and m["url"].endswith("/oauth/authorize") for m in seen)
    # A tab input is not part of the spec's inputs: this socket is ended, nothing changes.
    await ws.send(json.dumps({"type": "input", "sequence": 1, "input": {"type": "tab", "action": "switch", "tab": "t1"}}))
    closing = await recv_until_closed(ws)
    assert [m["type"] for m in closing if isinstance(m, dict)][-1] == "error"
    tabs = on_executor(screen, screen.pages.tabs_describe)
    assert [t["url"].rsplit("/", 1)[-1] for t in tabs if t["active"]] == ["authorize"]


async def test_a_tabs_client_gets_tab_notices_and_switches_under_its_grant(
    screen: Any, live_origin: str, runner_key: str, site: Site
) -> None:
    observer = await open_socket(live_origin, runner_key, "pc-1", "observe", extra_protocols=("ram-tabs-v1",))
    assert observer.subprotocol == "ram-jpeg-v1"  # the server still selects only the spec's subprotocol
    first = await recv_type(observer, "tabs")
    assert [set(t) for t in first["tabs"]] == [{"id", "title", "url", "active"}] and first["tabs"][0]["active"]
    open_popup(screen, site)
    both = await recv_json(observer, lambda m: m["type"] == "tabs" and len(m["tabs"]) == 2 and m["tabs"][1]["title"])
    opener, popup = both["tabs"]
    assert (opener["active"], popup["active"]) == (False, True) and popup["title"] == "Authorize Portal"

    # An observer cannot switch: its session ends, the popup stays active.
    await observer.send(json.dumps({"type": "input", "sequence": 1, "input": {"type": "tab", "action": "switch", "tab": opener["id"]}}))
    await recv_until_closed(observer)
    controller = await open_socket(live_origin, runner_key, "pc-1", "control", extra_protocols=("ram-tabs-v1",))
    await take_control(controller)
    await controller.send(json.dumps({"type": "input", "sequence": 1, "input": {"type": "tab", "action": "switch", "tab": opener["id"]}}))
    seen = await collect_until(
        controller,
        [
            lambda m: m == {"type": "ack", "sequence": 1},
            lambda m: m["type"] == "tabs" and [t["active"] for t in m["tabs"]] == [True, False],
            # The frames follow the active page (the spec's own notice): the opener's address.
            lambda m: m["type"] == "frame" and m["url"].endswith("/docs") and m["controlling"] is True,
        ],
    )
    assert not any(m["type"] == "error" for m in seen)
    await controller.send(json.dumps({"type": "input", "sequence": 2, "input": {"type": "tab", "action": "close", "tab": popup["id"]}}))
    await collect_until(
        controller,
        [
            lambda m: m == {"type": "ack", "sequence": 2},
            lambda m: m["type"] == "tabs" and [t["id"] for t in m["tabs"]] == [opener["id"]],
        ],
    )
    # A closed tab's id is refused by the executor: the session ends without repeating anything.
    await controller.send(json.dumps({"type": "input", "sequence": 3, "input": {"type": "tab", "action": "switch", "tab": popup["id"]}}))
    assert (await recv_json(controller, lambda m: m["type"] in ("ack", "error")))["type"] == "error"


async def test_a_malformed_tab_input_ends_the_session_and_changes_nothing(
    screen: Any, live_origin: str, runner_key: str, site: Site
) -> None:
    open_popup(screen, site)
    controller = await open_socket(live_origin, runner_key, "pc-1", "control", extra_protocols=("ram-tabs-v1",))
    await take_control(controller)
    before = on_executor(screen, screen.pages.tabs_describe)
    opener = before[0]["id"]
    for bad in (
        {"type": "tab", "action": "switch", "tab": opener, "extra": True},
        {"type": "tab", "action": "reload", "tab": opener},
        {"type": "tab", "action": "switch", "tab": "../t1"},
    ):
        await controller.send(json.dumps({"type": "input", "sequence": 1, "input": bad}))
        closing = await recv_until_closed(controller)
        assert [m["type"] for m in closing if isinstance(m, dict)][-1] == "error"
        assert on_executor(screen, screen.pages.tabs_describe) == before
        controller = await open_socket(live_origin, runner_key, "pc-1", "control", extra_protocols=("ram-tabs-v1",))
        await take_control(controller)
    await controller.close()


async def collect_until(ws: ClientConnection, conditions: list[Callable[[dict[str, Any]], bool]]) -> list[dict[str, Any]]:
    """Every JSON message until each condition has matched one of them (an ``error`` stops early)."""
    pending = list(conditions)
    seen: list[dict[str, Any]] = []
    while pending:
        message = await recv_json(ws, lambda m: True)
        seen.append(message)
        if message["type"] == "error":
            raise AssertionError(f"the session ended: {message}")
        pending = [check for check in pending if not check(message)]
    return seen
