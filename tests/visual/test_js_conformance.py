"""The spec's two JavaScript examples (``observeComputer``, ``bindHumanGestures``),
unchanged, run by Node with ws@8.22.0 against the live server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.support.screen import on_executor

JS = Path(__file__).resolve().parent.parent / "js"
PAGE = """<!doctype html><title>t</title>
<style>body{margin:0} #t{position:absolute;left:400px;top:300px;width:300px;height:40px}</style>
<form onsubmit="event.preventDefault(); document.body.dataset.sent = document.getElementById('t').value">
<input id="t" autocomplete="off"></form>"""


async def _node(*args: str, key: str) -> dict[str, Any]:
    assert (JS / "node_modules" / "ws").is_dir(), "run `make system-deps` (npm ci in tests/js)"
    process = await asyncio.create_subprocess_exec(
        "node", str(JS / "conformance.mjs"), *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(key.encode()), 90)
    assert process.returncode == 0, (out.decode(), err.decode()[-2000:])
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_the_observation_example_renders_frames(screen: Any, live_origin: str, runner_key: str) -> None:
    on_executor(screen, lambda: screen.page.set_content(PAGE))
    result = await _node("observe", live_origin, "pc-1", key=runner_key)
    assert result["ok"] is True
    first = result["frames"][0]
    assert first["soi"] is True and first["frame"]["generation"] == str(screen.generation)


async def test_the_gesture_adapter_takes_control_clicks_types_and_releases(
    screen: Any, live_origin: str, runner_key: str
) -> None:
    on_executor(screen, lambda: screen.page.set_content(PAGE))
    result = await _node("control", live_origin, "pc-1", "500", "320", "Olá", key=runner_key)
    assert result["ok"] is True
    sent = on_executor(screen, lambda: screen.page.evaluate("document.body.dataset.sent"))
    assert sent == "Olá"
    assert screen.control.state == "released"
