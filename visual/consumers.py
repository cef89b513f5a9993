"""The ``jpeg-websocket-v1`` gateway: one socket, one visual session.

The handshake is authorised before ``accept`` (a refused one gets HTTP 401,
opens nothing and uses up every ticket it offered); the socket is then bound to the computer's current executor
generation through a private connection to that executor. Frames are
latest-wins: pending bytes count what the server holds and what the kernel has
not yet sent, and a frame is written only when the previous one has all but
left, so a slow link gets fewer frames (never more than one queued behind the
socket, so Pings and ``ack`` are not stuck behind frames) instead of a cut. An
``ack`` or ``state`` never waits behind a frame; the connection is ended above
4,000,000 pending bytes. Every failure path sends an ``error`` if it can and
then terminates the connection without a Close frame.

The sending half (frames, pacing, pending bytes) is ``visual/sender.py``; where a handshake's
tickets may be, and using up the rest, ``visual/tickets.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections import deque
from typing import Any

import pydantic
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from redis.exceptions import RedisError

from computers.client import ExecutorError, GatewayToExecutorLink
from computers.tokens import private_interface_token
from core.clock import SYSTEM_CLOCK, Clock
from core.errors import (
    Conflict,
    DomainError,
    Forbidden,
    InvalidInput,
    NotAuthenticated,
    NotFound,
    TooMany,
    Unavailable,
    Unprocessable,
    UpstreamFailed,
    status_for,
)
from core.json import json_bytes
from core.metrics import VISUAL_SESSIONS_OPENED
from executor import ops
from executor.contracts import NavigateInput, TabInput
from executor.screencast import FrameWindow
from runs.services import computer_control_recorded
from visual import limits, selectors, services
from visual.contracts import (
    CLIENT_MESSAGE,
    CLIENT_MESSAGE_WITH_ADDITIONS,
    CLIENT_MESSAGE_WITH_TABS,
    DIALOGS_PROTOCOL,
    MAX_DIALOGS_LISTED,
    MAX_TABS_LISTED,
    NOTICES_PROTOCOL,
    SUBPROTOCOL,
    TABS_PROTOCOL,
    WAITING_DIALOG,
    Ack,
    DialogsMessage,
    ErrorMessage,
    Hello,
    InputMessage,
    InputMessageWithAdditions,
    InputMessageWithTabs,
    NoticeMessage,
    PendingAuthPrompt,
    PendingDialog,
    Release,
    StateHuman,
    StateReleased,
    StateTransition,
    StateUnavailable,
    Tab,
    TabsMessage,
    Takeover,
    encode,
)
from visual.errors import ComputerUnreachable
from visual.sender import FrameSender
from visual.tickets import misplaced_tickets, presented_tickets_burn, ticket_from

logger = logging.getLogger(__name__)

_RELEASE = object()
# The executor's answers to a ``navigate`` whose page did not load (timed out, refused, failed):
# for a ram-notices-v1 client it is acked and explained, and the person keeps control.
_NAVIGATION_FAILURES = frozenset({"browser_error", "timeout", "egress_refused", "upstream_proxy_failed"})
# The sockets of this process, for the benchmark's and tests' statistics (frames sent/skipped, pending bytes).
LIVE: weakref.WeakSet[VisualStreamConsumer] = weakref.WeakSet()


# The fields of each kind of waiting dialog the gateway forwards (the executor's bookkeeping has more).
_DIALOG_FIELDS = tuple(PendingDialog.model_fields)
_AUTH_FIELDS = tuple(PendingAuthPrompt.model_fields)


def _waiting(dialog: ops.DialogInfo) -> PendingDialog | PendingAuthPrompt:
    fields = _AUTH_FIELDS if isinstance(dialog, ops.AuthDialogInfo) else _DIALOG_FIELDS
    return WAITING_DIALOG.validate_python(dialog.model_dump(include=set(fields)))


def key_group(api_key_id: str) -> str:
    return f"visual-key-{api_key_id}"


def account_group(account_id: str) -> str:
    return f"visual-account-{account_id}"


def _groups(binding: services.Binding) -> list[str]:
    """The channel-layer groups that can end this socket from elsewhere."""
    groups = [account_group(binding.account_id)]
    if binding.api_key_id:
        groups.append(key_group(binding.api_key_id))
    return groups


# The WebSocket edge: a refused handshake is an HTTP answer with one of these (one per category, no
# catch-all: a ticket refused is 401, a limit 429, the computer unreachable 503).
HANDSHAKE_STATUS: dict[type[DomainError], int] = {
    InvalidInput: 400,
    NotAuthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    Unprocessable: 422,
    TooMany: 429,
    UpstreamFailed: 502,
    Unavailable: 503,
}


class VisualStreamConsumer(FrameSender, AsyncWebsocketConsumer):
    # The session's 900 s limit is measured on this clock (tests move a ManualClock).
    clock: Clock = SYSTEM_CLOCK

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Run the socket; whatever ends it, its session row is ended too.

        Channels calls ``disconnect`` only when the client's side ends. When the channel layer fails
        under the consumer (Redis restarted: its receive raises), the socket is ended here like any
        other server-side end (``error``, then the connection dropped) and the session is ended, so
        it stops counting against the open-socket limits at once instead of after 900 s.
        """
        self.disconnected = False
        try:
            await super().__call__(scope, receive, send)
        except RedisError as exc:
            logger.warning("a screen session lost the channel layer (%s); ended", type(exc).__name__)
            await self.terminate("The server lost its connection to the channel layer; reconnect.")
        finally:
            if not self.disconnected:
                await self.disconnect(1011)

    # --- handshake -----------------------------------------------------------

    async def connect(self) -> None:
        self.ending = False
        self.accepted = False
        self.loop = asyncio.get_running_loop()
        self.binding: services.Binding | None = None
        self.link: GatewayToExecutorLink | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self.end_reason = "disconnected"

        headers = dict(self.scope.get("headers", []))
        raw_origin = headers.get(b"origin")
        origin = raw_origin.decode("latin-1") if raw_origin is not None else None
        subprotocols = list(self.scope.get("subprotocols", []))
        # One connection attempt per ticket: a refused handshake uses up every ticket it offered.
        if not services.visual_origin_possible(origin=origin):
            await self.refuse("Origin not allowed.")
            return
        if misplaced_tickets(self.scope):
            await self.refuse("Send the ticket only in the subprotocol ram-ticket.<ticket>, never in the URL.")
            return
        ticket = ticket_from(subprotocols)
        if ticket is None:
            await self.refuse("Send the subprotocols ram-jpeg-v1 and ram-ticket.<ticket>.")
            return
        try:
            binding = await database_sync_to_async(services.visual_ticket_consume)(raw_ticket=ticket, origin=origin)
        except DomainError as exc:
            await self.deny(status_for(exc, HANDSHAKE_STATUS), exc.message)
            return
        del ticket
        self.binding = binding
        self.mode = binding.mode
        # The ram-tabs-v1 addition: tab notices and tab inputs, only for a client that offered it.
        self.tab_notices = TABS_PROTOCOL in subprotocols
        # The ram-dialogs-v1 addition: dialog notices and answers, likewise.
        self.dialog_notices = DIALOGS_PROTOCOL in subprotocols
        # The ram-notices-v1 addition: notices that end nothing (a failed navigation, a slow link).
        self.notices = NOTICES_PROTOCOL in subprotocols
        self.slot_since = 0.0  # when the waiting frame (or the one it replaced) started waiting
        self.slow_frames = 0  # frames in a row that waited seconds for the socket
        self.prompt_frames = 0  # frames in a row that left at once
        self.slow_link = False
        self.max_fps = int(settings.RAM_VISUAL_MAX_FPS)
        # The executor already paces frames to max_fps; a frame held back by the link is not let
        # through right before the next one, so the viewer too never sees more in a second.
        self.window = FrameWindow(self.max_fps)
        self.grant_id: str | None = None
        self.grant_version = 0
        self.taking_over = False
        self.last_sequence = 0
        self.frame_sequence = 0
        self.frames_sent = 0
        self.frames_skipped = 0
        self.max_pending_seen = 0
        self.outbox: deque[str] = deque()
        self.frame_slot: tuple[ops.FrameMeta, bytes] | None = None
        self.wake = asyncio.Event()
        self.send_lock = asyncio.Lock()
        self.inputs: asyncio.Queue[Any] = asyncio.Queue()
        self.received_at: deque[float] = deque()
        self.deadline = self.clock.monotonic() + limits.SESSION_SECONDS

        self.link = GatewayToExecutorLink(
            binding.executor_address,
            token=private_interface_token(computer_id=binding.computer_id, generation=binding.generation),
            on_frame=self._on_frame,
            on_control=self._on_control,
            on_tabs=self._on_tabs if self.tab_notices else None,
            on_dialogs=self._on_dialogs if self.dialog_notices else None,
        )
        try:
            hello = await self.link.open()
            if hello.generation != binding.generation:
                raise ExecutorError("Computer restarted; reconnect.")
        except ExecutorError:
            await self.link.close()
            await database_sync_to_async(services.visual_session_end)(
                session_id=binding.session_id, reason="executor unreachable"
            )
            unreachable = ComputerUnreachable()
            await self.deny(status_for(unreachable, HANDSHAKE_STATUS), unreachable.message)
            return
        await self.accept(subprotocol=SUBPROTOCOL)
        VISUAL_SESSIONS_OPENED.labels(mode=self.mode).inc()
        self.accepted = True
        LIVE.add(self)
        self._raise_write_limits()
        if self.channel_layer is not None:
            with contextlib.suppress(Exception):
                for group in _groups(binding):
                    await self.channel_layer.group_add(group, self.channel_name)
        await self._send_now(Hello(mode=binding.mode, max_fps=self.max_fps))  # type: ignore[arg-type]
        for coroutine in (self._writer(), self._cycle(), self._input_worker(), self._watch_executor()):
            self._spawn(coroutine)
        try:
            await self.link.call("subscribe", max_fps=self.max_fps)
            if self.tab_notices:
                self._on_tabs((await self.link.op_tabs()).tabs)
            if self.dialog_notices:
                self._on_dialogs((await self.link.op_dialogs()).dialogs)
        except ExecutorError:
            await self.terminate("The computer stopped; reconnect.")

    async def refuse(self, message: str) -> None:
        """Refuse a malformed or foreign handshake, consuming any ticket it carried, wherever."""
        await database_sync_to_async(presented_tickets_burn)(self.scope, "refused at handshake")
        await self.deny(401, message)

    async def deny(self, status: int, message: str) -> None:
        """Refuse the handshake with a plain HTTP response (never echoing the ticket)."""
        self.ending = True
        await self.base_send(
            {
                "type": "websocket.http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"cache-control", b"no-store")],
            }
        )
        await self.base_send({"type": "websocket.http.response.body", "body": json_bytes({"error": message})})

    # --- background tasks ------------------------------------------------------

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.create_task(self._guarded(coroutine))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _guarded(self, coroutine: Any) -> None:
        """A background task that fails (e.g. the client vanished mid-send) ends the session quietly."""
        try:
            await coroutine
        except asyncio.CancelledError:
            raise
        except OSError:  # the client went away mid-send; its disconnect event follows
            self.ending = True
        except Exception:
            if not self.ending:
                logger.warning("visual session task failed", exc_info=True)
                await self.terminate("The session failed; reconnect.")


    def _on_tabs(self, tabs: list[ops.TabInfo]) -> None:
        """The executor's open pages changed (opened, closed, switched, navigated): tell a ram-tabs-v1 client."""
        if self.ending or not self.accepted:
            return
        try:
            message = TabsMessage(tabs=[Tab.model_validate(t.model_dump()) for t in tabs[:MAX_TABS_LISTED]])
        except pydantic.ValidationError:
            logger.warning("the executor sent an invalid tab list; not forwarded")
            return
        if self.outbox and self.outbox[-1].startswith('{"type":"tabs"'):
            self.outbox.pop()  # latest wins: a page navigating in a loop queues one list, not many
        self._queue(message)

    def _on_dialogs(self, dialogs: list[ops.DialogInfo]) -> None:
        """A page opened a dialog or one was answered: tell a ram-dialogs-v1 client which wait."""
        if self.ending or not self.accepted:
            return
        try:
            message = DialogsMessage(dialogs=[_waiting(d) for d in dialogs[:MAX_DIALOGS_LISTED]])
        except pydantic.ValidationError:
            logger.warning("the executor sent an invalid dialog list; not forwarded")
            return
        if self.outbox and self.outbox[-1].startswith('{"type":"dialogs"'):
            self.outbox.pop()  # latest wins
        self._queue(message)

    def _on_control(self, control: str, version: int) -> None:
        if self.ending or version <= self.grant_version:
            return  # not newer than our own grant (events and replies may cross)
        if control == "unavailable":
            self._queue(StateUnavailable())
            if self.grant_id is not None or self.taking_over:
                self._spawn(self.terminate("The computer's browser failed; your control ended."))
            return
        if self.grant_id is not None and control != "human":
            self._spawn(self.terminate("Your control of the computer ended; reconnect."))

    # --- lifecycle -----------------------------------------------------------

    async def terminate(self, message: str | None) -> None:
        """Send ``error`` if it can be delivered, then drop the connection (no Close frame)."""
        if self.ending:
            return
        self.ending = True
        self.end_reason = (message or "congested")[:100]
        self.wake.set()
        current = asyncio.current_task()
        for task in list(self.tasks):
            if task is not current:
                task.cancel()
        transport = self._transport()
        congested = self.pending_bytes() > limits.TERMINATE_ABOVE_PENDING_BYTES
        if message is not None and not congested:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    async with self.send_lock:
                        while self.outbox:
                            await self.send(text_data=self.outbox.popleft())
                        await self.send(text_data=encode(ErrorMessage(message=message)))
        if transport is not None:
            if congested:
                transport.abort()
            else:
                transport.close()
        else:
            with contextlib.suppress(Exception):
                await self.close(code=1011)

    async def disconnect(self, code: int) -> None:
        if getattr(self, "disconnected", False):
            return
        self.disconnected = True
        self.ending = True
        for task in list(getattr(self, "tasks", ())):
            task.cancel()
        link, binding = getattr(self, "link", None), getattr(self, "binding", None)
        if link is not None:
            grant, self.grant_id = self.grant_id, None
            if grant is not None:
                with contextlib.suppress(ExecutorError):
                    await link.call("grant_release", wait_seconds=5, grant_id=grant)
                await self._record_control(taken=False)
            await link.close()
        if binding is not None and self.accepted:
            if self.channel_layer is not None:
                with contextlib.suppress(Exception):
                    for group in _groups(binding):
                        await self.channel_layer.group_discard(group, self.channel_name)
            await database_sync_to_async(services.visual_session_end)(
                session_id=binding.session_id, reason=self.end_reason
            )

    async def visual_end(self, event: dict[str, Any]) -> None:
        """A channel-layer notice (e.g. the key was revoked)."""
        await self.terminate(str(event.get("message") or "Access was revoked."))

    async def _watch_executor(self) -> None:
        if self.link is not None:
            await self.link.closed.wait()
            await self.terminate("The computer stopped; reconnect.")

    async def _cycle(self) -> None:
        """Every 2 s: renew the human grant, re-check the binding and the 900 s limit."""
        binding = self.binding
        if binding is None or self.link is None:
            return
        while not self.ending:
            await asyncio.sleep(limits.CYCLE_SECONDS)
            if not await self._within_ceiling():
                return
            if self.clock.monotonic() >= self.deadline:
                await self.terminate("The session reached its 900 s limit; reconnect with a new session.")
                return
            problem = await database_sync_to_async(selectors.session_problem)(
                session_id=binding.session_id, generation=binding.generation
            )
            if problem is not None:
                await self.terminate(problem)
                return
            grant = self.grant_id
            if grant is not None:
                try:
                    await self.link.call("grant_renew", grant_id=grant)
                except ExecutorError:
                    if self.grant_id == grant:
                        await self.terminate("Your control of the computer ended; reconnect.")
                        return

    # --- client messages -------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.ending:
            return
        now = time.monotonic()
        self.received_at.append(now)
        while self.received_at and self.received_at[0] <= now - 1.0:
            self.received_at.popleft()
        if len(self.received_at) > limits.MAX_MESSAGES_PER_SECOND:
            await self.terminate("Too many messages (over 100 per second); the session ended.")
            return
        if text_data is None:
            await self.terminate("Only JSON text messages are accepted; the session ended.")
            return
        message: Takeover | Release | InputMessage | InputMessageWithTabs | InputMessageWithAdditions
        try:
            if self.dialog_notices:
                message = CLIENT_MESSAGE_WITH_ADDITIONS.validate_json(text_data)
            else:
                message = (CLIENT_MESSAGE_WITH_TABS if self.tab_notices else CLIENT_MESSAGE).validate_json(text_data)
        except pydantic.ValidationError as exc:
            where = ", ".join(
                ".".join(str(p) for p in err["loc"]) or "message" for err in exc.errors(include_input=False)[:3]
            )
            await self.terminate(f"Invalid message ({where[:120]}); the session ended.")
            return
        if isinstance(message, Takeover):
            await self.on_takeover()
        elif isinstance(message, Release):
            await self.on_release()
        elif isinstance(message, InputMessage | InputMessageWithTabs | InputMessageWithAdditions):
            if isinstance(message.input, TabInput) and not self.tab_notices:
                await self.terminate("Tab inputs need the ram-tabs-v1 subprotocol; the session ended.")
                return
            await self.on_input(message)

    async def on_takeover(self) -> None:
        if self.mode != "control":
            await self.terminate("An observe session cannot take control; the session ended.")
            return
        if self.grant_id is not None or self.taking_over:
            await self.terminate("Control was already requested on this socket; the session ended.")
            return
        self.taking_over = True
        self._queue(StateTransition())
        self._spawn(self._takeover())

    async def _takeover(self) -> None:
        if self.link is None:
            return
        try:
            result = await self.link.op_takeover()
        except ExecutorError as exc:
            await self.terminate(exc.message)
            return
        if self.ending:
            with contextlib.suppress(ExecutorError):
                await self.link.call("grant_release", grant_id=result.grant_id)
            return
        self.grant_version = result.version
        self.grant_id = result.grant_id
        self.taking_over = False
        self.last_sequence = 0
        await self._record_control(taken=True)
        self._queue(
            StateHuman(
                stopped_processes=result.stopped_processes,
                cancelled_downloads=result.cancelled_downloads,
                aborted_exports=result.aborted_exports,
            )
        )

    async def _record_control(self, *, taken: bool) -> None:
        """The person's control, in the events of the account's open run on the computer (never fatal)."""
        binding = getattr(self, "binding", None)
        if binding is None:
            return
        try:
            who = getattr(self, "holder", None)
            if who is None:  # read once, at the first change: the release's record is one hop, as it was
                who = self.holder = await database_sync_to_async(selectors.session_holder)(session_id=binding.session_id)
            await database_sync_to_async(computer_control_recorded)(
                computer_id=binding.computer_id, account_id=binding.account_id, taken=taken, by=who
            )
        except Exception:  # noqa: BLE001 - the screen keeps working; the event log misses one line
            logger.warning("The control change on computer %s could not be recorded.", binding.computer_id)

    async def on_input(self, message: InputMessage | InputMessageWithTabs | InputMessageWithAdditions) -> None:
        if self.mode != "control":
            await self.terminate("An observe session cannot send input; the session ended.")
            return
        if self.grant_id is None:
            await self.terminate("No human grant on this socket (missing or expired); the session ended.")
            return
        if message.sequence <= self.last_sequence:
            await self.terminate("The input sequence must increase; the session ended without repeating it.")
            return
        if self.inputs.qsize() >= limits.MAX_QUEUED_INPUTS:
            await self.terminate("Too many inputs waiting (16); the session ended.")
            return
        self.last_sequence = message.sequence
        self.inputs.put_nowait((message.sequence, self.grant_id, message.input))

    async def on_release(self) -> None:
        if self.mode != "control" or self.grant_id is None:
            await self.terminate("This socket does not hold control; the session ended.")
            return
        grant, self.grant_id = self.grant_id, None
        self.inputs.put_nowait((_RELEASE, grant, None))

    async def _input_worker(self) -> None:
        """One input at a time; ``ack`` only once the executor has finished it."""
        while not self.ending and self.link is not None:
            sequence, grant, value = await self.inputs.get()
            try:
                if sequence is _RELEASE:
                    await self.link.call("grant_release", grant_id=grant)
                    self.last_sequence = 0
                    self._queue(StateReleased())
                    await self._record_control(taken=False)
                    continue
                await self.link.call("input", grant_id=grant, input=value.model_dump(mode="json"))
            except ExecutorError as exc:
                if self.notices and isinstance(value, NavigateInput) and exc.reason in _NAVIGATION_FAILURES:
                    # Acked (the input is done) and explained; the person keeps control.
                    self._queue(NoticeMessage(code="navigation_failed", message=exc.message[:300], sequence=sequence))
                    self._queue(Ack(sequence=sequence))
                    continue
                await self.terminate(
                    exc.message if exc.reason != "grant_invalid" else "The human grant expired; the session ended."
                )
                return
            self._queue(Ack(sequence=sequence))
