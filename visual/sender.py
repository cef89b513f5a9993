"""The gateway socket's way out: control messages first, then the latest frame once the link drains.

Mixed into ``visual/consumers.py`` ``VisualStreamConsumer`` (the socket's state lives there, set
at its handshake): pending bytes count what the server holds and what the kernel has not yet
sent; a frame is written only when the previous one has all but left, a frame that cannot be is
replaced by the next (latest wins), a link slow frame after frame is noticed, and above
4,000,000 pending bytes the connection is ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from core.metrics import VISUAL_FRAMES_SENT, VISUAL_FRAMES_SKIPPED
from executor import ops
from executor.screencast import FrameWindow
from visual import heartbeat, limits, services
from visual.contracts import FrameMessage, NoticeMessage, ServerMessage, encode


class FrameSender:
    """The consumer's sending half (frames, their pacing, the pending-bytes ceiling)."""

    if TYPE_CHECKING:
        ending: bool
        accepted: bool
        notices: bool
        binding: services.Binding | None
        grant_id: str | None
        outbox: deque[str]
        frame_slot: tuple[ops.FrameMeta, bytes] | None
        wake: asyncio.Event
        send_lock: asyncio.Lock
        window: FrameWindow
        slot_since: float
        slow_frames: int
        prompt_frames: int
        slow_link: bool
        frame_sequence: int
        frames_sent: int
        frames_skipped: int
        max_pending_seen: int
        base_send: Any

        async def send(self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False) -> None: ...

        async def terminate(self, message: str | None) -> None: ...

    def _transport(self) -> Any:
        protocol = getattr(self.base_send, "__self__", None)
        return getattr(protocol, "transport", None)

    def _raise_write_limits(self) -> None:
        # The gateway bounds what is pending itself (skip at 1 MB, terminate above 4 MB);
        # the server's own 64 KiB pause would otherwise hold every send, acks included.
        transport = self._transport()
        if transport is not None:
            with contextlib.suppress(Exception):
                transport.set_write_buffer_limits(high=2 * limits.TERMINATE_ABOVE_PENDING_BYTES)

    def pending_bytes(self) -> int:
        """Bytes on their way to this client: in the transport's buffer plus what the kernel has not yet sent."""
        transport = self._transport()
        if transport is None:
            return 0
        try:
            buffered = int(transport.get_write_buffer_size())
        except Exception:
            buffered = 0
        return buffered + self._kernel_unsent(transport)

    def _kernel_unsent(self, transport: Any) -> int:
        return heartbeat.kernel_unsent(transport)

    async def _send_now(self, message: ServerMessage) -> None:
        async with self.send_lock:
            await self.send(text_data=encode(message))

    def _queue(self, message: ServerMessage) -> None:
        self.outbox.append(encode(message))
        self.wake.set()

    async def _writer(self) -> None:
        """Control messages first, then the latest frame once the socket has (nearly) drained."""
        while not self.ending:
            if self.frame_slot is not None:
                # A frame waits for the link (look again soon: the kernel's drain raises no event)
                # or for its one-second window to open.
                opens_in = self.window.opens_at() - time.monotonic()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(opens_in if opens_in > 0 else limits.DRAIN_POLL_SECONDS):
                        await self.wake.wait()
            else:
                await self.wake.wait()
            self.wake.clear()
            while not self.ending and self.outbox:
                async with self.send_lock:
                    await self.send(text_data=self.outbox.popleft())
            if not await self._within_ceiling():
                return
            if self.ending or self.frame_slot is None or self.pending_bytes() >= limits.NEXT_FRAME_BELOW_PENDING_BYTES:
                continue
            if time.monotonic() < self.window.opens_at():
                continue
            self._pace(time.monotonic() - self.slot_since)
            async with self.send_lock:
                meta, jpeg = self.frame_slot
                self.frame_slot = None
                self.window.record(time.monotonic())
                await self._send_frame(meta, jpeg)
            if not await self._within_ceiling():
                return

    def _pace(self, waited: float) -> None:
        """How long the next frame waited for the socket: seconds, frame after frame, is a link too
        slow for this page (a ram-notices-v1 client is told once, and again when it recovers)."""
        if waited >= limits.SLOW_LINK_FRAME_WAIT_SECONDS:
            self.slow_frames, self.prompt_frames = self.slow_frames + 1, 0
        elif waited <= limits.PROMPT_FRAME_WAIT_SECONDS:
            self.slow_frames, self.prompt_frames = 0, self.prompt_frames + 1
        if not self.slow_link and self.slow_frames >= limits.SLOW_LINK_FRAMES:
            self.slow_link = True
            if self.notices:
                self._queue(
                    NoticeMessage(
                        code="slow_link",
                        message="The link is too slow for this page: the screen updates only every few seconds.",
                    )
                )
        elif self.slow_link and self.prompt_frames >= limits.SLOW_LINK_FRAMES:
            self.slow_link = False
            if self.notices:
                self._queue(NoticeMessage(code="link_ok", message="The link keeps up with the page again."))

    async def _within_ceiling(self) -> bool:
        """Track the pending bytes; above 4,000,000 the connection is ended (no ``error`` fits)."""
        pending = self.pending_bytes()
        self.max_pending_seen = max(self.max_pending_seen, pending)
        if pending > limits.TERMINATE_ABOVE_PENDING_BYTES:
            await self.terminate(None)
            return False
        return True

    async def _send_frame(self, meta: ops.FrameMeta, jpeg: bytes) -> None:
        if self.binding is None:
            return
        # Decided when sent, not when captured: a frame never contradicts a ``state`` already sent.
        controlling = self.grant_id is not None
        control = "human" if controlling else meta.control
        self.frame_sequence += 1
        message = FrameMessage(
            sequence=self.frame_sequence,
            generation=self.binding.generation,  # type: ignore[arg-type]
            control=control,  # type: ignore[arg-type]
            controlling=controlling,
            url=meta.url,
        )
        await self.send(text_data=encode(message))
        await self.send(bytes_data=jpeg)
        self.frames_sent += 1
        VISUAL_FRAMES_SENT.inc()

    def _on_frame(self, meta: ops.FrameMeta, jpeg: bytes) -> None:
        if self.ending or not self.accepted:
            return
        if self.pending_bytes() >= limits.SKIP_FRAMES_AT_PENDING_BYTES:
            self.frames_skipped += 1
            VISUAL_FRAMES_SKIPPED.inc()
            return
        if self.frame_slot is not None:
            self.frames_skipped += 1  # latest wins: the waiting frame is replaced
            VISUAL_FRAMES_SKIPPED.inc()
        else:
            self.slot_since = time.monotonic()
        self.frame_slot = (meta, jpeg)
        self.wake.set()
