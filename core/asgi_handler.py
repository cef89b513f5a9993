"""Django over ASGI with a consistently sync request path: one hop per request.

Every view, middleware and ORM call of this project is sync. Django's own ASGI handler
runs them async-first: the request-started signal, the outer middleware, the core
handler and the view each cross between the event loop and a thread (five crossings a
request, ``make bench``'s profile), and each request gets a fresh thread and therefore a
fresh database connection. Here the event loop only reads the body and writes the
response; everything Django does for the request — signals, the whole middleware chain,
the view, closing the response — runs in one call on a small fixed pool of threads, so a
thread keeps its database connection from one request to the next (``CONN_MAX_AGE``).

Streaming responses are supported (their chunks are sent from the thread); there are none
in this project's routes today.

No request waits in a pool thread: a view that must wait (an external action's step) answers a
``core.waits.LaterResponse``; the thread goes back to the pool and the wait happens on the event
loop, with short hops into the pool for its reads (``hop``), until the real answer is sent. The
client's ``http.disconnect`` cancels such a wait. Why this subclass is kept rather than Django's
stock handler: ``docs/architecture.md`` ("How a request waits").

A request to ``/api/`` that carries an ``Authorization`` header goes through a shorter middleware
chain (``KEY_REQUEST_SKIPS``): every API route authenticates such a request by that header alone,
so the session, CSRF, sign-in, message and lockout middleware have nothing to do for it; what
they would have guarded, and why it still holds: ``docs/security.md`` ("API-key requests").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import django
from asgiref.sync import ThreadSensitiveContext
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.db import close_old_connections, connections
from django.http.response import HttpResponseBase
from django.urls import set_script_prefix

from core.waits import LATER_SUPPORTED, LaterResponse, merged

T = TypeVar("T")

logger = logging.getLogger(__name__)

# The middleware an API-key request skips, and why it has nothing to do for one (docs/security.md).
KEY_REQUEST_SKIPS = {
    "django.contrib.sessions.middleware.SessionMiddleware": "no API route reads a session when the header is sent",
    "django.middleware.csrf.CsrfViewMiddleware": "a header, not a cookie, authenticates it; API views are csrf_exempt",
    "django.contrib.auth.middleware.AuthenticationMiddleware": "replaced: request.user is anonymous (no session)",
    "accounts.middleware.ActiveAccountMiddleware": "it lets such requests through; the key's account is checked",
    "django.contrib.messages.middleware.MessageMiddleware": "no API route adds a message",
    "axes.middleware.AxesMiddleware": "it answers password sign-in lockouts; a key is never a password sign-in",
}
KEY_REQUEST_USER = "core.middleware.AnonymousUserMiddleware"


def key_request_middleware(middleware: list[str]) -> list[str]:
    """``middleware`` without ``KEY_REQUEST_SKIPS``, with an anonymous ``request.user`` where the
    sign-in middleware was (anything else, a deployment's own middleware included, is kept)."""
    return [
        KEY_REQUEST_USER if path == "django.contrib.auth.middleware.AuthenticationMiddleware" else path
        for path in middleware
        if path not in KEY_REQUEST_SKIPS or path == "django.contrib.auth.middleware.AuthenticationMiddleware"
    ]


def is_key_request(path_info: str, meta: dict[str, Any]) -> bool:
    """An API request that carries an ``Authorization`` header (of any value: a wrong one is refused
    by the route, never taken for a session)."""
    return path_info.startswith("/api/") and "HTTP_AUTHORIZATION" in meta


class _KeyRequestHandler(BaseHandler):
    """Django's own handler with ``key_request_middleware(settings.MIDDLEWARE)``."""

    def __init__(self) -> None:
        full = settings.MIDDLEWARE
        # Django's loader reads the setting; it is swapped only while this chain is built (once, at
        # startup, before any request), so the chain is Django's own in every other respect.
        settings.MIDDLEWARE = key_request_middleware(list(full))
        try:
            self.load_middleware(is_async=False)
        finally:
            settings.MIDDLEWARE = full


class SyncPathASGIHandler(ASGIHandler):
    """``get_asgi_application()`` with the request handled in one thread call (see the module)."""

    def __init__(self, threads: int | None = None) -> None:
        super(ASGIHandler, self).__init__()  # BaseHandler: no async middleware chain
        self.load_middleware(is_async=False)
        self.key_requests = _KeyRequestHandler()
        self.pool = ThreadPoolExecutor(
            max_workers=threads or int(settings.RAM_WEB_THREADS), thread_name_prefix="django-request"
        )

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        # Nothing in the request path is thread-sensitive async code; the context is kept
        # so that a sync_to_async call made by a view (there is none) stays in its thread.
        async with ThreadSensitiveContext():
            await self.handle(scope, receive, send)

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        loop = asyncio.get_running_loop()
        try:
            start, chunks = await loop.run_in_executor(self.pool, self._respond, scope, body_file, send, loop)
        finally:
            body_file.close()
        if isinstance(start, LaterResponse):
            # The view's thread is back in the pool; the wait happens here, on the event loop.
            produced = await self._produce(start, receive)
            if produced is None:
                return  # the client left while waiting
            start, chunks = produced
        elif start is None:
            return  # a streaming response was sent from the thread
        await send(start)
        for chunk, last in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": not last})

    async def hop(self, fn: Callable[[], T]) -> T:
        """``fn`` in a pool thread, with the connection hygiene of a request (a long wait's reads)."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, _in_request_thread, fn)

    async def _produce(
        self, later: LaterResponse, receive: Any
    ) -> tuple[dict[str, Any], list[tuple[bytes, bool]]] | None:
        """Await a long wait's answer; None when the client disconnected first (the wait is cancelled)."""
        produce = asyncio.ensure_future(later.produce(self.hop))
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({produce, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not produce.done():
                produce.cancel()
        if not produce.done() or produce.cancelled():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await produce  # let its cleanup (the wait's slot) run
            return None
        response = merged(later, produce.result())
        start = {"type": "http.response.start", "status": response.status_code, "headers": _headers(response)}
        return start, [(bytes(chunk), last) for chunk, last in self.chunk_bytes(response.content)]

    def _respond(
        self, scope: dict[str, Any], body_file: Any, send: Any, loop: asyncio.AbstractEventLoop
    ) -> tuple[dict[str, Any] | LaterResponse | None, list[tuple[bytes, bool]]]:
        """In a pool thread: the whole Django request, from request_started to request_finished."""
        set_script_prefix(self._script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        _trust_recent_connections()
        response: Any = None
        try:
            request, response = self.create_request(scope, body_file)
            if request is not None:
                request.META[LATER_SUPPORTED] = True
                chain = self.key_requests if is_key_request(request.path_info, request.META) else self
                response = chain.get_response(request)
                response._handler_class = self.__class__
            if isinstance(response, LaterResponse):
                return response, []
            start = {"type": "http.response.start", "status": response.status_code, "headers": _headers(response)}
            if response.streaming:

                def send_now(message: dict[str, Any]) -> None:
                    asyncio.run_coroutine_threadsafe(send(message), loop).result()

                send_now(start)
                for part in response:
                    for chunk, _ in self.chunk_bytes(part):
                        send_now({"type": "http.response.body", "body": chunk, "more_body": True})
                send_now({"type": "http.response.body"})
                return None, []
            return start, [(bytes(chunk), last) for chunk, last in self.chunk_bytes(response.content)]
        finally:
            if response is not None:
                response.close()  # sends request_finished: this thread's connection is kept or closed here
            else:
                signals.request_finished.send(sender=self.__class__)
            _thread.answered_at = time.monotonic()

    @staticmethod
    def _script_prefix(scope: dict[str, Any]) -> str:
        return str(get_script_prefix(scope))


# A connection this thread answered a request with less than this long ago is not health-checked
# again (CONN_HEALTH_CHECKS): the check is a round trip of its own, half of a run read's on
# PostgreSQL. A connection that breaks within it fails that one request, which closes it (Django
# closes a connection whose error it cannot recover from at request_finished).
HEALTH_CHECK_AFTER_IDLE_SECONDS = 1.0
_thread = threading.local()


def _trust_recent_connections() -> None:
    if time.monotonic() - getattr(_thread, "answered_at", float("-inf")) >= HEALTH_CHECK_AFTER_IDLE_SECONDS:
        return
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None:
            conn.health_check_done = True  # type: ignore[attr-defined]  # Django's own flag, not in the stubs


def _in_request_thread[T](fn: Callable[[], T]) -> T:
    close_old_connections()
    try:
        return fn()
    finally:
        close_old_connections()


async def _disconnected(receive: Any) -> None:
    """Returns when the client disconnects (the body was read: nothing else may arrive)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _headers(response: HttpResponseBase) -> list[tuple[bytes, bytes]]:
    headers = []
    for header, value in response.items():
        name = header.encode("ascii") if isinstance(header, str) else header
        data = value.encode("latin1") if isinstance(value, str) else value
        headers.append((bytes(name), bytes(data)))
    for cookie in response.cookies.values():
        headers.append((b"Set-Cookie", cookie.OutputString().encode("ascii")))
    return headers


def get_sync_path_application() -> SyncPathASGIHandler:
    """Like ``django.core.asgi.get_asgi_application`` (sets Django up) with the one-hop handler."""
    django.setup(set_prefix=False)
    return SyncPathASGIHandler()
