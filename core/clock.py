"""The clock deadlines are decided on.

The gateway's session limit, the human grant and the agent lease, the
``browser_login`` budget, a run's slice and the API key cache's bound are
deadlines on the monotonic clock (``monotonic``); a step's age, a run's idle
time and a long wait's expiry are compared with stored times on the wall clock
(``wall``, an aware UTC datetime, as the framework's ``timezone.now`` gives).
Code that decides one reads a ``Clock`` (the system's by default), so a test
moves time with a ``ManualClock`` instead of sleeping. (Libraries that freeze
wall-clock time do not move ``time.monotonic`` or the event loop's clock.)
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...
    def wall(self) -> datetime: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> datetime:
        return datetime.now(tz=UTC)


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that moves only when told to (for tests)."""

    def __init__(self, start: float = 1_000.0, wall: datetime | None = None) -> None:
        self.now = start
        self._start = start
        # The wall clock starts at the real time unless told otherwise (stored rows are compared with it).
        self._wall = wall or datetime.now(tz=UTC)

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return self._wall + timedelta(seconds=self.now - self._start)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("A clock does not go back.")
        self.now += seconds
