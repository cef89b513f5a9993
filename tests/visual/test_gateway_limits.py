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
from websockets.exceptions import ConnectionClosed, InvalidStatus

from accounts.models import Account, ApiKey
from accounts.services import api_key_create
from computers.models import Computer
from tests.support.live import serve_asgi
from tests.support.screen import (
    create_session,
    db,
    on_executor,
    open_socket,
    recv_type,
    recv_until_closed,
    register,
    start_executor,
    take_control,
    ws_url,
)
from tests.support.tiers import live
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


def _tenant(name: str) -> str:
    """Another account with its own runner key and a computer that reads ready on the module's
    executor: enough to be given a session, never to open its socket (an executor answers only
    its own computer's private-interface token)."""
    account = Account.objects.create(name=name)
    pc1 = Computer.objects.get(pk="pc-1")
    Computer.objects.create(
        id=f"pc-{name}",
        account=account,
        name=name,
        status=pc1.status,
        generation=pc1.generation,
        executor_address=pc1.executor_address,
        last_heartbeat_at=pc1.last_heartbeat_at,
    )
    return api_key_create(account=account, kind=ApiKey.Kind.RUNNER)[1]


async def test_one_account_holds_at_most_its_share_of_the_gateways_sockets(
    screen: Any, live_origin: str, runner_key: str
) -> None:
    """Per account 2 (RAM_VISUAL_MAX_SOCKETS_PER_ACCOUNT) below the gateway's 4."""
    other, third = await db(lambda: _tenant("b")), await db(lambda: _tenant("c"))
    # The other account's sockets open on its own computer's executor.
    theirs_executor = await asyncio.to_thread(start_executor, "pc-b")
    try:
        await db(lambda: register(theirs_executor.executor))
        await _hold_share(live_origin, runner_key, other, third)
    finally:
        await asyncio.to_thread(theirs_executor.stop)


async def _hold_share(live_origin: str, runner_key: str, other: str, third: str) -> None:
    mine = [await open_socket(live_origin, runner_key, "pc-1") for _ in range(2)]
    for ws in mine:
        await recv_type(ws, "hello")
    refused = await create_session(live_origin, runner_key, "pc-1")
    assert refused.status_code == 429 and set(refused.json()) == {"error"}
    assert "Your account" in refused.json()["error"]
    # Another account is not blocked by the first: its sockets open.
    theirs = [await open_socket(live_origin, other, "pc-b") for _ in range(2)]
    for ws in theirs:
        await recv_type(ws, "hello")
    # The gateway's ceiling of 4 still holds for everyone.
    full = await create_session(live_origin, third, "pc-c")
    assert full.status_code == 429 and "this server" in full.json()["error"]
    await mine[0].close()
    for _ in range(50):  # the closed socket's session ends, and a new one may open
        again = await create_session(live_origin, third, "pc-c")
        if again.status_code == 201:
            break
        await asyncio.sleep(0.1)
    assert again.status_code == 201
    for ws in mine[1:] + theirs:
        await ws.close()


async def test_a_ticket_over_the_accounts_socket_share_is_refused_at_the_handshake(
    screen: Any, live_origin: str, runner_key: str
) -> None:
    tickets = [(await create_session(live_origin, runner_key, "pc-1")).json() for _ in range(3)]
    protocols = [[t["subprotocol"], t["ticket_protocol_prefix"] + t["ticket"]] for t in tickets]
    opened = [await connect(ws_url(live_origin), subprotocols=p) for p in protocols[:2]]  # type: ignore[misc]
    with pytest.raises(InvalidStatus) as refused:
        await connect(ws_url(live_origin), subprotocols=protocols[2])  # type: ignore[arg-type]
    assert refused.value.response.status_code == 429
    for ws in opened:
        await ws.close()


async def test_pending_tickets_are_limited_per_account_below_the_gateway(
    screen: Any, live_origin: str, runner_key: str
) -> None:
    """Per account 8 (RAM_VISUAL_MAX_PENDING_TICKETS_PER_ACCOUNT), per gateway 32."""
    keys = [(runner_key, "pc-1")] + [(await db(lambda n=n: _tenant(n)), f"pc-{n}") for n in ("b", "c", "d", "e")]
    for key, computer_id in keys[:4]:
        for _ in range(8):
            assert (await create_session(live_origin, key, computer_id)).status_code == 201
        refused = await create_session(live_origin, key, computer_id)
        assert refused.status_code == 429 and "Your account" in refused.json()["error"]
    # 32 pending in all: the fifth account meets the gateway's ceiling.
    refused = await create_session(live_origin, keys[4][0], keys[4][1])
    assert refused.status_code == 429 and set(refused.json()) == {"error"}
    assert "Your account" not in refused.json()["error"]


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
@live
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
    # A consumer of an earlier test's server may linger (its loop closed before it could end): only a
    # consumer whose loop still runs belongs to this test's server.
    consumers = [c for c in LIVE if not c.ending and getattr(c, "loop", None) is not None and not c.loop.is_closed()]
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


# The 4,000,000-byte ceiling: tests/visual/test_slow_link.py injects a backlog (frames alone stay far below it).


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
