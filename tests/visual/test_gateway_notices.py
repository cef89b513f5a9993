"""The ram-notices-v1 addition through the real gateway (uvicorn, websockets, Chromium): a
navigation that times out or is refused is acked and explained by a ``notice`` and the person
keeps control; a client that does not offer the addition gets the spec's terminal ``error``."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.screen import open_socket, recv_json, recv_until_closed, send_input, take_control
from visual.contracts import NOTICES_PROTOCOL


def _go(sequence: int, url: str) -> str:
    return json.dumps({"type": "input", "sequence": sequence, "input": {"type": "navigate", "url": url}})


@pytest.fixture
def silent_site(allow_egress: Callable[[str], None]) -> Iterator[str]:
    """A loopback site that accepts connections and never answers: a navigation to it times out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    origin = f"http://127.0.0.1:{listener.getsockname()[1]}"
    allow_egress(origin)
    try:
        yield origin
    finally:
        listener.close()


async def test_a_refused_and_a_timed_out_navigation_are_acked_explained_and_control_stays(
    screen: Any, live_origin: str, runner_key: str, silent_site: str
) -> None:
    ws = await open_socket(live_origin, runner_key, "pc-1", "control", extra_protocols=(NOTICES_PROTOCOL,))
    await take_control(ws)
    # Refused by the egress policy (a private address).
    await ws.send(_go(1, "http://10.255.255.1/"))
    notice = await recv_json(ws, lambda m: m["type"] in {"notice", "ack", "error"})
    assert notice["type"] == "notice" and notice["code"] == "navigation_failed" and notice["sequence"] == 1, notice
    assert "egress policy refused" in notice["message"]
    assert await recv_json(ws, lambda m: m["type"] in {"ack", "error"}) == {"type": "ack", "sequence": 1}
    # Timed out (the site never answers; the executor waits 7 s at most).
    await ws.send(_go(2, silent_site + "/"))
    notice = await recv_json(ws, lambda m: m["type"] in {"notice", "ack", "error"}, seconds=30)
    assert notice["type"] == "notice" and notice["code"] == "navigation_failed" and notice["sequence"] == 2, notice
    assert await recv_json(ws, lambda m: m["type"] in {"ack", "error"}) == {"type": "ack", "sequence": 2}
    # The person still has control: the next input is done.
    assert await send_input(ws, 3, {"type": "navigate", "url": "http://10.255.255.2/"}) == {
        "type": "ack",
        "sequence": 3,
    }
    assert await send_input(ws, 4, {"type": "key", "phase": "down", "key": "a"}) == {"type": "ack", "sequence": 4}
    assert await send_input(ws, 5, {"type": "key", "phase": "up", "key": "a"}) == {"type": "ack", "sequence": 5}
    assert screen.control.state == "human"
    await ws.close()


async def test_without_the_addition_a_refused_navigation_still_ends_the_session(
    screen: Any, live_origin: str, runner_key: str
) -> None:
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    await ws.send(_go(1, "http://10.255.255.1/"))
    messages = [m for m in await recv_until_closed(ws) if isinstance(m, dict)]
    assert [m["type"] for m in messages if m["type"] in {"notice", "ack", "error"}] == ["error"]
