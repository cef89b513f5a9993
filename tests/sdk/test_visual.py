"""The SDK's observe_computer and HumanControl against the real gateway, executor and Chromium."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from ram_sdk import ControlError, HumanControl, RamClient, VisualError, observe_computer, open_visual_stream

from tests.support.screen import on_executor
from visual.models import VisualSession

BUTTON_PAGE = """<!doctype html><title>t</title>
<style>body{margin:0} #b{position:absolute;left:400px;top:150px;width:200px;height:80px}</style>
<button id="b" onclick="this.dataset.clicks=(+this.dataset.clicks||0)+1">Press</button>"""

DEADLINE = 20


async def test_observe_computer_pairs_each_jpeg_with_its_frame_and_never_reconnects(
    screen: Any, live_origin: str, runner_key: str
) -> None:
    images: list[tuple[bytes, dict[str, Any]]] = []
    disconnects: list[bool] = []
    stream = await observe_computer(
        base_url=live_origin,
        computer_id="pc-1",
        credential=lambda: runner_key,
        render_jpeg=lambda jpeg, frame: images.append((jpeg, frame)),
        on_disconnect=lambda: disconnects.append(True),
        deadline=DEADLINE,
    )
    await stream.wait_first_frame(DEADLINE)
    jpeg, frame = images[0]
    assert jpeg[:2] == b"\xff\xd8" and len(jpeg) <= 2_000_000
    assert frame["type"] == "frame" and frame["mime_type"] == "image/jpeg"
    assert frame["generation"] == str(screen.generation) == stream.generation
    assert (frame["width"], frame["height"], frame["controlling"]) == (1280, 720, False)
    await stream.close()
    assert stream.closed.is_set() and disconnects == [True]
    # Closing ends it: no new session was created behind the caller's back.
    assert await database_sync_to_async(VisualSession.objects.count)() == 1


async def test_human_control_clicks_with_one_input_in_flight_then_releases(
    screen: Any, live_origin: str, runner_key: str
) -> None:
    on_executor(screen, lambda: screen.page.set_content(BUTTON_PAGE))
    states: list[dict[str, Any]] = []
    stream = await open_visual_stream(
        base_url=live_origin,
        computer_id="pc-1",
        credential=lambda: runner_key,
        render_jpeg=lambda jpeg, frame: None,
        mode="control",
        deadline=DEADLINE,
    )
    control = HumanControl(stream, wait_ms=DEADLINE * 1000, on_state=states.append)
    with pytest.raises(ControlError):
        await control.input({"type": "pointer", "phase": "down", "x": 500, "y": 190})  # no control yet
    await stream.wait_first_frame(DEADLINE)
    await control.takeover()
    assert control.controlling

    down = asyncio.ensure_future(control.input({"type": "pointer", "phase": "down", "x": 500, "y": 190}))
    await asyncio.sleep(0)  # the input is now in flight
    assert control.awaiting_ack
    with pytest.raises(ControlError, match="Wait for control and ack"):
        await control.input({"type": "pointer", "phase": "up", "x": 500, "y": 190})
    await down
    await control.input({"type": "pointer", "phase": "up", "x": 500, "y": 190})
    assert on_executor(screen, lambda: screen.page.evaluate("document.getElementById('b').dataset.clicks")) == "1"
    with pytest.raises(ControlError, match="Invalid input"):
        await control.input({"type": "click", "x": 1, "y": 1})

    await control.release()
    assert not control.controlling
    assert screen.control.state == "released"
    assert {"controlling": True, "awaiting_ack": False} in states
    await stream.close()
    assert states[-1] == {"controlling": False, "uncertain": False}


async def test_observe_session_cannot_be_used_for_control(screen: Any, live_origin: str, runner_key: str) -> None:
    stream = await observe_computer(
        base_url=live_origin,
        computer_id="pc-1",
        credential=lambda: runner_key,
        render_jpeg=lambda jpeg, frame: None,
        deadline=DEADLINE,
    )
    with pytest.raises(ControlError):
        HumanControl(stream, wait_ms=1000)
    await stream.close()


async def test_task_observer_and_unknown_computer_get_no_session(
    screen: Any, live_origin: str, observer_key: str, runner_key: str
) -> None:
    with pytest.raises(VisualError, match="HTTP 403"):
        await observe_computer(
            base_url=live_origin,
            computer_id="pc-1",
            credential=lambda: observer_key,
            render_jpeg=lambda jpeg, frame: None,
            deadline=DEADLINE,
        )
    with pytest.raises(VisualError, match="HTTP 409"):
        await observe_computer(
            base_url=live_origin,
            computer_id="pc-404",
            credential=lambda: runner_key,
            render_jpeg=lambda jpeg, frame: None,
            deadline=DEADLINE,
        )
    assert await database_sync_to_async(VisualSession.objects.count)() == 0


async def test_ram_client_observes_with_its_own_origin_and_credential(
    screen: Any, live_origin: str, runner_key: str
) -> None:
    images: list[bytes] = []
    with RamClient(live_origin, credential=lambda: runner_key, timeout=DEADLINE) as ram:
        stream = await ram.observe_computer("pc-1", render_jpeg=lambda jpeg, frame: images.append(jpeg))
        await stream.wait_first_frame(DEADLINE)
        assert stream.mode == "observe" and images[0][:2] == b"\xff\xd8"
        await stream.close()


async def test_the_sdk_sends_utf8_json_so_4000_accented_letters_fit_the_16000_byte_limit(
    screen: Any, live_origin: str, runner_key: str
) -> None:
    """A ``text`` input of 4,000 "é" is ~8 KB as UTF-8 JSON (24 KB with ASCII escapes, over the limit)."""
    on_executor(screen, lambda: screen.page.set_content("<textarea id=t autofocus></textarea>"))
    on_executor(screen, lambda: screen.page.focus("#t"))
    stream = await open_visual_stream(
        base_url=live_origin,
        computer_id="pc-1",
        credential=lambda: runner_key,
        render_jpeg=lambda jpeg, frame: None,
        mode="control",
        deadline=DEADLINE,
    )
    control = HumanControl(stream, wait_ms=DEADLINE * 1000)
    await stream.wait_first_frame(DEADLINE)
    await control.takeover()
    await control.input({"type": "text", "text": "é" * 4000})
    assert on_executor(screen, lambda: screen.page.input_value("#t")) == "é" * 4000
    await control.release()
    await stream.close()
