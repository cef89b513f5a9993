"""Every key the contract accepts reaches the page, and nothing a person held stays
pressed when their control ends: real uvicorn, executor, Chromium and client."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from computers.client import ExecutorClient
from computers.models import Computer
from tests.support.screen import db, on_executor, open_socket, recv_type, send_input, take_control

# A field that records every key event it sees (key and the state of Shift).
KEY_PAGE = """<!doctype html><title>keys</title><body style="margin:0">
<textarea id=t style="position:absolute;left:100px;top:100px;width:600px;height:200px"></textarea>
<input id=next style="position:absolute;left:100px;top:400px">
<div id=pad style="position:absolute;left:800px;top:100px;width:300px;height:300px;background:#ddd"></div>
<script>
window.log = [];
for (const type of ["keydown", "keyup"]) document.addEventListener(type, e => log.push([type, e.key, e.shiftKey]), true);
window.mouse = [];
for (const type of ["mousedown", "mouseup", "mousemove"]) document.addEventListener(type, e => mouse.push([type, e.buttons]), true);
</script>"""

# (key, what the field holds after key down + key up).
PRINTED = [
    ("a", "a"),
    ("Z", "Z"),
    ("7", "7"),
    ("@", "@"),
    (" ", " "),
    ("é", "é"),
    ("ç", "ç"),
    ("ñ", "ñ"),
    ("€", "€"),
    ("ß", "ß"),
    ("Ö", "Ö"),
    ("中", "中"),
    ("\u00a0", "\u00a0"),  # NBSP
    ("\u0301", "\u0301"),  # combining acute accent
    ("\u00bf", "\u00bf"),  # ¿
    ("\u0436", "\u0436"),  # Cyrillic zhe
    ("\n", "\n"),  # Enter in a textarea
]
# Control characters that have a key of their own are pressed as that key.
PRESSED_AS = [("\t", "Tab"), ("\x1b", "Escape")]


async def _focus_empty_field(screen: Any) -> None:
    async def focus() -> None:
        await screen.page.evaluate("() => { const t = document.getElementById('t'); t.value = ''; t.focus(); window.log = []; }")

    on_executor(screen, focus)


def _field(screen: Any) -> str:
    return str(on_executor(screen, lambda: screen.page.evaluate("document.getElementById('t').value")))


async def test_every_key_the_contract_accepts_reaches_the_page(screen: Any, live_origin: str, runner_key: str) -> None:
    on_executor(screen, lambda: screen.page.set_content(KEY_PAGE))
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    sequence = 0
    for key, expected in PRINTED:
        await _focus_empty_field(screen)
        for phase in ("down", "up"):
            sequence += 1
            reply = await send_input(ws, sequence, {"type": "key", "phase": phase, "key": key})
            assert reply == {"type": "ack", "sequence": sequence}, f"key {key!r} {phase}: {reply}"
        assert _field(screen) == expected, f"key {key!r}"
        if key != "\n":
            # A key, not text: the page sees its keydown and keyup (é too, with no US key).
            log = on_executor(screen, lambda: screen.page.evaluate("window.log"))
            assert ["keydown", key, False] in log and ["keyup", key, False] in log, f"key {key!r}: {log}"
    for key, name in PRESSED_AS:
        await _focus_empty_field(screen)
        for phase in ("down", "up"):
            sequence += 1
            reply = await send_input(ws, sequence, {"type": "key", "phase": phase, "key": key})
            assert reply == {"type": "ack", "sequence": sequence}, f"key {key!r} {phase}: {reply}"
        log = on_executor(screen, lambda: screen.page.evaluate("window.log"))
        assert ["keydown", name, False] in log and ["keyup", name, False] in log, f"key {key!r}: {log}"
    # Shift with a character without a US key: still the character, and Shift is released after.
    await _focus_empty_field(screen)
    for phase, key in (("down", "Shift"), ("down", "é"), ("up", "é"), ("up", "Shift"), ("down", "x"), ("up", "x")):
        sequence += 1
        assert await send_input(ws, sequence, {"type": "key", "phase": phase, "key": key}) == {"type": "ack", "sequence": sequence}
    assert _field(screen) == "éx"
    await ws.close()


async def _is_released(screen: Any) -> bool:
    return bool(screen.control.state == "released")


@pytest.mark.parametrize("cut", ["socket", "release"])
async def test_nothing_stays_pressed_when_control_ends(
    screen: Any, live_origin: str, runner_key: str, cut: str
) -> None:
    on_executor(screen, lambda: screen.page.set_content(KEY_PAGE))
    on_executor(screen, lambda: screen.page.focus("#t"))
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    assert await send_input(ws, 1, {"type": "key", "phase": "down", "key": "Shift"}) == {"type": "ack", "sequence": 1}
    assert await send_input(ws, 2, {"type": "pointer", "phase": "down", "x": 900, "y": 200}) == {"type": "ack", "sequence": 2}
    assert await send_input(ws, 3, {"type": "pointer", "phase": "down", "x": 900, "y": 200, "button": "right"}) == {"type": "ack", "sequence": 3}
    if cut == "socket":
        ws.transport.abort()  # no release, no close frame: the connection is simply gone
    else:
        await ws.send(json.dumps({"type": "release"}))
        assert await recv_type(ws, "state") == {"type": "state", "control": "released", "controlling": False}
    for _ in range(200):
        if on_executor(screen, lambda: _is_released(screen)):
            break
        await asyncio.sleep(0.05)
    assert screen.control.state == "released"
    on_executor(screen, lambda: screen.page.focus("#t"))  # the press on the pad took the focus

    # The agent's next action sees no Shift: its "a" is a lowercase a, and no button is down.
    computer = await db(lambda: Computer.objects.get(pk="pc-1"))
    client = ExecutorClient(computer)
    lease = await asyncio.to_thread(client.lease_acquire)
    await asyncio.to_thread(client.press, lease, "a")
    assert _field(screen) == "a"
    log = on_executor(screen, lambda: screen.page.evaluate("window.log"))
    assert ["keyup", "Shift", False] in log
    mouse = on_executor(screen, lambda: screen.page.evaluate("window.mouse"))
    ups = [event for event in mouse if event[0] == "mouseup"]
    assert len(ups) == 2 and ups[-1][1] == 0, mouse
    await asyncio.to_thread(client.lease_release, lease)

    # The next person starts with nothing pressed either.
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    assert await send_input(ws, 1, {"type": "key", "phase": "down", "key": "b"}) == {"type": "ack", "sequence": 1}
    assert await send_input(ws, 2, {"type": "key", "phase": "up", "key": "b"}) == {"type": "ack", "sequence": 2}
    assert await send_input(ws, 3, {"type": "pointer", "phase": "move", "x": 950, "y": 250}) == {"type": "ack", "sequence": 3}
    assert _field(screen) == "ab"
    mouse = on_executor(screen, lambda: screen.page.evaluate("window.mouse"))
    assert mouse[-1] == ["mousemove", 0]
    await ws.close()
