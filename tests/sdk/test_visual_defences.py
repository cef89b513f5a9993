"""The SDK's stream defences against a misbehaving server.

A real uvicorn serves a deliberately broken peer of ``jpeg-websocket-v1`` (a
JPEG without metadata, an oversized JPEG, a generation change, a foreign
endpoint, an input never acknowledged...). The real gateway never sends these,
so only a hostile stand-in can show that the client refuses them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from ram_sdk import ControlError, HumanControl, VisualError, observe_computer, open_visual_stream

from tests.support.live import serve_asgi
from tests.support.tiers import live

GEN_A = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
GEN_B = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 100 + b"\xff\xd9"
DEADLINE = 20


def frame(generation: str = GEN_A, **changes: Any) -> str:
    return json.dumps(
        {
            "type": "frame",
            "sequence": 1,
            "generation": generation,
            "mime_type": "image/jpeg",
            "width": 1280,
            "height": 720,
            "control": "available",
            "controlling": False,
            "url": "about:blank",
            **changes,
        }
    )


class BrokenGateway:
    """Creates sessions, then plays ``script`` on the socket and records what the client sends."""

    def __init__(self) -> None:
        self.mode = "observe"
        self.websocket_path = "/api/visual/stream"
        self.subprotocol: str | None = "ram-jpeg-v1"
        self.script: list[str | bytes] = []
        self.grant_on_takeover = True
        self.received: list[dict[str, Any]] = []
        self.connections = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await receive()
            body = {
                "version": 1,
                "transport": "jpeg-websocket-v1",
                "session_id": "11111111-1111-4111-8111-111111111111",
                "ticket": "T" * 43,
                "websocket_path": self.websocket_path,
                "subprotocol": "ram-jpeg-v1",
                "ticket_protocol_prefix": "ram-ticket.",
                "connect_expires_in_seconds": 60,
                "session_max_seconds": 900,
                "max_fps": 4,
                "viewport": {"width": 1280, "height": 720},
                "mode": self.mode,
            }
            await send({"type": "http.response.start", "status": 201, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": json.dumps(body).encode()})
            return
        assert scope["type"] == "websocket"
        self.connections += 1
        await receive()  # websocket.connect
        accept: dict[str, Any] = {"type": "websocket.accept"}
        if self.subprotocol:
            accept["subprotocol"] = self.subprotocol
        await send(accept)
        for item in self.script:
            key = "bytes" if isinstance(item, bytes) else "text"
            await send({"type": "websocket.send", key: item})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            data = json.loads(message["text"])
            self.received.append(data)
            if data["type"] == "takeover" and self.grant_on_takeover:
                await send({"type": "websocket.send", "text": json.dumps({"type": "state", "control": "transition"})})
                human = {"type": "state", "control": "human", "controlling": True, "stopped_processes": 0, "cancelled_downloads": 0, "aborted_exports": 0}
                await send({"type": "websocket.send", "text": json.dumps(human)})

@pytest.fixture
@live
def gateway() -> Iterator[tuple[BrokenGateway, str]]:
    server = BrokenGateway()
    with serve_asgi(app=server) as origin:
        yield server, origin


async def observe(origin: str, images: list[Any]) -> Any:
    stream = await observe_computer(
        base_url=origin,
        computer_id="pc-1",
        credential=lambda: "ram_rk_0_unused",
        render_jpeg=lambda jpeg, meta: images.append((jpeg, meta)),
        deadline=DEADLINE,
    )
    await stream.wait_closed()
    return stream


@pytest.mark.parametrize(
    ("script", "rendered", "reason"),
    [
        ([frame(), JPEG, JPEG], 1, "JPEG without metadata."),
        ([JPEG], 0, "JPEG without metadata."),
        ([frame(GEN_A), JPEG, frame(GEN_B), JPEG], 1, "Observe the current generation again."),
        ([frame(mime_type="image/png"), JPEG], 0, "The server sent a message outside the jpeg-websocket-v1 contract."),
        ([frame(generation=None), JPEG], 0, "The server sent a message outside the jpeg-websocket-v1 contract."),  # type: ignore[arg-type]
        ([frame(jpeg="base64"), JPEG], 0, "The server sent a message outside the jpeg-websocket-v1 contract."),
        ([frame(), JPEG, json.dumps({"type": "error", "message": "Computer restarted; reconnect."})], 1, "Computer restarted; reconnect."),
        (["not json"], 0, None),
    ],
    ids=["jpeg-twice", "jpeg-first", "generation-change", "not-jpeg", "no-generation", "extra-field", "error-message", "not-json"],
)
async def test_stream_closes_on_a_protocol_breach(
    gateway: tuple[BrokenGateway, str], script: list[str | bytes], rendered: int, reason: str | None
) -> None:
    server, origin = gateway
    server.script = script
    images: list[Any] = []
    stream = await observe(origin, images)
    assert len(images) == rendered
    if reason is not None:
        assert stream.close_reason == reason
    assert stream.closed.is_set() and server.connections == 1


async def test_a_jpeg_over_two_million_bytes_is_never_rendered(gateway: tuple[BrokenGateway, str]) -> None:
    server, origin = gateway
    server.script = [frame(), JPEG, frame(), b"\xff\xd8" + b"\x00" * 2_000_000]
    images: list[Any] = []
    await observe(origin, images)
    assert len(images) == 1


@pytest.mark.parametrize(
    "path",
    [
        "/api/visual/stream?ticket=x",
        "/api/visual/stream#x",
        "/api/visual/other",
        "//evil.example/api/visual/stream",
        "http://127.0.0.2:9/api/visual/stream",
        "ws://evil.example/api/visual/stream",
    ],
)
async def test_a_foreign_websocket_endpoint_is_refused_before_connecting(
    gateway: tuple[BrokenGateway, str], path: str
) -> None:
    server, origin = gateway
    server.websocket_path = path
    with pytest.raises(VisualError, match="Invalid endpoint"):
        await observe(origin, [])
    assert server.connections == 0


async def test_a_server_that_selects_no_subprotocol_is_refused(gateway: tuple[BrokenGateway, str]) -> None:
    server, origin = gateway
    server.subprotocol = None
    with pytest.raises(VisualError):
        await observe(origin, [])


async def test_an_input_without_ack_ends_control_as_uncertain_and_is_never_resent(
    gateway: tuple[BrokenGateway, str],
) -> None:
    server, origin = gateway
    server.mode = "control"
    server.script = [frame(), JPEG]
    states: list[dict[str, Any]] = []
    stream = await open_visual_stream(
        base_url=origin,
        computer_id="pc-1",
        credential=lambda: "ram_rk_0_unused",
        render_jpeg=lambda jpeg, meta: None,
        mode="control",
        deadline=DEADLINE,
    )
    control = HumanControl(stream, wait_ms=300, on_state=states.append)
    await stream.wait_first_frame(DEADLINE)
    await control.takeover()
    with pytest.raises(ControlError, match="Uncertain"):
        await control.input({"type": "text", "text": "hello"})
    await stream.wait_closed()
    assert states[-1] == {"controlling": False, "uncertain": True}
    assert [m["type"] for m in server.received] == ["takeover", "input"]
    with pytest.raises(ControlError):
        await control.input({"type": "text", "text": "hello"})


async def test_a_grant_nobody_asked_for_closes_the_stream(gateway: tuple[BrokenGateway, str]) -> None:
    server, origin = gateway
    server.mode = "control"
    human = {"type": "state", "control": "human", "controlling": True, "stopped_processes": 0, "cancelled_downloads": 0, "aborted_exports": 0}
    server.script = [frame(), JPEG, json.dumps(human)]
    stream = await open_visual_stream(
        base_url=origin,
        computer_id="pc-1",
        credential=lambda: "ram_rk_0_unused",
        render_jpeg=lambda jpeg, meta: None,
        mode="control",
        deadline=DEADLINE,
    )
    control = HumanControl(stream, wait_ms=DEADLINE * 1000)
    await stream.wait_closed()
    assert stream.close_reason == "Unexpected grant." and not control.controlling


@pytest.mark.parametrize("wait_ms", [0, -1, 2_147_483_648, 1.5, True])
async def test_control_deadline_must_be_a_finite_positive_integer(gateway: tuple[BrokenGateway, str], wait_ms: Any) -> None:
    server, origin = gateway
    server.mode = "control"
    stream = await open_visual_stream(
        base_url=origin,
        computer_id="pc-1",
        credential=lambda: "ram_rk_0_unused",
        render_jpeg=lambda jpeg, meta: None,
        mode="control",
        deadline=DEADLINE,
    )
    with pytest.raises(ValueError, match="wait_ms"):
        HumanControl(stream, wait_ms=wait_ms)
    await stream.close()
