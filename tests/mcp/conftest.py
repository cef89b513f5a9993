"""The official MCP client (streamable HTTP) against the live server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from tests.support.tiers import live

Body = Callable[[ClientSession], Awaitable[Any]]


def with_session(origin: str, key: str, body: Body) -> Any:
    """Open an MCP session at ``origin``/mcp with ``key`` as Bearer, run ``body``, close."""

    async def main() -> Any:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
            async with streamable_http_client(f"{origin}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await body(session)

    return anyio.run(main)


@pytest.fixture
@live
def mcp_call(live_origin: str) -> Callable[..., CallToolResult]:
    """``mcp_call(key, tool, **arguments)``: one tool call in its own session."""

    def call(key: str, tool: str, **arguments: Any) -> CallToolResult:
        async def body(session: ClientSession) -> CallToolResult:
            return await session.call_tool(tool, arguments)

        return with_session(live_origin, key, body)  # type: ignore[no-any-return]

    return call
