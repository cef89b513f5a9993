"""The control state machine of one computer: who may act on the browser.

States: ``available`` (nobody holds it), ``leased`` (the agent holds a lease),
``transition`` (a person asked for control; the agent's work is being
stopped), ``human`` (a person holds an 8 s grant the gateway renews),
``released`` (the person handed control back; the agent regains it only by an
explicit new lease) and ``unavailable`` (the browser failed).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from core.clock import SYSTEM_CLOCK, Clock
from executor.ops import FailureReason

HUMAN_GRANT_SECONDS = 8.0
AGENT_LEASE_SECONDS = 30.0

AVAILABLE = "available"
LEASED = "leased"
TRANSITION = "transition"
HUMAN = "human"
RELEASED = "released"
UNAVAILABLE = "unavailable"


class ControlError(Exception):
    """A refused operation; ``reason`` is a short machine word for clients (``executor.ops.FailureReason``)."""

    def __init__(self, message: str, reason: FailureReason = "refused") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


HUMAN_HAS_CONTROL: FailureReason = "human_control"


@dataclass
class Holder:
    id: str
    expires_at: float


@dataclass
class Counters:
    stopped_processes: int = 0
    cancelled_downloads: int = 0
    aborted_exports: int = 0


@dataclass
class Control:
    """Single-threaded (one event loop): every method runs on the executor's loop."""

    on_change: Callable[[], None] = lambda: None
    cancel_downloads: Callable[[], Awaitable[int]] | None = None
    state: str = AVAILABLE
    lease: Holder | None = None
    grant: Holder | None = None
    agent_tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    export_tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    # Increases at every change, so a client can order events against replies.
    version: int = 0
    # The grant's and the lease's deadlines are on this clock (tests move a ManualClock).
    clock: Clock = SYSTEM_CLOCK

    # --- the agent -------------------------------------------------------

    def lease_acquire(self) -> Holder:
        self.expire()
        if self.state in (TRANSITION, HUMAN):
            raise ControlError("A human has control of this computer.", HUMAN_HAS_CONTROL)
        if self.state == UNAVAILABLE:
            raise ControlError("The computer's browser is unavailable.", "unavailable")
        if self.state == LEASED:
            raise ControlError("Another agent lease is active on this computer.", "leased")
        self.lease = Holder(secrets.token_urlsafe(16), self.clock.monotonic() + AGENT_LEASE_SECONDS)
        self._set(LEASED)
        return self.lease

    def lease_check(self, lease_id: str) -> Holder:
        self.expire()
        if self.state in (TRANSITION, HUMAN):
            raise ControlError("A human has control of this computer.", HUMAN_HAS_CONTROL)
        if self.lease is None or not secrets.compare_digest(self.lease.id, lease_id):
            raise ControlError("The agent lease is missing or no longer valid.", "lease_invalid")
        return self.lease

    def lease_renew(self, lease_id: str) -> Holder:
        lease = self.lease_check(lease_id)
        lease.expires_at = self.clock.monotonic() + AGENT_LEASE_SECONDS
        return lease

    def lease_release(self, lease_id: str) -> None:
        self.lease_check(lease_id)
        self.lease = None
        self._set(AVAILABLE)

    def track_agent_task(self, task: asyncio.Task[Any], *, export: bool) -> None:
        tasks = self.export_tasks if export else self.agent_tasks
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    # --- the person --------------------------------------------------------

    async def takeover(self) -> tuple[Holder, Counters]:
        """Invalidate the agent's lease, stop its work, cancel downloads; grant 8 s."""
        self.expire()
        if self.state in (TRANSITION, HUMAN):
            raise ControlError("Another person already has control of this computer.", "human_control")
        if self.state == UNAVAILABLE:
            raise ControlError("The computer's browser is unavailable.", "unavailable")
        self.lease = None
        self._set(TRANSITION)
        counters = Counters()
        try:
            counters.stopped_processes = await _cancel_all(self.agent_tasks)
            counters.aborted_exports = await _cancel_all(self.export_tasks)
            if self.cancel_downloads is not None:
                counters.cancelled_downloads = await self.cancel_downloads()
        except BaseException:
            if self.state == TRANSITION:
                self._set(RELEASED)
            raise
        if self.state != TRANSITION:  # the browser failed meanwhile
            raise ControlError("The computer's browser is unavailable.", "unavailable")
        self.grant = Holder(secrets.token_urlsafe(16), self.clock.monotonic() + HUMAN_GRANT_SECONDS)
        self._set(HUMAN)
        return self.grant, counters

    def grant_check(self, grant_id: str) -> Holder:
        self.expire()
        if self.state != HUMAN or self.grant is None or not secrets.compare_digest(self.grant.id, grant_id):
            raise ControlError("The human grant is missing or expired.", "grant_invalid")
        return self.grant

    def grant_renew(self, grant_id: str) -> Holder:
        grant = self.grant_check(grant_id)
        grant.expires_at = self.clock.monotonic() + HUMAN_GRANT_SECONDS
        return grant

    def grant_release(self, grant_id: str) -> None:
        self.grant_check(grant_id)
        self.grant = None
        self._set(RELEASED)

    # --- time and failure --------------------------------------------------

    def expire(self) -> None:
        now = self.clock.monotonic()
        if self.state == HUMAN and self.grant is not None and self.grant.expires_at <= now:
            self.grant = None
            self._set(RELEASED)
        if self.state == LEASED and self.lease is not None and self.lease.expires_at <= now:
            self.lease = None
            self._set(AVAILABLE)

    def fail(self) -> None:
        self.lease = None
        self.grant = None
        self._set(UNAVAILABLE)

    def frame_control(self) -> str:
        """The frame's ``control``: frames carry only available, leased, transition or human."""
        return self.state if self.state in (AVAILABLE, LEASED, TRANSITION, HUMAN) else AVAILABLE

    def _set(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.version += 1
            self.on_change()


async def _cancel_all(tasks: set[asyncio.Task[Any]]) -> int:
    running = [t for t in tasks if not t.done()]
    for task in running:
        task.cancel()
    if running:
        await asyncio.gather(*running, return_exceptions=True)
    return len(running)
