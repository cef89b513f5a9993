"""browser_login's one end-to-end budget, spent on a clock the test moves."""

from __future__ import annotations

from core.clock import ManualClock
from executor.login import Budget


def test_the_budget_is_spent_on_its_clock() -> None:
    clock = ManualClock()
    budget = Budget(120, clock=clock)
    assert budget.left() == 120 and not budget.spent
    clock.advance(119.5)
    assert budget.ms() == 500
    assert budget.ms(cap=200) == 200
    clock.advance(0.5)
    assert budget.spent and budget.left() == 0
    # A wait is never asked for less than a millisecond (Playwright's 0 means "no limit").
    assert budget.ms() == 1.0
