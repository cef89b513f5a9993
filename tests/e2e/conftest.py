"""Browser tests: Chromium through Playwright (async API) against uvicorn on a
loopback port, with a real OpenBao; every log line, run event, database row
and Referer header is checked for the secrets a test registers."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections
from playwright.async_api import Browser, BrowserContext, Page, Request, async_playwright

from accounts.models import Account, Membership
from computers.models import Computer
from executor.runtime import CHROMIUM_ARGS, Executor  # the same launch flags as the computers
from runs.models import RunEvent
from tests.support.live import free_port, serve_asgi
from tests.support.screen import register, reset_executor, start_executor
from tests.support.site import Site, serve_site
from tests.support.tiers import live


async def orm[T](fn: Callable[[], T]) -> T:
    """Run database code outside the event loop, closing the thread's connection after."""

    def run() -> T:
        try:
            return fn()
        finally:
            connections.close_all()

    return await asyncio.to_thread(run)


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("authlib"):
            return  # the test's own authorization server (playing Google), not RAM
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken record is still captured
            text = str(record.msg)
        if record.exc_info:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        self.lines.append(f"{record.name}: {text}")


_LOGGERS = ("", "uvicorn", "uvicorn.access", "uvicorn.error", "django", "django.request", "axes")


@dataclass
class LeakGuard:
    """Secrets the test saw; checked against logs, events, every table and Referer headers."""

    secrets: set[str] = field(default_factory=set)
    referers: list[tuple[str, str]] = field(default_factory=list)
    origin: str = ""
    capture: _Capture = field(default_factory=_Capture)

    def watch(self, *values: str) -> None:
        self.secrets.update(v for v in values if v)

    def record_request(self, request: Request) -> None:
        referer = request.headers.get("referer")
        if referer:
            self.referers.append((request.url, referer))

    def database_text(self) -> str:
        chunks = []
        with connection.cursor() as cursor:
            for table in connection.introspection.table_names(cursor):
                cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608 - catalog names
                chunks.extend(repr(row) for row in cursor.fetchall())
        return "\n".join(chunks)

    def assert_clean(self) -> None:
        # Referrer-Policy same-origin: RAM's pages send a Referer only to RAM itself, never
        # to another origin; no Referer ever holds a fragment or a secret the test saw.
        assert self.origin
        leaving = [url for url, referer in self.referers if referer.startswith(self.origin) and not url.startswith(self.origin)]
        assert leaving == [], f"RAM's pages sent a Referer to another origin: {leaving}"
        assert not any("#" in referer for _, referer in self.referers), "a Referer carried a fragment"
        for secret in self.secrets:
            assert not any(secret in referer for _, referer in self.referers), "a secret appeared in a Referer"
        logs = "\n".join(self.capture.lines)
        events = "\n".join(str(e.data) for e in RunEvent.objects.all())
        database = self.database_text()
        for secret in self.secrets:
            assert secret not in logs, "a secret appeared in a log line"
            assert secret not in events, "a secret appeared in a run event"
            assert secret not in database, "a secret appeared in the database"


@pytest.fixture
def leak_guard() -> Iterator[LeakGuard]:
    guard = LeakGuard()
    root = logging.getLogger()
    previous = root.level
    root.setLevel(logging.DEBUG)
    for name in _LOGGERS:
        logging.getLogger(name).addHandler(guard.capture)
    try:
        yield guard
    finally:
        for name in _LOGGERS:
            logging.getLogger(name).removeHandler(guard.capture)
        root.setLevel(previous)
    guard.assert_clean()
    assert guard.capture.lines, "the log capture saw nothing at all"


@pytest.fixture
@live
def human_origin(transactional_db: None, settings: Any, leak_guard: LeakGuard) -> Iterator[str]:
    """uvicorn with access logs on, RAM_PUBLIC_ORIGIN set to it; log lines go to the leak guard."""
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    settings.RAM_PUBLIC_ORIGIN = origin
    settings.CSRF_TRUSTED_ORIGINS = [origin]
    leak_guard.origin = origin
    with serve_asgi(port=port, log_level="info", access_log=True):
        for name in ("uvicorn", "uvicorn.access", "uvicorn.error"):
            logging.getLogger(name).addHandler(leak_guard.capture)
        yield origin


@pytest.fixture
@live
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
@live
async def page(browser: Browser, leak_guard: LeakGuard) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 420, "height": 860}, device_scale_factor=1)
    page = await context.new_page()
    page.on("request", leak_guard.record_request)
    try:
        yield page
    finally:
        await context.close()


async def screenshot(page: Page, name: str) -> None:
    """A picture of a page into RAM_SCREENSHOTS_DIR when set (``make screenshots``); the person's pages come from test_screenshots."""
    folder = os.environ.get("RAM_SCREENSHOTS_DIR", "")
    if folder:
        await asyncio.to_thread(Path(folder).mkdir, parents=True, exist_ok=True)
        await page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


async def sign_in(page: Page, username: str, password: str) -> None:
    """On the login page: type the credentials and submit."""
    await page.get_by_label("Username").fill(username)
    await page.get_by_label("Password").fill(password)
    async with page.expect_navigation():
        await page.get_by_role("button", name="Sign in").click()


# --- The /view journeys: the computer screen-1, the person's desktop and phone, the site it shows.


@pytest.fixture(scope="module")
def view_executor() -> Iterator[Executor]:
    thread = start_executor("screen-1")
    yield thread.executor
    thread.stop()


@pytest.fixture
async def desktop(browser: Browser) -> AsyncIterator[BrowserContext]:
    context = await browser.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=1)
    try:
        yield context
    finally:
        await context.close()


@pytest.fixture
async def phone(browser: Browser) -> AsyncIterator[BrowserContext]:
    context = await browser.new_context(
        viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True, has_touch=True
    )
    try:
        yield context
    finally:
        await context.close()


@pytest.fixture
def site(allow_egress: Callable[[str], None]) -> Iterator[Site]:
    with serve_site() as served:
        allow_egress(served.origin)
        yield served


async def ana_at_her_desk(leak_guard: LeakGuard, executor: Executor, password: str, **page: str) -> Any:
    """Ana's account (returned), her password sign-in and the computer ``screen-1`` on ``executor``,
    registered and reset (to ``page["html"]`` when given)."""
    leak_guard.watch(password)

    def setup() -> Any:
        account = Account.objects.create(name="Acme")
        user = User.objects.create_user(username="ana", password=password)
        Membership.objects.create(user=user, account=account)
        Computer.objects.create(id="screen-1", account=account, name="Office PC")
        register(executor)
        return account

    account = await orm(setup)
    reset_executor(executor, **page)
    return account
