"""One way for a test to wait for something to become true: ``eventually`` polls a check until it
gives a truthy value and returns that value, or fails the test naming what it waited for."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from asgiref.sync import sync_to_async


def eventually[T](check: Callable[[], T], seconds: float = 10, *, interval: float = 0.05, what: str = "the condition") -> T:
    """The first truthy value ``check`` returns within ``seconds`` (checked every ``interval``);
    ``AssertionError`` when none did."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what} (last seen: {value!r})")
        time.sleep(interval)


async def eventually_async[T](
    check: Callable[[], T], seconds: float = 10, *, interval: float = 0.05, what: str = "the condition", thread: bool = False
) -> T:
    """``eventually`` for a test on an event loop; ``thread`` reads ``check`` in a thread (it may
    touch the database)."""
    read = sync_to_async(check, thread_sensitive=False) if thread else None
    deadline = time.monotonic() + seconds
    while True:
        value = await read() if read is not None else check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what} (last seen: {value!r})")
        await asyncio.sleep(interval)
