"""The clock deadlines are measured on.

The gateway's session limit, the human grant and the agent lease, and the
``browser_login`` budget are deadlines on a monotonic clock. Code that keeps
one takes a ``Clock`` (the system's by default), so a test moves time with a
``ManualClock`` instead of sleeping. (Libraries that freeze wall-clock time do
not move ``time.monotonic`` or the event loop's clock.)
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that moves only when told to (for tests)."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("A clock does not go back.")
        self.now += seconds
