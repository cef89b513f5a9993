"""Pacing Chromium's screencast at the source, by when its frames are acknowledged.

Chromium sends a screencast frame on every change of the page (about 21 a second on an
animating page at 1280x720) while at most two are unacknowledged; with more unacknowledged
it captures nothing. Acknowledging at once (as the executor did) makes Chromium capture and
encode, Playwright's driver relay, and the executor decode every frame, although viewers
take only ``max_fps`` of them. Here acknowledgements are held: once Chromium has stopped
(three or more unacknowledged), they are released down to two only when the earliest
subscriber slot is about to open (``lead`` ahead of it: the time a capture takes), so
Chromium captures about one frame per slot of the fastest viewer.

A change of the page while Chromium is stopped is not captured, and Chromium does not
capture it later if the page then stays still: a viewer would keep a stale screen. So after
each release, if no frame follows within twice the usual capture time, the page is captured
once directly (``Page.captureScreenshot``, the screencast's size and quality) and offered
like a frame; a capture identical to the latest frame is not sent again.

Each viewer's frames are then held to ``max_fps`` in every one-second window (``FrameWindow``),
by the executor that sends them to the gateway and again by the gateway that sends them on.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Awaitable, Callable

# Chromium captures while at most two frames are unacknowledged (kMaxScreencastFramesInFlight);
# one or two more may already be on their way when it stops.
STALLED_AT = 3
RUNNING_AT = STALLED_AT - 1
# A frame that takes longer than twice the usual capture time, plus this, after a release
# presumes the screen stale.
REFRESH_AFTER_SECONDS = 0.04
MAX_CAPTURE_SECONDS = 0.5
LEAD_INITIAL_SECONDS = 0.03
LEAD_MIN_SECONDS = 0.01
# Any max_fps + 1 frames in a row to one viewer span at least this long: a second, plus a guard for
# the jitter between the sender and the viewer (at most about 2% fewer frames on a page that
# changes all the time, never a window with one frame too many).
WINDOW_SECONDS = 1.02


class FrameWindow:
    """``max_fps`` as a maximum in every one-second window, not on average: a frame may leave only
    once the frame ``max_fps`` before it left ``WINDOW_SECONDS`` ago. The first frames leave at once."""

    def __init__(self, max_fps: int) -> None:
        self.sent: collections.deque[float] = collections.deque(maxlen=max_fps)

    def opens_at(self) -> float:
        """The monotonic time from which the next frame may leave (0 while fewer than max_fps left)."""
        if len(self.sent) < (self.sent.maxlen or 0):
            return 0.0
        return self.sent[0] + WINDOW_SECONDS

    def record(self, at: float) -> None:
        """A frame left at ``at``."""
        self.sent.append(at)


class ScreencastPacer:
    """Holds and releases Chromium's screencast acknowledgements (see the module)."""

    def __init__(
        self,
        *,
        ack: Callable[[int], Awaitable[None]],
        capture: Callable[[], Awaitable[None]],
        next_slot: Callable[[], float | None],
        min_interval: Callable[[], float],
    ) -> None:
        self._ack = ack
        self._capture = capture  # captures the page now and offers it as a frame
        self._next_slot = next_slot  # the earliest subscriber slot (monotonic), None without one
        self._min_interval = min_interval  # 1 / the fastest subscriber's max_fps
        self.pending: collections.deque[int] = collections.deque()
        self.capture_seconds = LEAD_INITIAL_SECONDS  # how long a capture takes after a release
        self.released_at: float | None = None
        self.refreshes = 0
        self._release_task: asyncio.Task[None] | None = None
        self._refresh_task: asyncio.Task[None] | None = None

    @property
    def lead(self) -> float:
        """How long before a slot acknowledgements are released (at most half an interval)."""
        return min(self.capture_seconds, self._min_interval() / 2)

    async def release_all(self) -> None:
        """Acknowledge every held frame (the page's screencast moves elsewhere: nothing stays held on it)."""
        while self.pending:
            await self._ack(self.pending.popleft())
        self.reset()

    def reset(self) -> None:
        """The screencast (re)started or stopped: nothing is pending any more."""
        self.pending.clear()
        self.released_at = None
        for task in (self._release_task, self._refresh_task):
            if task is not None:
                task.cancel()
        self._release_task = self._refresh_task = None

    def frame(self, session_id: int) -> None:
        """A screencast frame arrived (unacknowledged)."""
        now = time.monotonic()
        if self._refresh_task is not None:
            self._refresh_task.cancel()
            self._refresh_task = None
        if self.released_at is not None:
            took = now - self.released_at
            self.released_at = None
            self.capture_seconds = max(0.8 * self.capture_seconds + 0.2 * took, LEAD_MIN_SECONDS)
        self.pending.append(session_id)
        if len(self.pending) >= STALLED_AT and self._release_task is None:
            self._release_task = asyncio.get_running_loop().create_task(self._release_at_slot())

    async def _release_at_slot(self) -> None:
        try:
            slot = self._next_slot()
            if slot is not None:
                delay = slot - self.lead - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            if len(self.pending) <= RUNNING_AT:
                return
            self.released_at = time.monotonic()
            while len(self.pending) > RUNNING_AT:
                await self._ack(self.pending.popleft())
            self._refresh_task = asyncio.get_running_loop().create_task(self._refresh_unless_a_frame_follows())
        finally:
            if asyncio.current_task() is self._release_task:
                self._release_task = None

    async def _refresh_unless_a_frame_follows(self) -> None:
        await asyncio.sleep(2 * self.capture_seconds + REFRESH_AFTER_SECONDS)
        self._refresh_task = None
        self.released_at = None
        # Either the page stayed still or captures got slower (a loaded machine): allow more next
        # time, so that slow captures do not turn into a capture of their own at every slot.
        self.capture_seconds = min(self.capture_seconds * 1.5, MAX_CAPTURE_SECONDS)
        self.refreshes += 1
        with contextlib.suppress(Exception):
            await self._capture()
