"""How a waiting request learns that what it waits for ended (core/waits.py): a publish in its own
process, the channel layer's group from another process (Redis), or its own re-check.

Each wait below has a re-check interval longer than its whole wait, unless the re-check is what is
tested: it returns True only if the way under test woke it (otherwise it gives up and returns False).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings as django_settings

from core import waits


async def hop(fn: Callable[[], Any]) -> Any:
    return await asyncio.to_thread(fn)


class Ended:
    """What a waiter checks; ``checked`` once it checked (its subscription is made before its first check)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.checks = 0

    def __call__(self) -> bool:
        self.checks += 1
        return self.event.is_set()

    async def checked(self) -> None:
        for _ in range(3000):
            if self.checks:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the waiter never checked")


@pytest.fixture
def in_memory_layer(settings: Any) -> None:
    """The embedded default's channel layer, which reaches no other process."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


def test_a_publish_from_another_thread_of_the_process_wakes_the_waiter(in_memory_layer: None) -> None:
    ended = Ended()

    def end() -> None:  # what the thread running an action's tool does when it settles the step
        ended.event.set()
        waits.publish("ram.test.local")

    async def scenario() -> bool:
        waiting = asyncio.create_task(waits.wait_until("ram.test.local", done=ended, hop=hop, seconds=20, recheck=60))
        await ended.checked()
        threading.Thread(target=end).start()
        return await waiting

    assert asyncio.run(scenario()) is True
    assert waits.waiting_count() == 0


def test_an_end_no_push_reaches_is_found_by_the_waiters_own_recheck(in_memory_layer: None) -> None:
    ended = Ended()

    async def scenario() -> bool:
        waiting = asyncio.create_task(
            waits.wait_until("ram.test.recheck", done=ended, hop=hop, seconds=20, recheck=0.05)
        )
        await ended.checked()
        ended.event.set()  # ended in another process: nothing is published here
        return await waiting

    assert asyncio.run(scenario()) is True


def test_a_wait_that_nothing_ends_returns_false_when_its_time_is_over(in_memory_layer: None) -> None:
    assert asyncio.run(waits.wait_until("ram.test.never", done=lambda: False, hop=hop, seconds=0.2)) is False
    assert waits.waiting_count() == 0


@pytest.mark.live
@pytest.mark.skipif(not django_settings.REDIS_URL, reason="the Redis channel layer needs REDIS_URL")
def test_an_end_published_by_another_process_arrives_through_the_channel_layer() -> None:
    ended = Ended()

    def end_elsewhere() -> None:
        # Another process's publish reaches this one only through the group (not this process's waiters).
        ended.event.set()
        async_to_sync(get_channel_layer().group_send)("ram.test.remote", {"type": "ram.ended"})

    async def scenario() -> bool:
        waiting = asyncio.create_task(waits.wait_until("ram.test.remote", done=ended, hop=hop, seconds=20, recheck=60))
        await ended.checked()  # subscribed to the group: the first check comes after group_add
        threading.Thread(target=end_elsewhere).start()
        return await waiting

    assert asyncio.run(scenario()) is True
