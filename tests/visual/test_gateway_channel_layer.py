"""A screen socket whose channel layer fails under it (Redis closes the layer's connection, as a
restart does): the socket is ended like any other server-side end, its session row is ended at once
(so it stops counting against the open-socket limits), nothing logs a traceback, and a new socket
works as soon as Redis answers again. Needs the production channel layer (REDIS_URL)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
import redis
from django.conf import settings

from tests.support.screen import db, open_socket, recv_type, recv_until_closed
from visual.models import VisualSession

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not settings.REDIS_URL, reason="the Redis channel layer needs REDIS_URL"),
]


def _kill_channel_layer_connections() -> int:
    """Close, server-side, every connection of the test's Redis database but our own (the layer's)."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        own = client.client_id()
        db_number = client.connection_pool.connection_kwargs.get("db", 0)
        killed = 0
        for entry in client.client_list():
            if int(entry["db"]) == db_number and int(entry["id"]) != own:
                killed += client.client_kill_filter(_id=entry["id"])
        return killed
    finally:
        client.close()


async def test_a_lost_channel_layer_ends_the_socket_and_its_session(
    screen: Any, live_origin: str, runner_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    ws = await open_socket(live_origin, runner_key, "pc-1", "observe")
    await recv_type(ws, "frame")
    assert await db(lambda: VisualSession.objects.filter(ended_at__isnull=True, connected_at__isnull=False).count()) == 1
    with caplog.at_level(logging.WARNING):
        killed = 0
        # The layer's blocking pop may be between two calls; kill until the socket ends.
        async with asyncio.timeout(30):
            task = asyncio.ensure_future(recv_until_closed(ws, seconds=30))
            while not task.done():
                killed += await asyncio.to_thread(_kill_channel_layer_connections)
                await asyncio.sleep(0.5)
            messages = task.result()
    assert killed >= 1
    errors = [m for m in messages if isinstance(m, dict) and m.get("type") == "error"]
    assert len(errors) == 1 and "channel layer" in errors[0]["message"], messages[-3:]
    session = await db(lambda: VisualSession.objects.get())
    assert session.ended_at is not None and "channel layer" in session.end_reason
    assert "lost the channel layer" in caplog.text
    assert "Traceback" not in caplog.text and not any(r.exc_info for r in caplog.records)
    again = await open_socket(live_origin, runner_key, "pc-1", "observe")
    await recv_type(again, "frame")
    await again.close()
