"""The one wait helper of the tests (tests/support/waits.py)."""

from __future__ import annotations

import itertools

import pytest

from tests.support.waits import eventually, eventually_async


def test_eventually_returns_the_first_truthy_value() -> None:
    counter = itertools.count()
    assert eventually(lambda: next(counter) >= 3 and "ready", seconds=5, interval=0.001) == "ready"


def test_eventually_fails_naming_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match="the queue to empty"):
        eventually(lambda: [], seconds=0.05, interval=0.01, what="the queue to empty")


async def test_eventually_async_reads_in_a_thread_when_asked() -> None:
    counter = itertools.count()
    assert await eventually_async(lambda: next(counter) == 2, seconds=5, interval=0.001, thread=True) is True
    with pytest.raises(AssertionError, match="timed out"):
        await eventually_async(lambda: 0, seconds=0.05, interval=0.01)
