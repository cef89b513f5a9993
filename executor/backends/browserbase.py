"""``browserbase``: a session created through Browserbase's REST API.

The REST shapes (browserbase/sdk-python, ``resources/sessions/sessions.py`` and
``types/session_create_params.py``, ``session_update_params.py``, ``session_create_response.py``):

* ``POST {api}/v1/sessions`` with header ``X-BB-API-Key`` and a JSON body
  ``{"projectId"?, "browserSettings": {"solveCaptchas": bool, "viewport": {"width", "height"}},
  "timeout": s}`` answers ``{"id", "connectUrl", "status", ...}``; ``connectUrl`` is the CDP
  WebSocket and carries a signing key: it is never logged or shown;
* ``POST {api}/v1/sessions/{id}`` with ``{"status": "REQUEST_RELEASE", "projectId"?}`` releases it.

Browserbase's solver reports on the page's console (``browserbase-solving-started`` /
``-finished``); browser_login follows those signals on *this* session's page, over CDP.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
from playwright.async_api import Page

from executor.backends.base import VENDOR_TIMEOUT_SECONDS, BackendUnavailable, Session, scrub
from executor.backends.cdp import VendorBackend
from executor.contracts import VIEWPORT_HEIGHT, VIEWPORT_WIDTH, BrowserbaseOptions, BrowserSettings
from executor.login_solvers import BrowserbaseSolver, NoSolver, Solver, SolverNotConfigured

logger = logging.getLogger(__name__)


class BrowserbaseBackend(VendorBackend):
    name = "browserbase"

    def __init__(self, options: BrowserbaseOptions, *, api_key: str | None = None) -> None:
        super().__init__()
        self.options = options
        self.api_key = api_key or ""

    def secrets(self) -> tuple[str, ...]:
        secrets = [self.api_key] if self.api_key else []
        if self.session is not None:
            secrets.append(self.session.connect_url)
        return tuple(secrets)

    async def _call(self, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        if not self.api_key:
            raise BackendUnavailable("No Browserbase API key is stored for this account (Vault).")
        try:
            async with httpx.AsyncClient(timeout=VENDOR_TIMEOUT_SECONDS) as client:
                response = await client.post(
                    self.options.api_url.rstrip("/") + path, json=body, headers={"X-BB-API-Key": self.api_key}
                )
        except httpx.HTTPError as exc:
            raise BackendUnavailable(f"Browserbase could not be reached to {what} ({type(exc).__name__}).") from None
        if response.status_code in (401, 403):
            raise BackendUnavailable(f"Browserbase refused the API key ({response.status_code}) when asked to {what}.")
        if response.status_code >= 400:
            raise BackendUnavailable(f"Browserbase answered {response.status_code} when asked to {what}.")
        try:
            data = response.json()
        except ValueError:
            raise BackendUnavailable(f"Browserbase's answer to {what} was not JSON.") from None
        return data if isinstance(data, dict) else {}

    def _project(self) -> dict[str, str]:
        return {"projectId": self.options.project_id} if self.options.project_id else {}

    async def create_session(self) -> Session:
        body = {
            **self._project(),
            "browserSettings": {
                "solveCaptchas": self.options.solve_captchas,
                "viewport": {"width": VIEWPORT_WIDTH, "height": VIEWPORT_HEIGHT},
            },
            "timeout": self.options.session_timeout_s,
        }
        data = await self._call("/v1/sessions", body, "create a session")
        session_id, url = data.get("id"), data.get("connectUrl")
        if not isinstance(session_id, str) or not session_id or not isinstance(url, str) or not url:
            raise BackendUnavailable("Browserbase answered a session without an id or a connectUrl.")
        return Session(id=session_id, connect_url=url, solve_captcha=self.options.solve_captchas)

    def solver(self, page: Page, browser: BrowserSettings) -> Solver:
        # The solver is on by default: only an explicit ``solveCaptcha: false`` skips the wait.
        if browser.solveCaptcha is False or self.session is None:
            return NoSolver()
        if not self.session.solve_captcha:
            return SolverNotConfigured() if browser.solveCaptcha is True else NoSolver()
        return BrowserbaseSolver(page)

    async def release_leftover(self, session_id: str) -> None:
        try:
            await self._call(
                f"/v1/sessions/{session_id}", {**self._project(), "status": "REQUEST_RELEASE"}, "release a session"
            )
        except BackendUnavailable as exc:
            logger.warning("browserbase session not released: %s", scrub(str(exc), self.secrets()))
