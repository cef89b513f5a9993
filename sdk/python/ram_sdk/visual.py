"""The ``jpeg-websocket-v1`` screen of a computer: observe it, and hand a person control.

``observe_computer`` creates a visual session over HTTP and opens its WebSocket
with the single-use ticket in the subprotocol (never in the URL). Each ``frame``
message is paired with the binary JPEG that follows it; a JPEG without
metadata, a JPEG over 2,000,000 bytes, a frame of another ``generation`` or an
``error`` message closes the stream. Nothing reconnects or resends by itself:
after a close, the application decides whether to observe again with a new
ticket.

``HumanControl`` is the adapter for a person's gestures on a ``control``
session: one input in flight at a time, each awaited until its ``ack`` within a
finite deadline the application chooses, and no replay after a timeout.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import re
from collections.abc import Awaitable, Callable
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException

from ram_sdk.errors import ControlError, VisualError
from ram_sdk.origins import checked_origin

MAX_JPEG_BYTES = 2_000_000
STREAM_PATH = "/api/visual/stream"
SUBPROTOCOL = "ram-jpeg-v1"
MAX_WAIT_MS = 2_147_483_647
MAX_SEQUENCE = 9_007_199_254_740_991

Credential = Callable[[], "str | Awaitable[str]"]
RenderJpeg = Callable[[bytes, dict[str, Any]], Any]
OnMessage = Callable[[dict[str, Any]], Any]

_TICKET = re.compile(r"^[A-Za-z0-9_-]{43}$")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _finite_seconds(value: float, name: str) -> float:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ValueError(f"Choose a finite, positive {name} in seconds.")
    return float(value)


async def _key(credential: Credential) -> str:
    key = credential()
    if inspect.isawaitable(key):
        key = await key
    if not isinstance(key, str) or not key:
        raise TypeError("credential() must return the API key as a non-empty string.")
    return key


async def create_visual_session(
    *, base_url: str, computer_id: str, credential: Credential, mode: Literal["observe", "control"], deadline: float
) -> dict[str, Any]:
    """``POST /api/visual/sessions``: the HTTP 201 session (it holds a ticket: keep it out of logs)."""
    if not computer_id:
        raise ValueError("Select a computer of your account.")
    if mode not in ("observe", "control"):
        raise ValueError("mode is observe or control.")
    origin = checked_origin(base_url)
    headers = {
        "Authorization": f"Bearer {await _key(credential)}",
        "Content-Type": "application/json",
        "X-RAM-Intent": "visual-session",
    }
    body = {"computer_id": computer_id, "mode": mode, "transport": "jpeg-websocket-v1"}
    async with httpx.AsyncClient(timeout=_finite_seconds(deadline, "deadline"), follow_redirects=False, trust_env=False) as http:
        try:
            response = await http.post(f"{origin}/api/visual/sessions", json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise VisualError(f"Could not create the session: {type(exc).__name__}.") from None
    if response.status_code != 201:
        try:
            message = response.json().get("error")
        except (ValueError, AttributeError):
            message = None
        raise VisualError(f"Could not create the session (HTTP {response.status_code}): {message or response.reason_phrase}")
    session = response.json()
    if (
        not isinstance(session, dict)
        or session.get("subprotocol") != SUBPROTOCOL
        or session.get("transport") != "jpeg-websocket-v1"
        or session.get("mode") != mode
        or not isinstance(session.get("ticket"), str)
        or not _TICKET.match(session["ticket"])
        or not isinstance(session.get("ticket_protocol_prefix"), str)
        or not isinstance(session.get("websocket_path"), str)
    ):
        raise VisualError("The session answer does not follow jpeg-websocket-v1.")
    return session


def stream_url(origin: str, websocket_path: str) -> str:
    """``websocket_path`` resolved on ``origin`` as ws(s)://, refused unless it is exactly the stream path."""
    if "?" in websocket_path or "#" in websocket_path:
        raise VisualError("Invalid endpoint.")
    if websocket_path.startswith("/") and not websocket_path.startswith("//"):
        url = origin + websocket_path
    else:
        url = websocket_path
    parts = urlsplit(url)
    if f"{parts.scheme}://{parts.netloc}" != origin or parts.path != STREAM_PATH:
        raise VisualError("Invalid endpoint.")
    return ("wss://" if parts.scheme == "https" else "ws://") + parts.netloc + parts.path


class VisualStream:
    """One open ``jpeg-websocket-v1`` socket: frame/JPEG pairing and the generation check.

    ``render_jpeg(jpeg, frame)`` gets each JPEG with the frame that announced it
    (replace the previous image; drop old ones if the UI falls behind).
    ``on_message(message)`` gets every JSON message after it was checked.
    ``on_disconnect()`` is called once, when the socket ends for any reason.
    """

    def __init__(
        self,
        socket: ClientConnection,
        session: dict[str, Any],
        *,
        render_jpeg: RenderJpeg,
        on_message: OnMessage | None,
        on_disconnect: Callable[[], Any] | None,
    ) -> None:
        self._socket = socket
        self.session_id: str | None = session.get("session_id")
        self.mode: str = session["mode"]
        self.generation: str | None = None
        self.first_frame = asyncio.Event()
        self.frames_rendered = 0
        self.closed = asyncio.Event()
        self.close_reason: str | None = None
        self._render_jpeg = render_jpeg
        self._listeners: list[OnMessage] = [on_message] if on_message else []
        self._on_disconnect = on_disconnect
        self._pending_frame: dict[str, Any] | None = None
        self._reader = asyncio.get_running_loop().create_task(self._read())

    def __repr__(self) -> str:
        return f"VisualStream(mode={self.mode!r}, closed={self.closed.is_set()})"

    def add_listener(self, listener: OnMessage) -> None:
        self._listeners.append(listener)

    async def send_json(self, message: dict[str, Any]) -> None:
        if self.closed.is_set():
            raise ControlError("Socket closed.")
        # UTF-8 JSON (a text frame), not ASCII escapes: 4,000 "é" are ~8 KB, within the 16,000-byte limit.
        await self._socket.send(json.dumps(message, separators=(",", ":"), ensure_ascii=False))

    async def close(self, reason: str = "closed by the client") -> None:
        """Close the socket (idempotent); ``on_disconnect`` runs once."""
        if self.close_reason is None:
            self.close_reason = reason
        await self._socket.close()
        if asyncio.current_task() is not self._reader:  # a listener may close from inside the reader
            await asyncio.shield(self._reader)

    async def wait_closed(self) -> None:
        await self.closed.wait()

    async def wait_first_frame(self, seconds: float) -> None:
        """Wait at most ``seconds`` for the first JPEG; on expiry or close, close and raise ``VisualError``."""
        try:
            await asyncio.wait_for(self.first_frame.wait(), _finite_seconds(seconds, "deadline"))
        except TimeoutError:
            await self.close("no frame within the deadline")
            raise VisualError("No frame arrived within the deadline.") from None
        if self.frames_rendered == 0:
            raise VisualError(f"The stream closed: {self.close_reason or 'by the server'}.")

    async def _read(self) -> None:
        try:
            async for data in self._socket:
                if isinstance(data, bytes):
                    self._on_jpeg(data)
                else:
                    await self._on_text(data)
                    if self.close_reason is not None:
                        break
        except WebSocketException:
            pass
        except Exception as exc:  # a broken message or a failing callback: stop, never guess
            if self.close_reason is None:
                self.close_reason = str(exc) or type(exc).__name__
        finally:
            try:
                await self._socket.close()
            finally:
                self.closed.set()
                self.first_frame.set()  # wake anyone waiting for a frame that will not come
                if self._on_disconnect is not None:
                    self._on_disconnect()

    def _on_jpeg(self, jpeg: bytes) -> None:
        if self._pending_frame is None:
            raise VisualError("JPEG without metadata.")
        if len(jpeg) > MAX_JPEG_BYTES:
            raise VisualError("Frame exceeds the limit.")
        frame, self._pending_frame = self._pending_frame, None
        self._render_jpeg(jpeg, frame)
        self.frames_rendered += 1
        self.first_frame.set()

    async def _on_text(self, data: str) -> None:
        event = check_server_message(json.loads(data))
        if event.get("type") == "frame":
            generation = event.get("generation")
            if (
                not isinstance(generation, str)
                or event.get("mime_type") != "image/jpeg"
                or (self.generation is not None and generation != self.generation)
            ):
                raise VisualError("Observe the current generation again.")
            self.generation = generation
            self._pending_frame = event
        for listener in list(self._listeners):
            result = listener(event)
            if inspect.isawaitable(result):
                await result
        if event.get("type") == "error":
            self.close_reason = str(event.get("message") or "error")


async def open_visual_stream(
    *,
    base_url: str,
    computer_id: str,
    credential: Credential,
    render_jpeg: RenderJpeg,
    mode: Literal["observe", "control"] = "observe",
    on_message: OnMessage | None = None,
    on_disconnect: Callable[[], Any] | None = None,
    deadline: float,
) -> VisualStream:
    """Create a session and open its socket; ``deadline`` (seconds) bounds the HTTP creation and the handshake each."""
    origin = checked_origin(base_url)
    seconds = _finite_seconds(deadline, "deadline")
    session = await create_visual_session(
        base_url=origin, computer_id=computer_id, credential=credential, mode=mode, deadline=seconds
    )
    url = stream_url(origin, session["websocket_path"])
    try:
        socket = await connect(
            url,
            subprotocols=[SUBPROTOCOL, session["ticket_protocol_prefix"] + session["ticket"]],  # type: ignore[list-item]
            open_timeout=seconds,
            max_size=MAX_JPEG_BYTES,
            ping_interval=None,  # the gateway pings; the library answers with Pong
            compression=None,
            proxy=None,
        )
    except (OSError, TimeoutError, WebSocketException) as exc:
        # The message of a refused handshake names no ticket; say only what failed.
        raise VisualError(f"Could not open the stream: {type(exc).__name__}.") from None
    if socket.subprotocol != SUBPROTOCOL:
        await socket.close()
        raise VisualError("The server did not select ram-jpeg-v1.")
    return VisualStream(socket, session, render_jpeg=render_jpeg, on_message=on_message, on_disconnect=on_disconnect)


async def observe_computer(
    *,
    base_url: str,
    computer_id: str,
    credential: Credential,
    render_jpeg: RenderJpeg,
    on_disconnect: Callable[[], Any] | None = None,
    deadline: float,
) -> VisualStream:
    """Observe ``computer_id``: no control, no input, no reconnection.

    ``deadline`` (seconds) bounds the HTTP creation and the handshake; wait for
    the first image with ``await stream.wait_first_frame(seconds)``.
    """
    return await open_visual_stream(
        base_url=base_url,
        computer_id=computer_id,
        credential=credential,
        render_jpeg=render_jpeg,
        mode="observe",
        on_disconnect=on_disconnect,
        deadline=deadline,
    )


# --- Human control ---------------------------------------------------------------

_NAMED_KEYS = {
    "Backspace", "Tab", "Enter", "Escape", "Delete", "Home", "End", "ArrowUp", "ArrowDown", "ArrowLeft",
    "ArrowRight", "PageUp", "PageDown", "Shift", "Control", "Alt", "Meta", *(f"F{n}" for n in range(1, 13)),
}  # fmt: skip


def _number(value: Any, low: float, high: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and low <= value <= high


def check_input(value: Any) -> dict[str, Any]:
    """Validate one ``input`` object of the input envelope (closed objects); raise ``ControlError``."""
    if not isinstance(value, dict):
        raise ControlError("An input is an object.")
    kind, keys = value.get("type"), set(value)
    ok = False
    if kind == "pointer":
        ok = (
            keys <= {"type", "phase", "x", "y", "button"}
            and value.get("phase") in ("move", "down", "up")
            and _number(value.get("x"), 0, 1279)
            and _number(value.get("y"), 0, 719)
            and value.get("button", "left") in ("left", "middle", "right")
        )
    elif kind == "text":
        text = value.get("text")
        ok = keys == {"type", "text"} and isinstance(text, str) and len(text.encode("utf-16-le", "surrogatepass")) // 2 <= 4000
    elif kind == "key":
        key = value.get("key")
        ok = (
            keys == {"type", "phase", "key"}
            and value.get("phase") in ("down", "up")
            and isinstance(key, str)
            and (len(key.encode("utf-16-le", "surrogatepass")) == 2 or key in _NAMED_KEYS)
        )
    elif kind == "wheel":
        ok = keys == {"type", "delta_x", "delta_y"} and all(
            _number(value.get(axis), -2000, 2000) for axis in ("delta_x", "delta_y")
        )
    elif kind == "navigate":
        ok = keys == {"type", "url"} and _http_url(value.get("url"))
    if not ok:
        raise ControlError("Invalid input: see the input envelope contract.")
    return value


def _http_url(url: Any) -> bool:
    """An absolute http(s) URL of at most 4096 characters, without credentials, spaces or control characters."""
    if not isinstance(url, str) or len(url) > 4096 or re.search(r"[\s\x00-\x1f]", url):
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and "@" not in parts.netloc


def _positive(value: Any) -> bool:
    return type(value) is int and 1 <= value <= MAX_SEQUENCE


def _counter(value: Any) -> bool:
    return type(value) is int and value >= 0


def check_client_message(message: Any) -> dict[str, Any]:
    """Validate a message a client sends (``takeover``, ``release``, ``input``); raise ``ControlError``."""
    ok = isinstance(message, dict) and (
        (message.get("type") in ("takeover", "release") and set(message) == {"type"})
        or (
            message.get("type") == "input"
            and set(message) == {"type", "sequence", "input"}
            and _positive(message["sequence"])
            and _valid_input(message["input"])
        )
    )
    if not ok:
        raise ControlError("Invalid message: see the jpeg-websocket-v1 contract.")
    return message  # type: ignore[no-any-return]


def _valid_input(value: Any) -> bool:
    try:
        check_input(value)
    except ControlError:
        return False
    return True


def _is_server_message(m: dict[str, Any]) -> bool:
    kind, keys = m.get("type"), set(m)
    if kind == "hello":
        viewport = m.get("viewport")
        return (
            keys == {"type", "version", "transport", "mode", "max_fps", "viewport"}
            and type(m["version"]) is int
            and m["version"] == 1
            and m["transport"] == "jpeg-websocket-v1"
            and m["mode"] in ("observe", "control")
            and type(m["max_fps"]) is int
            and 1 <= m["max_fps"] <= 10
            and isinstance(viewport, dict)
            and viewport == {"width": 1280, "height": 720}
            and all(type(v) is int for v in viewport.values())
        )
    if kind == "frame":
        return (
            keys == {"type", "sequence", "generation", "mime_type", "width", "height", "control", "controlling", "url"}
            and _positive(m["sequence"])
            and isinstance(m["generation"], str)
            and bool(_UUID.fullmatch(m["generation"]))
            and m["mime_type"] == "image/jpeg"
            and type(m["width"]) is int
            and m["width"] == 1280
            and type(m["height"]) is int
            and m["height"] == 720
            and m["control"] in ("available", "leased", "transition", "human")
            and isinstance(m["controlling"], bool)
            and isinstance(m["url"], str)
        )
    if kind == "state":
        control = m.get("control")
        if control == "transition":
            return keys == {"type", "control"}
        if control == "human":
            counters = ("stopped_processes", "cancelled_downloads", "aborted_exports")
            return (
                keys == {"type", "control", "controlling", *counters}
                and m["controlling"] is True
                and all(_counter(m[c]) for c in counters)
            )
        if control in ("released", "unavailable"):
            return keys == {"type", "control", "controlling"} and m["controlling"] is False
        return False
    if kind == "ack":
        return keys == {"type", "sequence"} and _positive(m["sequence"])
    if kind == "error":
        return keys == {"type", "message"} and isinstance(m["message"], str) and m["message"] != ""
    return False


def check_server_message(message: Any) -> dict[str, Any]:
    """Validate a message the gateway sent; raise ``VisualError`` (the stream then closes: nothing is guessed)."""
    if not isinstance(message, dict) or not _is_server_message(message):
        raise VisualError("The server sent a message outside the jpeg-websocket-v1 contract.")
    return message


class HumanControl:
    """A person's gestures on a ``control`` stream.

    ``takeover()``, ``input(value)`` and ``release()`` are called only from a
    person's explicit gestures. Each sends one message and waits, at most
    ``wait_ms`` milliseconds (chosen by the application, 1 to 2147483647), for
    its confirmation: ``state`` human with ``controlling`` true, the ``ack`` of
    that input's ``sequence``, or ``state`` released. One input is in flight at
    a time. When the deadline passes, an error arrives or the socket closes,
    control ends, the socket is closed and the result is reported as uncertain
    (``ControlError``): never resend it; reconnect with a new ticket and observe.
    ``on_state(state)`` gets ``{"controlling", "awaiting_ack"}`` after each
    message, or ``{"controlling": False, "uncertain": bool}`` when control ends.
    """

    def __init__(self, stream: VisualStream, *, wait_ms: int, on_state: Callable[[dict[str, Any]], Any] | None = None) -> None:
        if type(wait_ms) is not int or not 1 <= wait_ms <= MAX_WAIT_MS:
            raise ValueError("Choose wait_ms between 1 and 2147483647.")
        if stream.mode != "control":
            raise ControlError("Open the stream with mode control to offer control.")
        self._stream = stream
        self._wait = wait_ms / 1000
        self._on_state = on_state or (lambda state: None)
        self.controlling = False
        self._observed = stream.generation is not None  # frames seen before binding count
        self._sequence = 0
        self._pending: int | None = None
        self._transition: str | None = None
        self._outcome: asyncio.Future[None] | None = None
        self._stopped = False
        stream.add_listener(self._on_message)
        self._watcher = asyncio.get_running_loop().create_task(self._watch_close())

    @property
    def awaiting_ack(self) -> bool:
        return self._pending is not None

    async def _watch_close(self) -> None:
        await self._stream.wait_closed()
        self._stop()

    def _stop(self) -> None:
        uncertain = self._pending is not None or self._transition is not None
        self.controlling = False
        if self._outcome is not None and not self._outcome.done():
            self._outcome.set_exception(ControlError("Uncertain result; check the screen before anything else."))
        if not self._stopped:
            self._stopped = True
            self._on_state({"controlling": False, "uncertain": uncertain})

    def _settle(self) -> None:
        if self._outcome is not None and not self._outcome.done():
            self._outcome.set_result(None)

    def _on_message(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "frame":
            self._observed = True
            if event.get("controlling") is not True:
                self.controlling = False
        elif kind == "state":
            if event.get("controlling") is True and event.get("control") == "human":
                if self._transition == "takeover" and self._pending is None:
                    self._sequence, self.controlling, self._transition = 0, True, None
                    self._settle()
                elif not self.controlling:
                    raise ControlError("Unexpected grant.")
            else:
                self.controlling = False
                if event.get("control") == "released" and self._transition == "release":
                    self._transition = None
                    self._settle()
        elif kind == "ack" and self._pending is not None and event.get("sequence") == self._pending:
            self._pending = None
            self._settle()
        elif kind == "error":
            self._stop()
            return
        self._on_state({"controlling": self.controlling, "awaiting_ack": self._pending is not None})

    async def _send_and_wait(self, message: dict[str, Any]) -> None:
        self._outcome = asyncio.get_running_loop().create_future()
        try:
            await self._stream.send_json(message)
            await asyncio.wait_for(asyncio.shield(self._outcome), timeout=self._wait)
        except (TimeoutError, WebSocketException, ControlError) as exc:
            self._stop()
            await self._stream.close("no confirmation within the deadline")
            raise ControlError("Uncertain result; check the screen before anything else.") from exc
        finally:
            self._outcome = None

    async def takeover(self) -> None:
        """Ask for human control; returns once this socket holds it."""
        if not self._observed or self.controlling or self._transition or self._pending is not None or self._stopped:
            raise ControlError("Observe first.")
        self._transition = "takeover"
        await self._send_and_wait({"type": "takeover"})

    async def input(self, value: dict[str, Any]) -> None:
        """Send one input and wait for its ``ack`` (which proves the input ran, not a business effect)."""
        if not self.controlling or self._pending is not None or self._stopped:
            raise ControlError("Wait for control and ack.")
        check_input(value)
        self._sequence += 1
        self._pending = self._sequence
        await self._send_and_wait({"type": "input", "sequence": self._sequence, "input": value})

    async def release(self) -> None:
        """Hand control back; returns once the server confirmed ``released``. Continuing the run is separate."""
        if not self.controlling or self._pending is not None or self._stopped:
            raise ControlError("Wait for the ack.")
        self.controlling = False
        self._transition = "release"
        await self._send_and_wait({"type": "release"})
