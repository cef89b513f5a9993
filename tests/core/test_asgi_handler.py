"""Django over ASGI with one thread hop per request (core/asgi_handler.py): everything Django does
for a request runs in one pool thread, which keeps its database connection between requests."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.core import signals
from django.db import connections
from django.db.backends.signals import connection_created
from django.test import Client

from accounts.models import Account, Membership
from core.asgi_handler import KEY_REQUEST_SKIPS, SyncPathASGIHandler


async def call(
    app: Any, path: str, headers: dict[str, str] | None = None, method: str = "GET"
) -> tuple[int, dict[bytes, bytes], bytes]:
    """One request without a body through the ASGI app, as uvicorn would send it."""
    done = asyncio.Event()
    first = [True]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if first[0]:
            first[0] = False
            return {"type": "http.request", "body": b"", "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8000"), *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items())],
        "client": ("127.0.0.1", 5555),
        "server": ("127.0.0.1", 8000),
    }
    await app(scope, receive, send)
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], dict(start["headers"]), body


@pytest.fixture
def handler() -> Iterator[SyncPathASGIHandler]:
    app = SyncPathASGIHandler(threads=1)
    yield app
    # The pool thread's connection is closed in that thread, so the test database can go.
    app.pool.submit(connections.close_all).result()
    app.pool.shutdown()


@pytest.mark.django_db(transaction=True)
async def test_the_whole_request_runs_in_one_pool_thread(handler: SyncPathASGIHandler, runner_key: str) -> None:
    threads: list[str] = []

    def seen(**kwargs: Any) -> None:
        threads.append(threading.current_thread().name)

    signals.request_started.connect(seen)
    signals.request_finished.connect(seen)
    try:
        status, headers, body = await call(handler, "/api/computers", {"Authorization": f"Bearer {runner_key}"})
    finally:
        signals.request_started.disconnect(seen)
        signals.request_finished.disconnect(seen)
    assert status == 200 and body.startswith(b'{"computers"')
    assert headers[b"Cache-Control"] == b"no-store"  # the whole middleware chain ran
    assert len(threads) == 2 and threads[0] == threads[1] and threads[0].startswith("django-request")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("max_age", "connections_opened"), [(60, 1), (0, 4)])
async def test_a_pool_thread_keeps_its_connection_between_requests(
    handler: SyncPathASGIHandler, runner_key: str, max_age: int, connections_opened: int
) -> None:
    opened: list[str] = []

    def created(**kwargs: Any) -> None:
        opened.append(threading.current_thread().name)

    settings_dict = connections.settings["default"]
    before = settings_dict["CONN_MAX_AGE"]
    settings_dict["CONN_MAX_AGE"] = max_age
    connection_created.connect(created)
    try:
        for _ in range(4):
            status, _, _ = await call(handler, "/api/computers", {"Authorization": f"Bearer {runner_key}"})
            assert status == 200
    finally:
        connection_created.disconnect(created)
        settings_dict["CONN_MAX_AGE"] = before
    assert len(opened) == connections_opened


async def test_a_streaming_answer_is_sent_in_its_parts(handler: SyncPathASGIHandler, settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.core.streaming_urls"
    status, headers, body = await call(handler, "/stream")
    assert status == 200 and body == b"first,second"
    assert headers[b"Content-Type"] == b"text/plain"


async def test_a_failing_view_is_a_500_and_the_next_request_is_served(handler: SyncPathASGIHandler, settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.core.streaming_urls"
    settings.DEBUG = False
    status, _, body = await call(handler, "/fail")
    assert status == 500 and b"boom" not in body
    status, _, body = await call(handler, "/stream")
    assert status == 200 and body == b"first,second"


def _signed_in_cookie(account: Account) -> str:
    """The session cookie of a person of ``account`` signed in with a password."""
    user = User.objects.create_user(username="person", password="correct horse battery")
    Membership.objects.create(user=user, account=account)
    client = Client()
    client.force_login(user)
    connections.close_all()  # this thread's: the test database can go
    return f"sessionid={client.cookies['sessionid'].value}"


@pytest.mark.django_db(transaction=True)
async def test_an_api_request_with_a_key_never_reaches_the_session_of_its_cookies(
    handler: SyncPathASGIHandler, account: Account, settings: Any
) -> None:
    settings.ROOT_URLCONF = "tests.core.streaming_urls"
    cookie = await sync_to_async(_signed_in_cookie)(account)
    # Without the header the whole chain runs: the cookie's session signs the person in.
    status, _, body = await call(handler, "/api/who", {"Cookie": cookie})
    assert status == 200 and json.loads(body) == {"user": True, "session": True}
    # With it (whatever its value), the session is neither read nor reachable: an anonymous user.
    status, headers, body = await call(handler, "/api/who", {"Cookie": cookie, "Authorization": "Bearer not-a-key"})
    assert status == 200 and json.loads(body) == {"user": False, "session": False}
    assert b"Set-Cookie" not in headers
    # A page is never an API request: the header changes nothing there.
    status, _, body = await call(handler, "/page/who", {"Cookie": cookie, "Authorization": "Bearer not-a-key"})
    assert status == 200 and json.loads(body) == {"user": True, "session": True}


@pytest.mark.django_db(transaction=True)
async def test_a_page_post_with_a_key_header_is_still_checked_for_csrf(
    handler: SyncPathASGIHandler, account: Account, settings: Any
) -> None:
    settings.ROOT_URLCONF = "tests.core.streaming_urls"
    cookie = await sync_to_async(_signed_in_cookie)(account)
    status, _, _ = await call(handler, "/page/who", {"Cookie": cookie, "Authorization": "Bearer x"}, method="POST")
    assert status == 403


@pytest.mark.django_db(transaction=True)
async def test_an_api_key_answer_carries_the_same_security_headers_as_a_page(
    handler: SyncPathASGIHandler, runner_key: str
) -> None:
    _, keyed, _ = await call(handler, "/api/computers", {"Authorization": f"Bearer {runner_key}"})
    _, anonymous, _ = await call(handler, "/api/computers")
    wanted = [b"Cache-Control", b"Referrer-Policy", b"X-Frame-Options", b"X-Content-Type-Options", b"Content-Security-Policy"]
    assert {name: keyed.get(name) for name in wanted} == {name: anonymous.get(name) for name in wanted}
    assert all(keyed.get(name) for name in wanted if name in anonymous)


def test_the_key_chain_skips_only_what_it_lists() -> None:
    app = SyncPathASGIHandler(threads=1)
    try:
        kept = [type(m).__module__ + "." + type(m).__qualname__ for m in _chain(app.key_requests)]
        full = [type(m).__module__ + "." + type(m).__qualname__ for m in _chain(app)]
    finally:
        app.pool.shutdown()
    assert full == list(settings.MIDDLEWARE)
    assert [m for m in full if m not in KEY_REQUEST_SKIPS] == [m for m in kept if m != "core.middleware.AnonymousUserMiddleware"]
    assert "core.middleware.AnonymousUserMiddleware" in kept


def _chain(handler: Any) -> list[Any]:
    """The middleware instances of a handler's chain, outermost first."""
    found: list[Any] = []
    layer = handler._middleware_chain
    while True:
        instance = getattr(layer, "__wrapped__", layer)
        if not hasattr(instance, "get_response"):
            return found
        found.append(instance)
        layer = instance.get_response


@pytest.mark.django_db(transaction=True)
async def test_the_api_s_own_pages_answer_a_request_with_a_key_header(handler: SyncPathASGIHandler) -> None:
    """The two routes under /api/ that are not REST operations read no session either."""
    for path in ("/api/docs", "/api/openapi.json"):
        status, headers, _ = await call(handler, path, {"Authorization": "Bearer not-a-key"})
        assert status == 200 and b"Set-Cookie" not in headers, path
