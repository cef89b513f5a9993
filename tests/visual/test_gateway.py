"""The jpeg-websocket-v1 gateway end to end: real uvicorn, real websockets client,
real executor and Chromium."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from computers.models import Computer
from executor.runtime import Executor
from runs.models import RunEvent
from tests.support.screen import (
    LOCAL_AND_CDP,
    executor_on,
    frame_pair,
    on_executor,
    open_socket,
    recv_type,
    recv_until_closed,
    send_input,
    take_control,
)
from tests.support.tiers import live

BUTTON_PAGE = """<!doctype html><title>t</title>
<style>body{margin:0} #b{position:absolute;left:400px;top:150px;width:200px;height:80px}
#t{position:absolute;left:400px;top:300px;width:300px;height:40px}</style>
<button id="b" onclick="this.dataset.clicks=(+this.dataset.clicks||0)+1">Press</button>
<input id="t" autocomplete="off">"""


@pytest.fixture(scope="module", params=LOCAL_AND_CDP)
@live
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    """This suite runs on the executor's own Chromium and on one reached over CDP."""
    yield from executor_on(request.param)


async def test_observe_session_receives_exact_hello_then_frame_metadata_and_jpeg(screen: Any, live_origin: str, runner_key: str) -> None:
    ws = await open_socket(live_origin, runner_key, "pc-1", "observe")
    assert ws.subprotocol == "ram-jpeg-v1"
    hello = json.loads(await ws.recv())
    assert hello == {
        "type": "hello",
        "version": 1,
        "transport": "jpeg-websocket-v1",
        "mode": "observe",
        "max_fps": 4,
        "viewport": {"width": 1280, "height": 720},
    }
    meta, jpeg = await frame_pair(ws)
    assert set(meta) == {"type", "sequence", "generation", "mime_type", "width", "height", "control", "controlling", "url"}
    assert meta["sequence"] == 1 and meta["mime_type"] == "image/jpeg"
    assert (meta["width"], meta["height"]) == (1280, 720)
    assert meta["generation"] == str(screen.generation) and uuid.UUID(meta["generation"])
    assert meta["control"] == "available" and meta["controlling"] is False
    assert isinstance(meta["url"], str)
    assert jpeg[:2] == b"\xff\xd8" and len(jpeg) <= 2_000_000
    await ws.close()


async def test_takeover_click_and_text_change_the_real_page_then_release(screen: Any, live_origin: str, runner_key: str) -> None:
    on_executor(screen, lambda: screen.page.set_content(BUTTON_PAGE))
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    human = await take_control(ws)
    assert human == {
        "type": "state",
        "control": "human",
        "controlling": True,
        "stopped_processes": 0,
        "cancelled_downloads": 0,
        "aborted_exports": 0,
    }
    assert await send_input(ws, 1, {"type": "pointer", "phase": "down", "x": 500, "y": 190, "button": "left"}) == {"type": "ack", "sequence": 1}
    assert await send_input(ws, 2, {"type": "pointer", "phase": "up", "x": 500, "y": 190}) == {"type": "ack", "sequence": 2}
    clicks = on_executor(screen, lambda: screen.page.evaluate("document.getElementById('b').dataset.clicks"))
    assert clicks == "1"
    await send_input(ws, 3, {"type": "pointer", "phase": "down", "x": 500, "y": 320})
    await send_input(ws, 4, {"type": "pointer", "phase": "up", "x": 500, "y": 320})
    assert await send_input(ws, 5, {"type": "text", "text": "Olá"}) == {"type": "ack", "sequence": 5}
    assert await send_input(ws, 6, {"type": "key", "phase": "down", "key": "Backspace"}) == {"type": "ack", "sequence": 6}
    await send_input(ws, 7, {"type": "key", "phase": "up", "key": "Backspace"})
    value = on_executor(screen, lambda: screen.page.evaluate("document.getElementById('t').value"))
    assert value == "Ol"
    frame = await recv_type(ws, "frame")
    assert frame["control"] == "human" and frame["controlling"] is True
    await ws.send(json.dumps({"type": "release"}))
    assert await recv_type(ws, "state") == {"type": "state", "control": "released", "controlling": False}
    assert on_executor(screen, lambda: _async(screen.control.state)) == "released"
    await ws.close()


async def _async(value: Any) -> Any:
    return value


async def test_observe_session_cannot_take_control(screen: Any, live_origin: str, runner_key: str) -> None:
    ws = await open_socket(live_origin, runner_key, "pc-1", "observe")
    await recv_type(ws, "frame")
    await ws.send(json.dumps({"type": "takeover"}))
    messages = await recv_until_closed(ws)
    errors = [m for m in messages if isinstance(m, dict) and m.get("type") == "error"]
    assert len(errors) == 1 and set(errors[0]) == {"type", "message"}
    assert screen.control.state == "available"


async def test_frames_are_captured_only_while_someone_watches_and_shared_by_viewers(
    screen: Any, live_origin: str, runner_key: str
) -> None:
    assert screen.feed.screencasting is False and not screen.feed.subscribers
    first = await open_socket(live_origin, runner_key, "pc-1", "observe")
    second = await open_socket(live_origin, runner_key, "pc-1", "observe")
    one, _ = await frame_pair(first)
    two, _ = await frame_pair(second)
    assert one["generation"] == two["generation"] == str(screen.generation)
    assert screen.feed.screencasting is True and len(screen.feed.subscribers) == 2
    await first.close()
    await second.close()
    for _ in range(100):
        if not screen.feed.screencasting:
            break
        await asyncio.sleep(0.05)
    assert screen.feed.screencasting is False


async def test_a_persons_control_is_recorded_in_the_events_of_the_run_on_the_computer(
    screen: Any, live_origin: str, runner_key: str, account: Any, make_paused_run: Any
) -> None:
    run = await sync_to_async(lambda: make_paused_run(account, Computer.objects.get(pk="pc-1"), "takeover"))()
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    await ws.send(json.dumps({"type": "release"}))
    assert await recv_type(ws, "state") == {"type": "state", "control": "released", "controlling": False}
    await ws.close()

    def kinds() -> list[tuple[str, Any]]:
        return list(RunEvent.objects.filter(run=run, kind__startswith="control_").values_list("kind", "data"))

    for _ in range(50):  # the release is recorded once the executor confirmed it
        if len(await sync_to_async(kinds)()) == 2:
            break
        await asyncio.sleep(0.1)
    recorded = await sync_to_async(kinds)()
    # Who: the session's holder (here the runner key that created it, by its name, never the key).
    assert [(kind, data["computer_id"], data["by"].startswith("API key ")) for kind, data in recorded] == [
        ("control_taken", "pc-1", True),
        ("control_released", "pc-1", True),
    ]
    assert runner_key not in str(recorded)
