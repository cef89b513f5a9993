"""The backend interface and what every backend shares (scrubbing, the session record).

How the executor obtains a browser for its computer: one small interface, four backends.

* ``local``: a Chromium the executor launches itself, every connection through
  RAM's egress proxy (executor/egress.py);
* ``cdp``: any Chromium DevTools WebSocket endpoint (a self-hosted Chromium with
  remote debugging, Browserless, steel-browser's own endpoint);
* ``steel``: a session created through Steel's REST API (Steel Cloud or a
  self-hosted steel-browser), connected over CDP, released when done;
* ``browserbase``: a session created through Browserbase's REST API, connected
  over CDP to its ``connectUrl``, released when done.

A vendor session belongs to the computer's *generation*, not to a run: the
person's login survives a pause and its continuation (a new run on the same
generation). It is released when the executor stops or the generation ends, and,
after a crash, at the next start (its id is kept on the Computer row).

Pages, tabs, dialogs and downloads inside the browser are the runtime's business;
this package only hands it a browser and a context.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from playwright.async_api import Browser, BrowserContext, Page, Playwright

from executor.contracts import BrowserSettings, ComputerSettings
from executor.login_solvers import NoSolver, Solver

CONNECT_TIMEOUT_MS = 15_000
VENDOR_TIMEOUT_SECONDS = 15.0


class BackendUnavailable(Exception):
    """The browser could not be obtained (an unreachable endpoint, a refused API key, not a browser).

    The message is safe to log and show: no URL query, key or token is ever in it.
    """


class EgressUnenforceable(BackendUnavailable):
    """RAM does not own this browser's network and the operator did not accept a partial policy."""


_URL = re.compile(r"\b(?:wss?|https?)://[^\s'\"<>]+", re.IGNORECASE)


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` without any secret and with every URL cut to scheme, host and path.

    Vendor connect URLs carry API keys and signing keys (``?apiKey=``, ``?signingKey=``,
    ``?token=``) and Playwright's errors echo the URL they failed on.
    """
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")

    def cut(match: re.Match[str]) -> str:
        url = match.group(0)
        url = url.split("?", 1)[0].split("#", 1)[0]
        return re.sub(r"//[^/@]*@", "//", url)

    return _URL.sub(cut, text)


@dataclass
class Session:
    """What a vendor handed out: its id and the CDP endpoint (secret-bearing, never logged)."""

    id: str
    connect_url: str
    # The vendor's captcha solver runs in this session; ``solver_off``: the vendor said it does not.
    solve_captcha: bool = False
    solver_off: bool = False


class BrowserBackend:
    """One computer's source of browsers."""

    name = "local"
    # True only where RAM launches the browser and its egress proxy carries every connection.
    owns_network = False
    # True where a new profile means a new browser (a new vendor session), not a new context.
    session_per_profile = False

    def __init__(self) -> None:
        self.session: Session | None = None
        self.ready_ms: int | None = None

    @property
    def session_id(self) -> str:
        return self.session.id if self.session is not None else ""

    async def start(self, playwright: Playwright, *, proxy_address: str) -> Browser:
        raise NotImplementedError

    async def new_context(self, browser: Browser, settings: ComputerSettings) -> BrowserContext:
        """A fresh profile (cookies, storage, cache) with the computer's settings (its viewport,
        locale, time zone and user agent)."""
        return await browser.new_context(
            **settings.context_options(),  # type: ignore[arg-type]
            device_scale_factor=1,
            accept_downloads=True,
            # Requests a service worker answers itself would not pass route-level egress checks.
            service_workers="allow" if self.owns_network else "block",
        )

    async def first_page(self, context: BrowserContext, settings: ComputerSettings) -> Page:
        page = context.pages[0] if context.pages else await context.new_page()
        width, height = settings.viewport_size
        await page.set_viewport_size({"width": width, "height": height})
        return page

    def solver(self, page: Page, browser: BrowserSettings) -> Solver:
        """What browser_login waits for on ``page`` (nothing unless a vendor solves captchas)."""
        return NoSolver()

    async def release(self) -> None:
        """Give back the vendor session (idempotent; nothing for a browser RAM launched)."""
        self.session = None

    async def release_leftover(self, session_id: str) -> None:
        """Release a session a crashed generation left behind (its id was on the Computer row)."""
        return None

    def secrets(self) -> tuple[str, ...]:
        return ()

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "owns_network": self.owns_network}
