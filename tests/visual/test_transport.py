"""The gateway's WebSocket transport as uvicorn serves it: no permessage-deflate
(frames are JPEG already), and an unknown WebSocket path is a quiet HTTP 404."""

from __future__ import annotations

import logging
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory

from ramsite.management.commands.run_embedded import uvicorn_options
from tests.support.screen import create_session, recv_type, ws_url

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", ["/api/visual/streamx", "/api/visual/stream/", "/ws", "/"])
async def test_a_websocket_to_an_unknown_path_gets_404_and_logs_nothing(
    live_origin: str, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.clear()
    url = live_origin.replace("http://", "ws://") + path
    with pytest.raises(InvalidStatus) as refused:
        await connect(url, subprotocols=["ram-jpeg-v1"], open_timeout=10)  # type: ignore[list-item]
    assert refused.value.response.status_code == 404
    ours = [r for r in caplog.records if not r.name.startswith(("websockets.client", "asyncio"))]
    assert ours == [], [f"{r.name}: {r.getMessage()}" for r in ours]


async def test_the_server_never_negotiates_permessage_deflate(screen: Any, live_origin: str, runner_key: str) -> None:
    session = (await create_session(live_origin, runner_key, "pc-1")).json()
    # The client offers deflate, as every browser does.
    ws = await connect(
        ws_url(live_origin),
        subprotocols=[session["subprotocol"], session["ticket_protocol_prefix"] + session["ticket"]],
        extensions=[ClientPerMessageDeflateFactory()],
        compression=None,
    )
    try:
        assert ws.response is not None
        assert "Sec-WebSocket-Extensions" not in ws.response.headers
        assert ws.protocol.extensions == []
        await recv_type(ws, "frame")
    finally:
        await ws.close()


def test_every_documented_uvicorn_start_turns_deflate_off() -> None:
    assert uvicorn_options()["ws_per_message_deflate"] is False
    text = (ROOT / "docs" / "deployment.md").read_text()
    commands = re.findall(r"^uvicorn ramsite\.asgi:application(?:.*\\\n)*.*$", text, flags=re.MULTILINE)
    assert commands
    for command in commands:
        argv = shlex.split(command.replace("\\\n", " "))
        assert argv[argv.index("--ws-per-message-deflate") + 1] == "false"
