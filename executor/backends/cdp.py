"""``cdp``: any Chromium DevTools endpoint, and the CDP connection every remote backend shares."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from playwright.async_api import Browser, Playwright

from executor.backends.base import CONNECT_TIMEOUT_MS, BackendUnavailable, BrowserBackend, Session, scrub
from executor.contracts import CdpOptions, ComputerSettings


def with_query(url: str, **params: str) -> str:
    """``url`` with ``params`` added to its query (values URL-encoded)."""
    parts = urlsplit(url)
    extra = urlencode({k: v for k, v in params.items() if v})
    query = "&".join(q for q in (parts.query, extra) if q)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


class RemoteBackend(BrowserBackend):
    """A browser RAM does not launch: reached over CDP, its network is not RAM's."""

    owns_network = False

    async def connect(self, playwright: Playwright, url: str) -> Browser:
        try:
            browser = await playwright.chromium.connect_over_cdp(url, timeout=CONNECT_TIMEOUT_MS)
        except Exception as exc:  # a refused or dead endpoint, or one that is not a browser
            raise BackendUnavailable(
                f"The {self.name} browser could not be reached over CDP: {scrub(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, self.secrets())}"
            ) from None
        return browser


class CdpBackend(RemoteBackend):
    name = "cdp"

    def __init__(self, options: CdpOptions, *, token: str | None = None) -> None:
        super().__init__()
        self.options = options
        self.token = token or ""

    def secrets(self) -> tuple[str, ...]:
        return (self.token,) if self.token else ()

    async def start(self, playwright: Playwright, *, proxy_address: str) -> Browser:
        started = time.monotonic()
        url = with_query(self.options.endpoint, token=self.token) if self.token else self.options.endpoint
        browser = await self.connect(playwright, url)
        self.ready_ms = int((time.monotonic() - started) * 1000)
        return browser


class VendorBackend(RemoteBackend):
    """A session created through a vendor's REST API, reached over CDP, released when done."""

    session_per_profile = True

    async def create_session(self) -> Session:
        raise NotImplementedError

    async def start(self, playwright: Playwright, *, proxy_address: str) -> Browser:
        started = time.monotonic()
        self.session = await self.create_session()
        try:
            browser = await self.connect(playwright, self.session.connect_url)
        except BackendUnavailable:
            await self.release()
            raise
        self.ready_ms = int((time.monotonic() - started) * 1000)
        return browser

    async def new_context(self, browser: Browser, settings: ComputerSettings) -> Any:
        # A vendor session is one profile: its default context (a new profile is a new session);
        # only the viewport of the computer's settings applies there (set on its first page).
        return browser.contexts[0] if browser.contexts else await browser.new_context()

    async def release(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            await self.release_leftover(session.id)
