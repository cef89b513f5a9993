"""The captcha solvers browser_login waits for: only a managed browser that solves, on that very
session (Steel's captcha status API, Browserbase's console signals); ``local`` and ``cdp`` wait
for nothing and query nothing. The backend picks the solver (executor/backends/)."""

from __future__ import annotations

import asyncio
import logging
import weakref

import httpx
from playwright.async_api import ConsoleMessage, Frame, Page

from executor.login_budget import Budget

logger = logging.getLogger(__name__)


class NoSolver:
    """Self-hosted browsers, or managed ones without solving: nothing to wait for."""

    async def solving(self) -> bool:
        return False

    def close(self) -> None:
        return None


class SteelSolver:
    """Steel's captcha status API for one session: ``GET /v1/sessions/{id}/captchas/status``.

    The executor's steel backend builds it for the session it created (executor/backends/steel.py).
    """

    def __init__(self, *, url: str, headers: dict[str, str]) -> None:
        self.url = url
        self.headers = headers

    async def solving(self) -> bool:
        try:
            async with httpx.AsyncClient(timeout=5.0) as client:
                response = await client.get(self.url, headers=self.headers)
            response.raise_for_status()
            data = response.json()
        except (httpx.HTTPError, ValueError):
            # Unknown is treated as still solving: a password attempt is never spent blind.
            logger.warning("Steel captcha status unavailable; waiting")
            return True
        pages = data if isinstance(data, list) else data.get("pages", []) if isinstance(data, dict) else []
        return any(isinstance(p, dict) and p.get("isSolvingCaptcha") for p in pages)

    def close(self) -> None:
        return None


BROWSERBASE_STARTED = "browserbase-solving-started"
BROWSERBASE_FINISHED = "browserbase-solving-finished"


class ConsoleWatch:
    """Tracks Browserbase's solver signals on one page for its whole life."""

    def __init__(self, page: Page) -> None:
        self.active = False
        page.on("console", self.on_console)
        # A new document starts with no challenge being solved.
        page.on("framenavigated", lambda frame: self._navigated(page, frame))

    def on_console(self, message: ConsoleMessage) -> None:
        text = message.text.strip()
        if text == BROWSERBASE_STARTED:
            self.active = True
        elif text == BROWSERBASE_FINISHED:
            self.active = False

    def _navigated(self, page: Page, frame: Frame) -> None:
        if frame == page.main_frame:
            self.active = False


_WATCHES: weakref.WeakKeyDictionary[Page, ConsoleWatch] = weakref.WeakKeyDictionary()


def watch_console(page: Page) -> ConsoleWatch:
    """Start watching a page's console (the runtime does this when it opens the page)."""
    if page not in _WATCHES:
        _WATCHES[page] = ConsoleWatch(page)
    return _WATCHES[page]


class BrowserbaseSolver:
    """Browserbase's solver reports through the page console."""

    def __init__(self, page: Page) -> None:
        self.watch = watch_console(page)

    async def solving(self) -> bool:
        return self.watch.active

    def close(self) -> None:
        return None


class SolverNotConfigured(NoSolver):
    """The run asks for captcha solving (``solveCaptcha: true``) and the computer's managed
    session was created with its provider's solver off: browser_login stops before typing."""


Solver = NoSolver | SteelSolver | BrowserbaseSolver


async def wait_for_solver(solver: Solver, budget: Budget, settle: float = 0.0) -> bool:
    """True once the solver is not solving; False if the budget ran out first."""
    if isinstance(solver, NoSolver):
        return True
    if settle:
        await asyncio.sleep(min(settle, budget.left()))
    while await solver.solving():
        if budget.left() < 0.25:
            return False
        await asyncio.sleep(min(0.25, budget.left()))
    return True
