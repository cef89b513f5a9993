"""Transport limits of the gateway: sockets and tickets, message size, message
rate and input queue, and a stalled reader's bounded pending bytes."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.support.live import serve_asgi
from tests.support.screen import (
    create_session,
    db,
    on_executor,
    open_socket,
    recv_type,
    recv_until_closed,
    take_control,
    ws_url,
)
from visual import limits
from visual.consumers import LIVE
from visual.models import VisualSession

# Random pixels: large JPEG frames (about 445 kB each at quality 65), a new one every animation frame.
NOISE_PAGE = """<!doctype html><body style="margin:0"><canvas id=c width=1280 height=720></canvas><script>
{ const c = document.getElementById('c').getContext('2d'); const img = c.createImageData(1280, 720);
  const draw = () => { const d = new Uint32Array(img.data.buffer);
    for (let i = 0; i < d.length; i++) d[i] = (Math.random() * 0xffffffff) | 0xff000000;
    c.putImageData(img, 0, 0); requestAnimationFrame(draw); };
  draw(); }</script>"""


async def test_the_fifth_socket_is_refused_with_429(screen: Any, live_origin: str, runner_key: str) -> None:
    sockets = [await open_socket(live_origin, runner_key, "pc-1") for _ in range(4)]
    for ws in sockets:
        await recv_type(ws, "hello")
    fifth = await create_session(live_origin, runner_key, "pc-1")
    assert fifth.status_code == 429 and set(fifth.json()) == {"error"}
    await sockets[0].close()
    for _ in range(50):  # the closed socket's session ends, and a new one may open
        again = await create_session(live_origin, runner_key, "pc-1")
        if again.status_code == 201:
            break
        await asyncio.sleep(0.1)
    assert again.status_code == 201
    for ws in sockets[1:]:
        await ws.close()


async def test_the_thirty_third_pending_ticket_is_refused_with_429(screen: Any, live_origin: str, runner_key: str) -> None:
    for _ in range(32):
        assert (await create_session(live_origin, runner_key, "pc-1")).status_code == 201
    refused = await create_session(live_origin, runner_key, "pc-1")
    assert refused.status_code == 429 and set(refused.json()) == {"error"}


async def test_a_message_over_16000_bytes_closes_with_1009(screen: Any, live_origin: str, runner_key: str) -> None:
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    await ws.send(json.dumps({"type": "input", "sequence": 1, "input": {"type": "text", "text": "a" * 16_000}}))
    with pytest.raises(ConnectionClosed):
        while True:
            await ws.recv()
    assert ws.close_code == 1009


async def test_sixteen_waiting_inputs_is_the_limit(screen: Any, live_origin: str, runner_key: str) -> None:
    on_executor(screen, lambda: screen.page.set_content("<input id=t autofocus>"))
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    # Each input waits for the page; together they overflow the queue of 16.
    burst = [
        json.dumps({"type": "input", "sequence": n, "input": {"type": "navigate", "url": "http://127.0.0.1:9/"}})
        for n in range(1, 40)
    ]
    for message in burst:
        await ws.send(message)
    messages = await recv_until_closed(ws)
    errors = [m for m in messages if isinstance(m, dict) and m.get("type") == "error"]
    acks = [m for m in messages if isinstance(m, dict) and m.get("type") == "ack"]
    assert len(errors) == 1 and len(acks) < 17


async def test_a_flood_of_messages_is_closed(screen: Any, live_origin: str, runner_key: str) -> None:
    ws = await open_socket(live_origin, runner_key, "pc-1", "control")
    await take_control(ws)
    sent = 0
    try:
        for sequence in range(1, 401):  # as fast as the socket takes them, each one valid
            await ws.send(json.dumps({"type": "input", "sequence": sequence, "input": {"type": "pointer", "phase": "move", "x": 1, "y": 1}}))
            sent = sequence
    except ConnectionClosed:
        pass
    messages = await recv_until_closed(ws)
    errors = [m for m in messages if isinstance(m, dict) and m.get("type") == "error"]
    assert sent < 400 or errors
    assert len(errors) <= 1


@pytest.fixture
def quiet_origin(live_origin: str) -> Iterator[str]:
    """A second server on the same app without Ping: a stalled reader would otherwise be
    closed by the missing Pong (after ~4 s) before the byte bounds come into play."""
    with serve_asgi(ws_ping_interval=None) as origin:
        yield origin


async def _stalled_socket(live_origin: str, runner_key: str, stream_origin: str) -> Any:
    response = await create_session(live_origin, runner_key, "pc-1")
    session = response.json()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", int(stream_origin.rsplit(":", 1)[1])))
    sock.setblocking(False)
    # max_queue=1: the client stops reading from the socket once one message waits.
    return await connect(
        ws_url(stream_origin),
        sock=sock,
        max_queue=1,
        subprotocols=[session["subprotocol"], session["ticket_protocol_prefix"] + session["ticket"]],
    )


def _consumer() -> Any:
    consumers = [c for c in LIVE if not c.ending]
    return consumers[0] if consumers else None


async def test_a_stalled_reader_gets_frames_skipped_with_bounded_pending_bytes(
    screen: Any, live_origin: str, quiet_origin: str, runner_key: str, settings: Any
) -> None:
    settings.RAM_VISUAL_MAX_FPS = 10
    on_executor(screen, lambda: screen.page.set_content(NOISE_PAGE))
    ws = await _stalled_socket(live_origin, runner_key, quiet_origin)
    consumer = None
    for _ in range(200):
        consumer = consumer or _consumer()
        if consumer is not None and consumer.frames_skipped >= 3 and consumer.pending_bytes() >= limits.SKIP_FRAMES_AT_PENDING_BYTES:
            break
        await asyncio.sleep(0.05)
    assert consumer is not None
    assert consumer.frames_skipped >= 3
    assert consumer.max_pending_seen <= limits.TERMINATE_ABOVE_PENDING_BYTES
    ws.transport.abort()


async def test_a_stalled_reader_over_the_pending_bound_is_terminated(
    screen: Any, live_origin: str, quiet_origin: str, runner_key: str, settings: Any, monkeypatch: Any
) -> None:
    # Frames alone stop at the 1,000,000-byte skip; lowering the bound to it shows the termination path.
    monkeypatch.setattr(limits, "TERMINATE_ABOVE_PENDING_BYTES", limits.SKIP_FRAMES_AT_PENDING_BYTES)
    settings.RAM_VISUAL_MAX_FPS = 10
    on_executor(screen, lambda: screen.page.set_content(NOISE_PAGE))
    ws = await _stalled_socket(live_origin, runner_key, quiet_origin)
    ended = None
    for _ in range(200):
        ended = await db(lambda: VisualSession.objects.filter(ended_at__isnull=False).first())
        if ended is not None:
            break
        await asyncio.sleep(0.05)
    assert ended is not None and ended.end_reason == "congested"
    ws.transport.abort()


async def test_a_client_that_stops_answering_ping_is_closed(screen: Any, live_origin: str, runner_key: str) -> None:
    # A quiet page: no byte bound is reached; only the missing Pong ends the socket.
    ws = await _stalled_socket(live_origin, runner_key, live_origin)
    ended = None
    for _ in range(300):
        ended = await db(lambda: VisualSession.objects.filter(ended_at__isnull=False).first())
        if ended is not None:
            break
        await asyncio.sleep(0.05)
    assert ended is not None and ended.end_reason == "disconnected"
    ws.transport.abort()
