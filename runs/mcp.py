"""The MCP interface of runs: the tools of ``runs.mcp_tools`` served over streamable HTTP at ``/mcp``.

Every HTTP request to ``/mcp`` is authenticated with ``Authorization: Bearer
<API key>`` before the MCP transport sees it. The endpoint is stateless (JSON
responses, no server-side session), so any web process behind a load balancer
can answer any request, and a revoked key stops working on its next request.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from accounts.auth import authenticate_bearer
from accounts.models import ApiKey
from core.api import MAX_BODY_BYTES
from core.errors import DomainError, status_for
from core.json import json_bytes
from core.metrics import HTTP_LATENCY, HTTP_REQUESTS
from runs.mcp_tools import MCP_STATUS, READ_KINDS, SCOPE_KEY, TOOL_KINDS, server

MCP_PATH = "/mcp"

__all__ = ["MCP_STATUS", "TOOL_KINDS", "server", "with_mcp"]

# --- The /mcp endpoint --------------------------------------------------------

Asgi = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


async def _respond(send: Callable[[Any], Awaitable[None]], status: int, message: str) -> None:
    headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff")]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="ram"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json_bytes({"error": message})})


async def _bounded_body(receive: Any, limit: int) -> bytes | None:
    """The request's body, or None once it exceeds ``limit`` bytes (the rest is not read)."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body)  # the client went away; the transport sees an empty request
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            return bytes(body)


def _replay(body: bytes, receive: Any) -> Callable[[], Awaitable[dict[str, Any]]]:
    """A ``receive`` that hands over the body read already, then waits on the connection as before."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return dict(await receive())

    return replay


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


@database_sync_to_async
def _authenticate(authorization: str | None) -> ApiKey:
    # The REST check, so both interfaces refuse the same keys the same way.
    return authenticate_bearer(authorization or "", READ_KINDS)


class McpEndpoint:
    """ASGI app at ``/mcp``: check host and origin, authenticate the key, hand over to MCP.

    The MCP session manager needs a running task group, and an ASGI server may
    not send lifespan events (tests run uvicorn with lifespan off), so one
    manager is started lazily per event loop and lives as long as that loop.
    """

    def __init__(self, mcp_server: MCPServer[Any]) -> None:
        self._server = mcp_server
        self._managers: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[asyncio.Future[StreamableHTTPSessionManager], asyncio.Task[None]]
        ] = weakref.WeakKeyDictionary()

    async def _manager(self) -> StreamableHTTPSessionManager:
        loop = asyncio.get_running_loop()
        entry = self._managers.get(loop)
        if entry is None:
            ready: asyncio.Future[StreamableHTTPSessionManager] = loop.create_future()
            task = loop.create_task(self._serve(ready))
            # The task refers to its loop: forget the entry when it ends, or the loop never would be.
            task.add_done_callback(lambda _task: self._managers.pop(loop, None))
            entry = (ready, task)
            self._managers[loop] = entry
        return await asyncio.shield(entry[0])

    async def _serve(self, ready: asyncio.Future[StreamableHTTPSessionManager]) -> None:
        # Host and Origin are checked in __call__ against Django's settings; bodies are bounded as REST's are.
        self._server.streamable_http_app(
            stateless_http=True, json_response=True, transport_security=None, host="", max_request_body_size=MAX_BODY_BYTES
        )
        manager = self._server.session_manager
        try:
            async with manager.run():
                ready.set_result(manager)
                await asyncio.Event().wait()  # until the event loop shuts down
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(RuntimeError("The MCP session manager did not start."))
            raise exc

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        host = _header(scope, b"host") or ""
        domain, _port = split_domain_port(host)
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
            await _respond(send, 400, "Invalid Host header.")
            return
        origin = _header(scope, b"origin")
        if origin is not None and origin != settings.RAM_PUBLIC_ORIGIN:
            await _respond(send, 403, "This origin may not use the MCP endpoint.")
            return
        try:
            key = await _authenticate(_header(scope, b"authorization"))
        except DomainError as exc:
            await _respond(send, status_for(exc, MCP_STATUS), exc.message)
            return
        # The body is bounded here, so that an oversized one gets the JSON error shape like any refusal.
        body = await _bounded_body(receive, MAX_BODY_BYTES)
        if body is None:
            await _respond(send, 413, "Invalid request: body is too large.")
            return
        manager = await self._manager()

        async def send_private(message: MutableMapping[str, Any]) -> None:
            # Answers carry account data: never cached, never sniffed (as Django's pages and API).
            if message["type"] == "http.response.start":
                names = {bytes(name).lower() for name, _ in message.get("headers", [])}
                extra = [(b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff")]
                message = {**message, "headers": [*message.get("headers", []), *(h for h in extra if h[0] not in names)]}
            await send(message)

        await manager.handle_request({**scope, SCOPE_KEY: key}, _replay(body, receive), send_private)


endpoint = McpEndpoint(server)


async def _measured(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The MCP endpoint, counted and timed like every Django route."""
    started = time.perf_counter()
    status = {"code": 500}

    async def send_status(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status["code"] = int(message["status"])
        await send(message)

    try:
        await endpoint(scope, receive, send_status)
    finally:
        method = str(scope.get("method", "OTHER"))
        HTTP_REQUESTS.labels(route=MCP_PATH, method=method, status=str(status["code"])).inc()
        HTTP_LATENCY.labels(route=MCP_PATH, method=method).observe(time.perf_counter() - started)


def with_mcp(app: Asgi) -> Asgi:
    """``app`` with the MCP endpoint mounted at ``/mcp``."""

    async def route(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/") == MCP_PATH:
            await _measured(scope, receive, send)
        else:
            await app(scope, receive, send)

    return route

