"""browser_login's one end-to-end budget, and how a login stops short of an answer."""

from __future__ import annotations

from core.clock import SYSTEM_CLOCK, Clock

# Kept for the diagnostic capture of a login that ran out of time: at most this much, a quarter of a short budget.
CAPTURE_RESERVE_SECONDS = 4.0


class Budget:
    """One end-to-end deadline on ``clock`` (the system's monotonic clock unless a test moves its own)."""

    def __init__(self, seconds: float, *, clock: Clock = SYSTEM_CLOCK, start: float | None = None) -> None:
        self.clock = clock
        self.deadline = (clock.monotonic() if start is None else start) + seconds

    def before(self, seconds: float) -> Budget:
        """A budget on the same clock that ends ``seconds`` earlier."""
        return Budget(self.deadline - seconds - self.clock.monotonic(), clock=self.clock)

    def capture_reserve(self) -> float:
        """The part kept for a diagnostic capture: a quarter of what is left, at most ``CAPTURE_RESERVE_SECONDS``."""
        return min(CAPTURE_RESERVE_SECONDS, self.left() / 4)

    def left(self) -> float:
        return max(0.0, self.deadline - self.clock.monotonic())

    def ms(self, cap: float | None = None) -> float:
        left = self.left() * 1000
        return max(1.0, min(left, cap) if cap is not None else left)

    @property
    def spent(self) -> bool:
        return self.left() <= 0


class OutOfBudget(Exception):
    pass


class NotCompleted(Exception):
    """The login stopped with one of ``LOGIN_CODES`` (``what``: what happened, for the agent)."""

    def __init__(self, code: str, what: str, *, on_page: bool = True) -> None:
        super().__init__(code)
        self.code = code
        self.what = what
        # Whether the page shows something worth a diagnostic capture.
        self.on_page = on_page
