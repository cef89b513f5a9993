"""Pacing Chromium's screencast at the source, by when its frames are acknowledged.

Chromium sends a screencast frame on every change of the page (about 21 a second on an
animating page at 1280x720) while at most two are unacknowledged; with three
unacknowledged it captures nothing more. Acknowledging at once (as the executor did) makes
Chromium capture and encode, Playwright's driver relay, and the executor decode every
frame, although viewers take only ``max_fps`` of them. Here the acknowledgements are held:
once three frames are unacknowledged (Chromium has stopped), the oldest is acknowledged
only when the earliest subscriber slot is about to open (``lead`` ahead of it, the time a
capture takes), so Chromium captures about one frame per slot of the fastest viewer.

A change of the page while Chromium is stopped is not captured, and Chromium does not
capture it later if the page then stays still: a viewer would keep a stale screen. So
after each release, if no frame follows within ``lead + REFRESH_AFTER_SECONDS``, the
screencast is restarted, which makes Chromium capture the page as it is now; that frame
is acknowledged at once and delivered only if it differs from the latest one.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Awaitable, Callable

# Chromium captures while at most two frames are unacknowledged (kMaxScreencastFramesInFlight).
STALLED_AT = 3
# How long after a release a frame may take before the screen is presumed stale.
REFRESH_AFTER_SECONDS = 0.06
LEAD_INITIAL_SECONDS = 0.03
LEAD_MIN_SECONDS = 0.01


class ScreencastPacer:
    """Holds and releases Chromium's screencast acknowledgements (see the module)."""

    def __init__(
        self,
        *,
        ack: Callable[[int], Awaitable[None]],
        restart: Callable[[], Awaitable[None]],
        next_slot: Callable[[], float | None],
        min_interval: Callable[[], float],
    ) -> None:
        self._ack = ack
        self._restart = restart
        self._next_slot = next_slot  # the earliest subscriber slot (monotonic), None without one
        self._min_interval = min_interval  # 1 / the fastest subscriber's max_fps
        self.pending: collections.deque[int] = collections.deque()
        self.lead = LEAD_INITIAL_SECONDS
        self.released_at: float | None = None
        self.refreshing = False
        self.refreshes = 0
        self._release_task: asyncio.Task[None] | None = None
        self._refresh_task: asyncio.Task[None] | None = None

    def reset(self) -> None:
        """The screencast (re)started or stopped: nothing is pending any more."""
        self.pending.clear()
        self.released_at = None
        for task in (self._release_task, self._refresh_task):
            if task is not None:
                task.cancel()
        self._release_task = self._refresh_task = None

    def frame(self, session_id: int) -> bool:
        """A frame arrived; returns True when it answers a refresh (it was acknowledged at once)."""
        now = time.monotonic()
        if self._refresh_task is not None:
            self._refresh_task.cancel()
            self._refresh_task = None
        if self.released_at is not None:
            # How long a capture takes after a release: the lead of the next ones.
            took = now - self.released_at
            self.released_at = None
            self.lead = min(max(0.8 * self.lead + 0.2 * took, LEAD_MIN_SECONDS), self._min_interval() / 2)
        if self.refreshing:
            self.refreshing = False
            self._spawn_ack(session_id)
            return True
        self.pending.append(session_id)
        if len(self.pending) >= STALLED_AT and self._release_task is None:
            self._release_task = asyncio.get_running_loop().create_task(self._release_at_slot())
        return False

    def _spawn_ack(self, session_id: int) -> None:
        asyncio.get_running_loop().create_task(self._ack(session_id))

    async def _release_at_slot(self) -> None:
        try:
            slot = self._next_slot()
            if slot is not None:
                delay = slot - self.lead - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            if not self.pending:
                return
            self.released_at = time.monotonic()
            await self._ack(self.pending.popleft())
            self._refresh_task = asyncio.get_running_loop().create_task(self._refresh_unless_a_frame_follows())
        finally:
            if asyncio.current_task() is self._release_task:
                self._release_task = None

    async def _refresh_unless_a_frame_follows(self) -> None:
        await asyncio.sleep(self.lead + REFRESH_AFTER_SECONDS)
        self._refresh_task = None
        self.released_at = None
        self.refreshing = True
        self.refreshes += 1
        self.reset()
        with contextlib.suppress(Exception):
            await self._restart()
