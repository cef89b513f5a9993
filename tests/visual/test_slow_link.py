"""Slow links get fewer frames, not disconnects: pending bytes count the kernel's
send queue, at most one frame waits behind the socket, and only the spec's
4,000,000-byte ceiling (reached here by an injected backlog) ends a session."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.support.live import serve_asgi
from tests.support.screen import create_session, db, on_executor, ws_url
from tests.support.throttle import ThrottleProxy
from tests.support.tiers import live
from tests.visual.test_gateway_limits import NOISE_PAGE, _consumer, _stalled_socket
from visual import limits
from visual.contracts import NOTICES_PROTOCOL
from visual.models import VisualSession

# How long each slow link is watched: 60 s in `make test`; the 10 minutes on demand
# (RAM_TEST_SLOW_LINK_SECONDS=600; a screen session lasts at most 900 s).
SLOW_LINK_SECONDS = int(os.environ.get("RAM_TEST_SLOW_LINK_SECONDS", "60"))


async def test_a_slow_link_gets_fewer_frames_and_no_disconnect(
    screen: Any, live_origin: str, runner_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    """0.5 MB/s through a 64 KB receive buffer, ~445 KB frames, 60 s: frames keep arriving."""
    caplog.set_level(logging.INFO)
    on_executor(screen, lambda: screen.page.set_content(NOISE_PAGE))
    port = int(live_origin.rsplit(":", 1)[1])
    async with ThrottleProxy(port, rate=500_000, receive_buffer=64 * 1024) as proxy:
        session = (await create_session(live_origin, runner_key, "pc-1")).json()
        ws = await connect(
            ws_url(f"http://127.0.0.1:{proxy.port}"),
            subprotocols=[session["subprotocol"], session["ticket_protocol_prefix"] + session["ticket"]],
            max_size=4_000_000,
            ping_interval=None,  # the server's Ping every 2 s is the heartbeat under test
        )
        arrivals: list[tuple[float, int]] = []
        start = time.monotonic()
        try:
            while time.monotonic() - start < SLOW_LINK_SECONDS:
                try:
                    async with asyncio.timeout(max(0.1, SLOW_LINK_SECONDS - (time.monotonic() - start))):
                        message = await ws.recv()
                except TimeoutError:
                    break
                if isinstance(message, bytes):
                    arrivals.append((time.monotonic() - start, len(message)))
        except ConnectionClosed as closed:
            pytest.fail(f"the slow link was cut after {time.monotonic() - start:.1f} s ({closed!r}), {len(arrivals)} frames")
        await ws.close()
    sizes = [size for _, size in arrivals]
    assert len(arrivals) >= SLOW_LINK_SECONDS * 0.5, f"{len(arrivals)} frames in {SLOW_LINK_SECONDS} s"
    assert sum(sizes) / len(sizes) >= 350_000, "the page must make heavy frames"
    # Frames keep arriving all along, not in one early burst.
    for window in range(0, SLOW_LINK_SECONDS, 15):
        assert any(window <= at < window + 15 for at, _ in arrivals), f"no frame between {window} s and {window + 15} s"
    ended = await db(lambda: list(VisualSession.objects.exclude(ended_at=None).values_list("end_reason", flat=True)))
    assert ended == ["disconnected"]  # ended by the client's own close, nothing else
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.WARNING], "nothing to report"


@pytest.fixture
@live
def quiet_origin(live_origin: str) -> Iterator[str]:
    """A server without Ping, so a stalled reader is ended by byte bounds only."""
    with serve_asgi(ws_ping_interval=None) as origin:
        yield origin


async def test_a_stalled_reader_holds_at_most_one_frame_behind_the_socket(
    screen: Any, live_origin: str, quiet_origin: str, runner_key: str, settings: Any
) -> None:
    settings.RAM_VISUAL_MAX_FPS = 10
    on_executor(screen, lambda: screen.page.set_content(NOISE_PAGE))
    ws = await _stalled_socket(live_origin, runner_key, quiet_origin)
    consumer = None
    for _ in range(300):
        consumer = consumer or _consumer()
        if consumer is not None and consumer.frames_skipped >= 10:
            break
        await asyncio.sleep(0.05)
    assert consumer is not None and consumer.frames_skipped >= 10
    # The kernel's send queue is counted: the second frame waits for the first to leave.
    assert consumer.frames_sent == 1
    assert consumer.pending_bytes() >= limits.NEXT_FRAME_BELOW_PENDING_BYTES
    assert consumer.max_pending_seen <= limits.NEXT_FRAME_BELOW_PENDING_BYTES + 2_000_000 + 1_000
    ws.transport.abort()


async def test_a_backlog_over_four_million_bytes_ends_the_session(
    screen: Any, live_origin: str, quiet_origin: str, runner_key: str
) -> None:
    # Frames alone never get near the ceiling (one frame at most is queued), so inject a backlog.
    ws = await _stalled_socket(live_origin, runner_key, quiet_origin)
    consumer = None
    for _ in range(200):
        consumer = _consumer()
        if consumer is not None and consumer.frames_sent >= 1:
            break
        await asyncio.sleep(0.05)
    assert consumer is not None
    transport = consumer._transport()
    loop = consumer.loop
    # Just under the ceiling: the session goes on through a whole check cycle.
    loop.call_soon_threadsafe(transport.write, b"\0" * (limits.TERMINATE_ABOVE_PENDING_BYTES - 600_000))
    await asyncio.sleep(limits.CYCLE_SECONDS * 1.5)
    assert limits.TERMINATE_ABOVE_PENDING_BYTES - 700_000 < consumer.pending_bytes() <= limits.TERMINATE_ABOVE_PENDING_BYTES
    assert not consumer.ending
    # Over it: the session ends as congested.
    loop.call_soon_threadsafe(transport.write, b"\0" * 1_000_000)
    ended = None
    for _ in range(200):
        ended = await db(lambda: VisualSession.objects.filter(ended_at__isnull=False).first())
        if ended is not None:
            break
        await asyncio.sleep(0.05)
    assert ended is not None and ended.end_reason == "congested"
    ws.transport.abort()


async def _watch_through(proxy: ThrottleProxy, live_origin: str, runner_key: str, seconds: float) -> tuple[list[tuple[float, int]], list[dict[str, Any]]]:
    """Frames (arrival, size) and notices of a ram-notices-v1 socket through ``proxy`` for ``seconds``."""
    session = (await create_session(live_origin, runner_key, "pc-1")).json()
    ws = await connect(
        ws_url(f"http://127.0.0.1:{proxy.port}"),
        subprotocols=[session["subprotocol"], NOTICES_PROTOCOL, session["ticket_protocol_prefix"] + session["ticket"]],  # type: ignore[list-item]
        max_size=4_000_000,
        ping_interval=None,  # the server's Ping every 2 s is the heartbeat under test
    )
    arrivals: list[tuple[float, int]] = []
    notices: list[dict[str, Any]] = []
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            try:
                async with asyncio.timeout(max(0.1, seconds - (time.monotonic() - start))):
                    message = await ws.recv()
            except TimeoutError:
                break
            if isinstance(message, bytes):
                arrivals.append((time.monotonic() - start, len(message)))
            elif json.loads(message)["type"] == "notice":
                notices.append(json.loads(message))
    except ConnectionClosed as closed:
        pytest.fail(f"the slow link was cut after {time.monotonic() - start:.1f} s ({closed!r}), {len(arrivals)} frames")
    await ws.close()
    return arrivals, notices


async def test_at_150_kb_per_second_heavy_frames_keep_the_session_and_it_is_told_the_link_is_slow(
    screen: Any, live_origin: str, runner_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    """445 KB frames take 3 s each at 150 KB/s, longer than the 2 s Ping: the Ping waits behind a
    frame and its Pong is awaited from when it has left, so the session stays; a ram-notices-v1
    client is told the link is too slow for the page."""
    caplog.set_level(logging.INFO)
    on_executor(screen, lambda: screen.page.set_content(NOISE_PAGE))
    port = int(live_origin.rsplit(":", 1)[1])
    async with ThrottleProxy(port, rate=150_000, receive_buffer=64 * 1024) as proxy:
        arrivals, notices = await _watch_through(proxy, live_origin, runner_key, SLOW_LINK_SECONDS)
    sizes = [size for _, size in arrivals]
    assert len(arrivals) >= SLOW_LINK_SECONDS / 5, f"{len(arrivals)} frames in {SLOW_LINK_SECONDS} s"
    assert sum(sizes) / len(sizes) >= 350_000, "the page must make heavy frames"
    for window in range(0, SLOW_LINK_SECONDS, 15):
        assert any(window <= at < window + 15 for at, _ in arrivals), f"no frame between {window} s and {window + 15} s"
    assert [n["code"] for n in notices][:1] == ["slow_link"], notices
    assert "too slow" in notices[0]["message"]
    ended = await db(lambda: list(VisualSession.objects.exclude(ended_at=None).values_list("end_reason", flat=True)))
    assert ended == ["disconnected"]


async def test_at_400_kb_per_second_heavy_frames_come_at_least_0_8_per_second(
    screen: Any, live_origin: str, runner_key: str
) -> None:
    on_executor(screen, lambda: screen.page.set_content(NOISE_PAGE))
    port = int(live_origin.rsplit(":", 1)[1])
    async with ThrottleProxy(port, rate=400_000, receive_buffer=64 * 1024) as proxy:
        arrivals, notices = await _watch_through(proxy, live_origin, runner_key, 30)
    assert sum(size for _, size in arrivals) / len(arrivals) >= 350_000, "the page must make heavy frames"
    steady = [at for at, _ in arrivals if at >= 5]
    assert len(steady) / 25 >= 0.8, f"{len(steady)} frames in 25 s"
    assert "slow_link" not in [n["code"] for n in notices], notices
