"""WebSocket routes (the jpeg-websocket-v1 gateway lives in visual/).

Any other path is refused before the handshake with a plain HTTP 404 (no
traceback, no log line): a WebSocket to an unknown path is a client's mistake,
not a server failure. A visual ticket it carries (``/api/visual/stream/<ticket>``)
is used up all the same.
"""

import asyncio
import contextlib
from typing import Any

from channels.db import database_sync_to_async
from django.urls import path, re_path

from visual.consumers import VisualStreamConsumer, misplaced_tickets, presented_tickets_burn


async def not_found(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answer the upgrade request with HTTP 404 through the ASGI denial-response extension."""
    message = await receive()
    if message.get("type") != "websocket.connect":
        return
    if misplaced_tickets(scope):  # e.g. /api/visual/stream/<ticket>: used up like any refused one
        await database_sync_to_async(presented_tickets_burn)(scope, "refused at handshake")
    body = b'{"error":"Not found."}'
    if "websocket.http.response" in scope.get("extensions", {}):
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "websocket.http.response.start", "status": 404, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
        # Return only once the server saw the connection close: uvicorn's sans-I/O protocol
        # logs an error for an app that returns before then, even after a full HTTP answer.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                for _ in range(2):  # the refusal's disconnect, then the closed connection's
                    await receive()
    else:  # a server without the extension: refusing before accept is the closest answer (HTTP 403)
        await send({"type": "websocket.close", "code": 1008})


websocket_urlpatterns: list[Any] = [
    path("api/visual/stream", VisualStreamConsumer.as_asgi()),
    re_path(r"", not_found),  # type: ignore[arg-type]  # an ASGI app, as Channels routes take
]
