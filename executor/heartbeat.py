"""The executor's heartbeats: from a thread of their own, on a fixed schedule.

Nothing the event loop does (frames, a long action, a slow browser check on a loaded host)
delays them, so a live executor never reads stale, and the server can call one silent for
two heartbeats dead (``executor.selectors``). What an answer asks for (renew the profile,
stop) is done on the executor's loop, and the next heartbeat waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from executor.server_link import HEARTBEAT_CURRENT, HEARTBEAT_ENDED, HEARTBEAT_SECONDS, LinkError, ServerLink

logger = logging.getLogger(__name__)


class Heartbeat:
    """``generation`` is the generation each beat speaks for; ``answered(current, generation)``
    runs on ``loop`` when the server answers anything but ``current``; ``refused()`` when the
    server refuses the executor token (the generation ends with it)."""

    def __init__(
        self,
        *,
        computer_id: str,
        server: ServerLink,
        generation: Callable[[], uuid.UUID],
        answered: Callable[[str, uuid.UUID], Coroutine[Any, Any, None]],
        refused: Callable[[], Coroutine[Any, Any, None]],
    ) -> None:
        self.computer_id = computer_id
        self.server = server
        self._generation = generation
        self._answered = answered
        self._refused = refused
        self.loop: asyncio.AbstractEventLoop | None = None
        # Ends the heartbeat thread (set when the executor stops).
        self.stopped = threading.Event()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        threading.Thread(target=self._beats, name=f"heartbeat-{self.computer_id}", daemon=True).start()

    def stop(self) -> None:
        self.stopped.set()

    def _beats(self) -> None:
        next_beat = time.monotonic()
        while True:
            next_beat = max(next_beat + HEARTBEAT_SECONDS, time.monotonic())
            if self.stopped.wait(max(0.0, next_beat - time.monotonic())):
                return
            generation = self._generation()
            try:
                current = asyncio.run(self._once(generation))
            except LinkError as exc:
                if exc.status in (401, 403):
                    # The executor token was rotated or revoked: this generation ends with it.
                    logger.error("the server refused the executor token of %s; stopping", self.computer_id)
                    self._on_loop(self._refused())
                    return
                logger.warning("heartbeat failed: %s", exc)
                continue
            except Exception as exc:  # noqa: BLE001 - the next heartbeat tries again
                logger.warning("heartbeat failed: %s", type(exc).__name__)
                continue
            if current == HEARTBEAT_CURRENT:
                continue
            self._on_loop(self._answered(current, generation))
            if current != HEARTBEAT_ENDED:
                return

    async def _once(self, generation: uuid.UUID) -> str:
        async with asyncio.timeout(HEARTBEAT_SECONDS):
            return await self.server.heartbeat(generation=generation)

    def _on_loop(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """From the heartbeat thread: run ``coroutine`` on the executor's loop and wait for it."""
        if self.loop is None or self.loop.is_closed() or self.stopped.is_set():
            coroutine.close()
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=300)
