"""Long waits that hold no thread: a request waits on the event loop for something to end.

Django runs on a small fixed pool of threads (``core.asgi_handler``). A request that must wait
for something another thread or process ends (an external action's step) does its database work
in its pool thread, then answers a ``LaterResponse``: the handler gives the thread back and awaits
the response's ``produce`` on the event loop, which does its own short database reads through
``hop`` (a call in a pool thread) and builds the real answer.

How a waiter learns that the thing ended (``wait_until``):

- the code that ends it calls ``publish(topic)`` after its commit. In this process the waiters'
  events are set through their loop (any thread may publish). Across processes the message goes
  to the channel layer's group of that name when the layer reaches other processes (Redis in
  production); the in-memory layer of the embedded default does not;
- a waiter also re-checks the thing itself every ``recheck`` seconds (``done``, one short thread
  hop): that is how it learns of an end published where its push does not reach — the embedded
  default's worker process, another web process without Redis — or of a message lost.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.http import HttpRequest, HttpResponse

logger = logging.getLogger(__name__)

Hop = Callable[[Callable[[], Any]], Awaitable[Any]]

# The request META key the handler sets when it can await a LaterResponse.
LATER_SUPPORTED = "ram.later_responses"

# How often a waiter re-checks by itself: often where no push reaches from other processes (the
# embedded default: each re-check is one indexed read of one row, about 0.3 ms of CPU), rarely
# where the channel layer carries the end from any process (a lost message costs this much delay).
RECHECK_SECONDS_LOCAL = 0.5
RECHECK_SECONDS_PUSHED = 5.0

_waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
_lock = threading.Lock()


def _cross_process_layer() -> Any:
    """The channel layer if it reaches other processes, else None."""
    layer = get_channel_layer()
    return None if layer is None or isinstance(layer, InMemoryChannelLayer) else layer


def publish(topic: str) -> None:
    """Wake every waiter of ``topic`` (call it from sync code, after the commit that ended it)."""
    with _lock:
        targets = list(_waiters.get(topic, ()))
    for loop, event in targets:
        try:
            loop.call_soon_threadsafe(event.set)
        except RuntimeError:
            pass  # that loop closed: its waiter is gone
    layer = _cross_process_layer()
    if layer is not None:
        try:
            async_to_sync(layer.group_send)(topic, {"type": "ram.ended"})
        except Exception:
            # The waiters re-check by themselves (RECHECK_SECONDS_PUSHED): a lost push only delays them.
            logger.warning("Could not publish %s to the channel layer.", topic, exc_info=True)


async def wait_until(
    topic: str, *, done: Callable[[], bool], hop: Hop, seconds: float, recheck: float | None = None
) -> bool:
    """Wait on the event loop until ``done()`` (sync, run through ``hop``) is true or ``seconds``
    seconds passed; True when it is done. No thread is held between the checks."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    event = asyncio.Event()
    entry = (loop, event)
    with _lock:
        _waiters.setdefault(topic, set()).add(entry)
    layer = _cross_process_layer()
    channel: str | None = None
    listener: asyncio.Task[None] | None = None
    if layer is not None:
        try:
            channel = await layer.new_channel()
            await layer.group_add(topic, channel)
            listener = asyncio.create_task(_listen(layer, channel, event))
        except Exception:
            logger.warning("Could not subscribe to %s; re-checking by itself.", topic, exc_info=True)
            layer = None
    interval = (
        recheck if recheck is not None else (RECHECK_SECONDS_PUSHED if layer is not None else RECHECK_SECONDS_LOCAL)
    )
    try:
        # The first check comes after the subscription: an end published in between is not missed.
        while True:
            if await hop(done):
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(event.wait(), min(interval, remaining))
            except TimeoutError:
                pass
            event.clear()
    finally:
        with _lock:
            waiting = _waiters.get(topic)
            if waiting is not None:
                waiting.discard(entry)
                if not waiting:
                    del _waiters[topic]
        if listener is not None:
            listener.cancel()
        if layer is not None and channel is not None:
            try:
                await layer.group_discard(topic, channel)
            except Exception:
                logger.info("Could not leave %s (the group expires by itself).", topic, exc_info=True)


async def _listen(layer: Any, channel: str, event: asyncio.Event) -> None:
    try:
        while True:
            await layer.receive(channel)
            event.set()
    except asyncio.CancelledError:
        raise
    except Exception:
        logger.info("The channel layer stopped delivering to %s; re-checking by itself.", channel, exc_info=True)


def waiting_count() -> int:
    """Waiters of this process (for tests and metrics)."""
    with _lock:
        return sum(len(w) for w in _waiters.values())


# --- The REST edge ----------------------------------------------------------


class LaterResponse(HttpResponse):
    """An answer that is produced after a wait on the event loop (``respond_later``).

    It passes through the middleware like any response (their headers are kept); the handler then
    awaits ``produce(hop)`` with no thread held and sends the real answer's status and body.
    """

    def __init__(self, produce: Callable[[Hop], Awaitable[HttpResponse]]) -> None:
        super().__init__(status=202, content_type="application/json")
        self.produce = produce


def respond_later(request: HttpRequest, produce: Callable[[Hop], Awaitable[HttpResponse]]) -> HttpResponse:
    """The answer of a view that must wait: a ``LaterResponse`` under the project's ASGI handler;
    elsewhere (Django's test client, a plain WSGI server) the wait runs here, in the request's thread."""
    if request.META.get(LATER_SUPPORTED):
        return LaterResponse(produce)
    return async_to_sync(produce)(_here)


async def _here[T](fn: Callable[[], T]) -> T:
    """A hop back to the thread ``async_to_sync`` was called from (the request's own)."""
    return await sync_to_async(fn, thread_sensitive=True)()


def merged(placeholder: HttpResponse, final: HttpResponse) -> HttpResponse:
    """``final``'s status, headers and body over the headers the middleware gave ``placeholder``."""
    for header, value in final.items():
        placeholder[header] = value
    placeholder.status_code = final.status_code
    placeholder.reason_phrase = final.reason_phrase
    placeholder.content = final.content
    if "Content-Length" in placeholder:
        placeholder["Content-Length"] = str(len(placeholder.content))
    return placeholder
