"""The executor's private interface: a token-protected WebSocket server for the gateway (frames,
takeover, inputs) and the workers (agent lease and actions).

Each text message is one request ``{"id", "op", "args"}`` dispatched through the op registry
(``executor/ops.py``): its arguments validated before the handler runs (``executor/handlers.py``),
its reply validated before it is sent, every failure answered with a closed reason. Pushed
notices (tabs, dialogs, control) go to connected peers. The wire format is in ``executor/wire.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import re
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import pydantic
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from executor import actions, ops, taint
from executor.control import ControlError
from executor.wire import CALL_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from executor.feed import Subscriber

logger = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 1 << 20
BROWSER_LOST = (
    "The computer's browser was lost (its remote session ended or its connection closed); "
    "the computer is unavailable until its executor starts again."
)

# How the server dispatches one validated request: the operation's name, the peer, its arguments.
type Dispatch = Callable[[str, Peer, Any], Awaitable[dict[str, Any]]]


class Peer:
    """One client connection (a gateway socket or a worker call)."""

    def __init__(self, ws: ServerConnection) -> None:
        self.ws = ws
        self.lock = asyncio.Lock()
        self.subscriber: Subscriber | None = None

    async def send(self, message: str | bytes) -> None:
        async with self.lock:
            await self.ws.send(message)


class RpcServer:
    """``dispatch`` runs an operation; ``lost`` tells whether the browser itself is gone (a failed
    operation is then answered ``unavailable``); ``closed`` runs when a peer's connection ends."""

    def __init__(
        self, *, dispatch: Dispatch, lost: Callable[[], Awaitable[bool]], closed: Callable[[Peer], Awaitable[None]]
    ) -> None:
        self._dispatch = dispatch
        self._lost = lost
        self._closed = closed
        self.peers: set[Peer] = set()
        # The interface's token, asked of the server at start (until then, one nobody knows).
        self.token = secrets.token_urlsafe(32)

    def serve(self, host: str, port: int) -> Any:
        """The listening server (an async context manager)."""
        return serve(
            self._handle,
            host,
            port,
            process_request=self._authorise,
            max_size=MAX_REQUEST_BYTES,
            ping_interval=10,
            ping_timeout=20,
            compression=None,
        )

    @staticmethod
    def address_of(server: Server) -> str:
        host, port = server.sockets[0].getsockname()[:2]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    async def close_all(self, *, quietly: bool = False) -> None:
        for peer in list(self.peers):
            if quietly:
                with contextlib.suppress(Exception):
                    await peer.ws.close()
            else:
                await peer.ws.close()

    async def push(self, peer: Peer, message: str) -> None:
        with contextlib.suppress(ConnectionClosed):
            await peer.send(message)

    def push_all(self, message: str, *, screens_only: bool = False) -> None:
        """Push a notice to every peer (``screens_only``: to the gateway's screen links)."""
        for peer in list(self.peers):
            if not screens_only or peer.subscriber is not None:
                asyncio.get_running_loop().create_task(self.push(peer, message))

    def _authorise(self, connection: ServerConnection, request: Request) -> Response | None:
        supplied = request.headers.get("Authorization", "")
        expected = f"Bearer {self.token}"
        if not hmac.compare_digest(supplied.encode(), expected.encode()):
            return connection.respond(401, "Executor token required.\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        peer = Peer(ws)
        self.peers.add(peer)
        tasks: set[asyncio.Task[None]] = set()
        try:
            async for message in ws:
                if not isinstance(message, str):
                    break
                task = asyncio.create_task(self.serve_request(peer, message))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except ConnectionClosed:
            pass
        finally:
            self.peers.discard(peer)
            for task in tasks:
                task.cancel()
            await self._closed(peer)

    async def serve_request(self, peer: Peer, message: str) -> None:
        """One request of the private interface, dispatched through the op registry (executor/ops.py):
        its arguments validated before the handler runs, its reply validated before it is sent."""
        request_id: Any = None
        try:
            request = json.loads(message)
            if not isinstance(request, dict):
                raise ops.OpRefused("A request is a JSON object.")
            request_id = request.get("id")
            op, args = ops.op_args(request.get("op"), request.get("args"))
            limit = CALL_TIMEOUT_SECONDS
            if isinstance(args, ops.AgentArgs) and args.action in actions.AGENT_ACTIONS:
                limit = actions.AGENT_ACTIONS[args.action].timeout_seconds()
            async with asyncio.timeout(limit):
                result = await self._dispatch(op.name, peer, args)
            reply: dict[str, Any] = {"id": request_id, "ok": True, "result": checked_reply(op, args, result)}
        except (ControlError, ops.OpRefused) as exc:
            reply = {"id": request_id, "ok": False, "error": exc.message, "reason": exc.reason}
        except pydantic.ValidationError as exc:
            reply = {
                "id": request_id,
                "ok": False,
                "error": f"Invalid arguments: {ops.where(exc)}.",
                "reason": "bad_request",
            }
        except TimeoutError:
            reply = {"id": request_id, "ok": False, "error": "The browser did not finish in time.", "reason": "timeout"}
        except (ValueError, KeyError, TypeError) as exc:
            logger.debug("bad request", exc_info=True)
            reply = {
                "id": request_id,
                "ok": False,
                "error": f"Invalid request: {type(exc).__name__}.",
                "reason": "bad_request",
            }
        except Exception as exc:  # a browser error: report it plainly, never its page content
            logger.warning("operation failed: %s", type(exc).__name__)
            if await self._lost():
                # A remote session the vendor ended, a browser that crashed: not the page's doing.
                reply = {"id": request_id, "ok": False, "error": BROWSER_LOST, "reason": "unavailable"}
            else:
                reply = {"id": request_id, "ok": False, "error": browser_error(exc), "reason": "browser_error"}
        # The backstop: no string the executor answers carries a secret it typed (executor/taint.py).
        reply = taint.redact(reply)
        with contextlib.suppress(ConnectionClosed):
            await peer.send(json.dumps(reply, separators=(",", ":")))


def checked_reply(op: ops.Op, args: Any, result: dict[str, Any]) -> dict[str, Any]:
    """The handler's result validated into the operation's reply model, as it goes on the wire; a
    result that does not match is a defect, logged and answered ``bad_reply`` (never sent)."""
    try:
        return op.reply_for(args, result).model_dump(mode="json", exclude_unset=True)
    except (pydantic.ValidationError, KeyError) as exc:
        where = ops.where(exc) if isinstance(exc, pydantic.ValidationError) else "no reply model"
        logger.error("the executor's reply to %s does not match its model (%s)", op.name, where)
        raise ControlError(f"The executor's reply to {op.name} did not match its contract.", "bad_reply") from None


def browser_error(exc: Exception) -> str:
    """A plain reason without page content or URLs (which may carry private values)."""
    if type(exc).__name__ == "TimeoutError":
        return "The browser did not finish in time."
    code = re.search(r"net::ERR_[A-Z_]+", str(exc))
    if code:
        return f"The page could not be loaded ({code.group(0)})."
    return "The browser reported an error."
