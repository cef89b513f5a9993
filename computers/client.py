"""Clients of the executor's private interface (the gateway→executor and worker→executor link).

Every operation is declared once in ``executor/ops.py``: a call's arguments are validated into the
operation's model before anything is sent, and its reply into the reply model when it arrives (a
reply that does not match is an ``ExecutorError`` with reason ``bad_reply``, and logged). The
``op_*`` methods return those models; ``call`` and the older helpers return them as dicts.

``ExecutorClient`` is the synchronous, typed client for workers (the run loop
and ``browser_login``): one call per method, 25 s per call, each on a WebSocket of
its own — or, inside ``executor_connections_kept()`` (a run's time slice), on one
WebSocket per executor generation that the block's calls share. ``GatewayToExecutorLink``
is the asynchronous connection the gateway keeps open for a visual session:
frames and control events arrive through callbacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import pydantic
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as async_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.protocol import State
from websockets.sync.client import ClientConnection as SyncConnection
from websockets.sync.client import connect as sync_connect

from computers.models import Computer
from computers.tokens import private_interface_token
from core.contracts import Closed
from executor import ops
from executor.control import HUMAN_HAS_CONTROL
from executor.wire import CALL_TIMEOUT_SECONDS, MAX_FRAME_BYTES, unpack_frame

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = MAX_FRAME_BYTES + 64 * 1024


class ExecutorError(Exception):
    """The executor refused or failed an operation, or could not be reached."""

    def __init__(self, message: str, reason: ops.FailureReason = "unavailable", *, answer_lost: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        # The operation was sent and its answer never came (connection lost, no answer in time):
        # whether it happened is unknown, and nothing may repeat it on its own.
        self.answer_lost = answer_lost


class HumanHasControl(ExecutorError):
    """A person took control: the agent's lease is gone and its action was stopped."""


def _raise_for(reply: dict[str, Any]) -> Any:
    """The result of a reply, or its refusal raised (its reason one of ``ops.FailureReason``)."""
    if reply.get("ok") is True:
        return reply.get("result")
    reason = ops.failure_reason(reply.get("reason"))
    message = str(reply.get("error") or "The executor refused the operation.")
    if reason == HUMAN_HAS_CONTROL:
        raise HumanHasControl(message, reason)
    raise ExecutorError(message, reason)


def _request(op: str, args: dict[str, Any]) -> tuple[ops.Op, Closed]:
    """The operation and its arguments checked against the registry before anything is sent."""
    try:
        return ops.op_args(op, args)
    except ops.OpRefused as exc:
        logger.error("a call of the executor's %s does not match its model: %s", op, exc.message)
        raise ExecutorError(exc.message, exc.reason) from None


def _reply(op: ops.Op, args: Closed, result: Any) -> Closed:
    """The executor's result validated into the operation's reply model."""
    try:
        return op.reply_for(args, result)
    except (pydantic.ValidationError, KeyError) as exc:
        where = ops.where(exc) if isinstance(exc, pydantic.ValidationError) else "no reply model"
        logger.error("the executor's reply to %s does not match its model (%s)", op.name, where)
        raise ExecutorError(f"The executor's reply to {op.name} did not match its contract.", "bad_reply") from None


def _as_dict(reply: Closed) -> dict[str, Any]:
    """A validated reply as the executor sent it."""
    return reply.model_dump(mode="json", exclude_unset=True)


def _typed[R: Closed](reply: Closed, model: type[R]) -> R:
    """The reply as the model its operation declares (any other is a defect of this module)."""
    if not isinstance(reply, model):
        raise TypeError(f"{type(reply).__name__} is no {model.__name__}")
    return reply


def _uri(address: str) -> str:
    return f"ws://{address}/"


@dataclass
class _Kept:
    """An open connection to one executor generation, greeted (its generation checked)."""

    ws: SyncConnection
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))


@dataclass
class _KeptConnections:
    """The connections of one ``executor_connections_kept()`` block, by (address, generation)."""

    stack: contextlib.ExitStack
    open: dict[tuple[str, str], _Kept] = field(default_factory=dict)


# The current ``executor_connections_kept()`` block's connections; None outside such a block. A
# context variable: a thread of its own (the lease renewer) starts outside the block and opens its
# own connections.
_KEPT: ContextVar[_KeptConnections | None] = ContextVar("ram_executor_kept", default=None)


@contextlib.contextmanager
def executor_connections_kept() -> Iterator[None]:
    """Within the block, this thread's calls to one executor generation share one WebSocket,
    opened (and greeted) at the first call and closed when the block ends, instead of a
    connection and a greeting per call. A connection that failed during a call is dropped, never
    reused: the next call opens a new one (and meets a new generation's refusal as usual)."""
    if _KEPT.get() is not None:
        yield  # an enclosing block keeps them already
        return
    with contextlib.ExitStack() as stack:
        token = _KEPT.set(_KeptConnections(stack))
        try:
            yield
        finally:
            _KEPT.reset(token)


class ExecutorClient:
    """Synchronous client for workers: ``ExecutorClient(computer).navigate(lease_id, url)``."""

    def __init__(
        self, computer: Computer, timeout: float = CALL_TIMEOUT_SECONDS, *, deadline: float | None = None
    ) -> None:
        """``timeout`` bounds each wait of a call; ``deadline`` (``time.monotonic()``), when given,
        bounds every call of this client as a whole, connection included."""
        if not computer.executor_address or computer.generation is None:
            raise ExecutorError("The computer has no running executor.")
        self.address = computer.executor_address
        self.generation = str(computer.generation)
        # This generation's own private-interface token (computers/tokens.py).
        self.token = private_interface_token(computer_id=computer.pk, generation=computer.generation)
        self.timeout = timeout
        self.deadline = deadline

    def _wait(self) -> float:
        """How long the next wait may last: the per-call timeout, within the client's deadline."""
        if self.deadline is None:
            return self.timeout
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return min(self.timeout, left)

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        """Operation ``op`` of ``executor/ops.py``; its validated reply as a dict."""
        return _as_dict(self.request(op, **args))

    def request(self, op: str, **args: Any) -> Closed:
        """Operation ``op`` of ``executor/ops.py``: arguments validated before sending, the reply into its model."""
        declared, parsed = _request(op, args)
        return _reply(declared, parsed, self._send(op, parsed.model_dump(mode="json", exclude_unset=True)))

    def _send(self, op: str, args: dict[str, Any]) -> Any:
        sent = False
        kept = _KEPT.get()
        try:
            if kept is not None:
                return self._call_kept(kept, op, args)
            with self._connect() as ws:
                self._greet(ws)
                ws.send(json.dumps({"id": 1, "op": op, "args": args}))
                sent = True
                return _raise_for(self._reply(ws, 1))
        except TimeoutError:
            if self.deadline is not None:
                raise ExecutorError("The executor did not answer in time.", "timeout", answer_lost=sent) from None
            raise ExecutorError("The executor did not answer within 25 s.", "timeout", answer_lost=sent) from None
        except InvalidStatus as exc:
            if exc.response.status_code == 401:
                # The token is this generation's own: another generation now listens at the address.
                raise ExecutorError("The computer restarted (new generation).", "generation_changed") from None
            raise ExecutorError("The executor could not be reached (InvalidStatus).") from None
        except (OSError, WebSocketException) as exc:
            if sent:
                raise ExecutorError(
                    f"The connection to the computer ended before it answered ({type(exc).__name__}).", answer_lost=True
                ) from None
            raise ExecutorError(f"The executor could not be reached ({type(exc).__name__}).") from None

    def _connect(self) -> SyncConnection:
        return sync_connect(
            _uri(self.address),
            additional_headers={"Authorization": f"Bearer {self.token}"},
            open_timeout=self._wait(),
            close_timeout=2,
            max_size=MAX_MESSAGE_BYTES,
            compression=None,
            proxy=None,
        )

    def _greet(self, ws: SyncConnection) -> None:
        """The greeting of a new connection: the generation listening must be this client's."""
        ws.send(json.dumps({"id": 0, "op": "hello", "args": {}}))
        hello = _typed(_reply(ops.OPS["hello"], ops.NoArgs(), _raise_for(self._reply(ws, 0))), ops.HelloReply)
        if hello.generation != self.generation:
            raise ExecutorError("The computer restarted (new generation).", "generation_changed")

    def _call_kept(self, kept: _KeptConnections, op: str, args: dict[str, Any]) -> Any:
        """One call on the block's connection to this generation (opened now if there is none)."""
        key = (self.address, self.generation)
        connection = kept.open.get(key)
        if connection is not None and connection.ws.state is not State.OPEN:
            # Closed while idle (nothing was sent on it since): a new one is opened before sending.
            del kept.open[key]
            connection = None
        if connection is None:
            ws = kept.stack.enter_context(self._connect())
            try:
                self._greet(ws)
            except BaseException:
                ws.close()
                raise
            connection = kept.open[key] = _Kept(ws)
        request_id = next(connection.ids)
        sent = False
        try:
            connection.ws.send(json.dumps({"id": request_id, "op": op, "args": args}))
            sent = True
            reply = self._reply(connection.ws, request_id)
        except BaseException as exc:
            # Its state is unknown (a reply may still come): never used again.
            del kept.open[key]
            with contextlib.suppress(Exception):
                connection.ws.close()
            if sent and isinstance(exc, (OSError, WebSocketException)):
                raise ExecutorError(
                    f"The connection to the computer ended before it answered ({type(exc).__name__}).", answer_lost=True
                ) from None
            raise
        return _raise_for(reply)

    def _reply(self, ws: Any, request_id: int) -> dict[str, Any]:
        """The reply to ``request_id``, skipping the executor's events (control, tabs) and frames."""
        while True:
            message = ws.recv(timeout=self._wait())
            if isinstance(message, str):
                reply = json.loads(message)
                if isinstance(reply, dict) and reply.get("id") == request_id:
                    return reply

    # --- typed operations (the models of executor/ops.py) ---
    def op_status(self) -> ops.StatusReply:
        return _typed(self.request("status"), ops.StatusReply)

    def op_observe(self, max_chars: int) -> ops.ObserveReply:
        """The page's address, title and bounded visible text, read without a lease."""
        return _typed(self.request("observe", max_chars=max_chars), ops.ObserveReply)

    def op_agent(
        self, lease_id: str, action: str, context: dict[str, Any] | None = None, **args: Any
    ) -> ops.ActionReply:
        """Run an agent action; ``context`` carries the run's settings an action declares (never the model's).
        The reply is the action's model of ``ops.ACTION_REPLIES`` (``ops.DialogOpenedReply`` when the
        page opened a dialog instead)."""
        return _typed(self.request("agent", lease_id=lease_id, action=action, args=args, context=context), ops.ActionReply)

    # --- the agent's lease ---
    def lease_acquire(self) -> str:
        return _typed(self.request("lease_acquire"), ops.LeaseAcquireReply).lease_id

    def lease_renew(self, lease_id: str) -> None:
        self.call("lease_renew", lease_id=lease_id)

    def lease_release(self, lease_id: str) -> None:
        self.call("lease_release", lease_id=lease_id)

    def status(self) -> dict[str, Any]:
        return self.call("status")

    # --- the run's recording (executor/recording.py) ---
    def recording_start(self, plan: dict[str, Any]) -> bool:
        return _typed(self.request("recording_start", **plan), ops.RecordingReply).changed

    def recording_stop(self, recording_id: str) -> bool:
        return _typed(self.request("recording_stop", recording_id=recording_id), ops.RecordingReply).changed

    def observe(self, max_chars: int) -> dict[str, Any]:
        """The page's address, title and bounded visible text, read without a lease."""
        return self.call("observe", max_chars=max_chars)

    def arguments_check(self, values: dict[str, Any]) -> bool:
        """Whether ``values`` carries a secret the computer's browser holds (no lease)."""
        return _typed(self.request("arguments_check", values=values), ops.ArgumentsCheckReply).carries_secret

    # --- the agent's actions (each checked against the lease) ---
    def action(self, lease_id: str, action: str, context: dict[str, Any] | None = None, **args: Any) -> dict[str, Any]:
        """``op_agent``'s reply as a dict."""
        return _as_dict(self.op_agent(lease_id, action, context, **args))

    def scroll(self, lease_id: str, delta_x: float = 0, delta_y: float = 0) -> dict[str, Any]:
        return self.action(lease_id, "scroll", delta_x=delta_x, delta_y=delta_y)

    def navigate(self, lease_id: str, url: str) -> dict[str, Any]:
        return self.action(lease_id, "navigate", url=url)

    def click(
        self, lease_id: str, selector: str | None = None, *, x: float | None = None, y: float | None = None
    ) -> dict[str, Any]:
        args: dict[str, Any] = {"selector": selector} if selector is not None else {"x": x, "y": y}
        return self.action(lease_id, "click", **args)

    def type(self, lease_id: str, selector: str, text: str) -> dict[str, Any]:
        return self.action(lease_id, "type", selector=selector, text=text)

    def press(self, lease_id: str, key: str) -> dict[str, Any]:
        return self.action(lease_id, "press", key=key)

    def wait_for(self, lease_id: str, selector: str, timeout_ms: int = 10_000) -> dict[str, Any]:
        return self.action(lease_id, "wait_for", selector=selector, timeout_ms=timeout_ms)

    def extract_text(self, lease_id: str, selector: str | None = None) -> str:
        if selector is None:
            return str(self.action(lease_id, "extract_text")["text"])
        return str(self.action(lease_id, "extract_text", selector=selector)["text"])

    def screenshot(self, lease_id: str, mask_selectors: list[str] | None = None) -> dict[str, Any]:
        """A masked PNG stored as an artifact: ``{"artifact_id", "url"}``."""
        return self.action(lease_id, "screenshot", context={"mask_selectors": mask_selectors or []})


FrameHandler = Callable[[ops.FrameMeta, bytes], None]
ControlHandler = Callable[[str, int], None]
TabsHandler = Callable[[list[ops.TabInfo]], None]
DialogsHandler = Callable[[list[ops.DialogInfo]], None]


class GatewayToExecutorLink:
    """The gateway's asynchronous connection to one executor generation."""

    def __init__(
        self,
        address: str,
        *,
        token: str,
        on_frame: FrameHandler,
        on_control: ControlHandler,
        on_tabs: TabsHandler | None = None,
        on_dialogs: DialogsHandler | None = None,
    ) -> None:
        """``token``: the generation's private-interface token (``computers.tokens.private_interface_token``)."""
        self.address = address
        self.token = token
        self.on_frame = on_frame
        self.on_control = on_control
        self.on_tabs = on_tabs
        self.on_dialogs = on_dialogs
        self.ws: ClientConnection | None = None
        self.generation = ""
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()

    async def open(self, wait_seconds: float = CALL_TIMEOUT_SECONDS) -> ops.HelloReply:
        try:
            self.ws = await async_connect(
                _uri(self.address),
                additional_headers={"Authorization": f"Bearer {self.token}"},
                open_timeout=wait_seconds,
                close_timeout=2,
                max_size=MAX_MESSAGE_BYTES,
                max_queue=4,
                compression=None,
                proxy=None,
            )
        except (OSError, TimeoutError, InvalidStatus, WebSocketException) as exc:
            raise ExecutorError(f"The executor could not be reached ({type(exc).__name__}).") from None
        self._reader = asyncio.create_task(self._read())
        hello = _typed(await self.request("hello"), ops.HelloReply)
        self.generation = hello.generation
        return hello

    async def request(self, op: str, wait_seconds: float = CALL_TIMEOUT_SECONDS, **args: Any) -> Closed:
        """Operation ``op`` of ``executor/ops.py``: arguments validated before sending, the reply into its model."""
        declared, parsed = _request(op, args)
        result = await self._send(op, wait_seconds, parsed.model_dump(mode="json", exclude_unset=True))
        return _reply(declared, parsed, result)

    async def op_takeover(self) -> ops.TakeoverReply:
        return _typed(await self.request("takeover"), ops.TakeoverReply)

    async def op_tabs(self) -> ops.TabsReply:
        return _typed(await self.request("tabs"), ops.TabsReply)

    async def op_dialogs(self) -> ops.DialogsReply:
        return _typed(await self.request("dialogs"), ops.DialogsReply)

    async def _read(self) -> None:
        if self.ws is None:
            return
        try:
            async for message in self.ws:
                if isinstance(message, bytes):
                    meta, jpeg = unpack_frame(message)
                    try:
                        frame = ops.FrameMeta.model_validate(meta)
                    except pydantic.ValidationError as exc:
                        logger.warning("the executor sent an invalid frame (%s); not forwarded", ops.where(exc))
                        continue
                    self.on_frame(frame, jpeg)
                    continue
                data = json.loads(message)
                if "event" in data:
                    try:
                        event = ops.PUSHED_EVENT.validate_python(data)
                    except pydantic.ValidationError as exc:
                        logger.warning("the executor pushed an invalid event (%s); not forwarded", ops.where(exc))
                        continue
                    if isinstance(event, ops.ControlEvent):
                        self.on_control(event.control, event.version)
                    elif isinstance(event, ops.TabsEvent) and self.on_tabs is not None:
                        self.on_tabs(event.tabs)
                    elif isinstance(event, ops.DialogsEvent) and self.on_dialogs is not None:
                        self.on_dialogs(event.dialogs)
                    continue
                future = self._waiting.pop(data.get("id"), None)
                if future is not None and not future.done():
                    future.set_result(data)
        except ConnectionClosed:
            pass
        finally:
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(ExecutorError("The executor connection was lost."))
            self._waiting.clear()
            self.closed.set()

    async def call(self, op: str, wait_seconds: float = CALL_TIMEOUT_SECONDS, **args: Any) -> dict[str, Any]:
        """Operation ``op`` of ``executor/ops.py``; its validated reply as a dict."""
        return _as_dict(await self.request(op, wait_seconds, **args))

    async def _send(self, op: str, wait_seconds: float, args: dict[str, Any]) -> Any:
        if self.ws is None or self.closed.is_set():
            raise ExecutorError("The executor connection was lost.")
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        try:
            await self.ws.send(json.dumps({"id": request_id, "op": op, "args": args}))
            async with asyncio.timeout(wait_seconds):
                return _raise_for(await future)
        except TimeoutError:
            raise ExecutorError("The executor did not answer within 25 s.", "timeout") from None
        except ConnectionClosed:
            raise ExecutorError("The executor connection was lost.") from None
        finally:
            self._waiting.pop(request_id, None)

    async def close(self) -> None:
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.close()
        if self._reader is not None:
            with contextlib.suppress(BaseException):
                await self._reader
