"""A run as a harness drives it: ``run.act(...)`` and ``run.observe()``, blocking or awaited.

``RamClient.run(run_id)`` gives a ``RunHandle``, ``AsyncRamClient.run(run_id)`` an ``AsyncRunHandle``.
``act`` sends one tool call and answers its *settled* step: when the server answers
``202`` (the action runs longer than the request may wait, such as ``browser_login``),
it reads the step with the bounded long-poll until it has settled, never sending the
action again. Each call of ``act`` uses one idempotency key (a fresh one unless you
pass yours): after a lost answer, retry with the *same* key and the server answers the
first step instead of running it twice.
"""

from __future__ import annotations

import math
import time
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ram_sdk.client import AsyncRamClient, RamClient

# The long-poll's wait per request (the server waits at most 25 s).
POLL_SECONDS = 20
# How long ``act`` reads a running step before answering it still ``started``: browser_login's
# 120 s budget and its margin, and some more.
DEFAULT_SETTLE_SECONDS = 180.0


def new_idempotency_key(tool: str) -> str:
    """A fresh key for one action (8-200 of ``A-Za-z0-9._:-``)."""
    return f"{tool[:40]}-{uuid.uuid4().hex}"


def _settled(step: dict[str, Any]) -> bool:
    return step.get("state") != "started"


class RunHandle:
    """One run of the account (created with ``agent: {"type": "external"}`` to act on it)."""

    def __init__(self, client: RamClient, run_id: str | uuid.UUID) -> None:
        self.client = client
        self.id = str(uuid.UUID(str(run_id)))

    def __repr__(self) -> str:
        return f"RunHandle({self.id!r})"

    def get(self) -> dict[str, Any]:
        """The run now (status, ``required_action`` while paused, ``queue_position`` while queued)."""
        answer: dict[str, Any] = self.client.run_get(self.id)
        return answer

    def observe(self) -> dict[str, Any]:
        """What the page shows now: ``url`` (without its query), ``title``, bounded ``text`` with
        ``truncated``, ``control``, ``tabs``, ``dialogs`` and the latest masked screenshot's id."""
        answer: dict[str, Any] = self.client.run_observe(self.id)
        return answer

    def act(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        settle_seconds: float = DEFAULT_SETTLE_SECONDS,
    ) -> dict[str, Any]:
        """One tool call; answers its step once settled (``state`` succeeded, failed or uncertain),
        or still ``started`` after ``settle_seconds``. A ``request_*`` tool pauses the run: the
        step's ``required_action`` says for what."""
        key = idempotency_key or new_idempotency_key(tool)
        step: dict[str, Any] = self.client.run_act(self.id, tool, arguments, idempotency_key=key)
        deadline = time.monotonic() + settle_seconds
        while not _settled(step) and time.monotonic() < deadline:
            wait = max(1, min(POLL_SECONDS, math.ceil(deadline - time.monotonic())))
            step = self.client.run_action(self.id, step["step_id"], wait=wait)
        return step


class AsyncRunHandle:
    """``RunHandle`` for asyncio harnesses: the same methods, awaited."""

    def __init__(self, client: AsyncRamClient, run_id: str | uuid.UUID) -> None:
        self.client = client
        self.id = str(uuid.UUID(str(run_id)))

    def __repr__(self) -> str:
        return f"AsyncRunHandle({self.id!r})"

    async def get(self) -> dict[str, Any]:
        """The run now (status, ``required_action`` while paused, ``queue_position`` while queued)."""
        answer: dict[str, Any] = await self.client.run_get(self.id)
        return answer

    async def observe(self) -> dict[str, Any]:
        """What the page shows now (see ``RunHandle.observe``)."""
        answer: dict[str, Any] = await self.client.run_observe(self.id)
        return answer

    async def act(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        settle_seconds: float = DEFAULT_SETTLE_SECONDS,
    ) -> dict[str, Any]:
        """One tool call; answers its settled step (see ``RunHandle.act``)."""
        key = idempotency_key or new_idempotency_key(tool)
        step: dict[str, Any] = await self.client.run_act(self.id, tool, arguments, idempotency_key=key)
        deadline = time.monotonic() + settle_seconds
        while not _settled(step) and time.monotonic() < deadline:
            wait = max(1, min(POLL_SECONDS, math.ceil(deadline - time.monotonic())))
            step = await self.client.run_action(self.id, step["step_id"], wait=wait)
        return step
