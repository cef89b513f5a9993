"""``steel``: a session created through Steel's REST API (Steel Cloud or a self-hosted steel-browser).

The REST shapes (steel-sdk, ``src/resources/sessions``; steel-browser ``api/src/modules/sessions``):

* ``POST {api}/v1/sessions`` with header ``steel-api-key`` and a JSON body
  ``{"solveCaptcha": bool, "timeout": ms, "dimensions": {"width", "height"}}``
  answers a Session ``{"id", "websocketUrl", "status", "solveCaptcha"?, ...}``;
* the CDP endpoint is the session's ``websocketUrl``, with ``apiKey`` and
  ``sessionId`` added on Steel Cloud (``wss://connect.steel.dev?apiKey=…&sessionId=…``);
* ``POST {api}/v1/sessions/{id}/release`` releases it;
* ``GET {api}/v1/sessions/{id}/captchas/status`` (Steel Cloud only) answers a list of
  ``{"pageId", "url", "isSolvingCaptcha", "tasks", ...}``: browser_login polls it for *this*
  session. A self-hosted steel-browser has no captcha solver: its sessions never report
  ``solveCaptcha: true``, so nothing is polled or waited for.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
from playwright.async_api import Page

from executor.backends.base import VENDOR_TIMEOUT_SECONDS, BackendUnavailable, Session, scrub
from executor.backends.cdp import VendorBackend, with_query
from executor.contracts import VIEWPORT_HEIGHT, VIEWPORT_WIDTH, BrowserSettings, SteelOptions
from executor.login_solvers import NoSolver, Solver, SolverNotConfigured, SteelSolver

logger = logging.getLogger(__name__)


class SteelBackend(VendorBackend):
    name = "steel"

    def __init__(self, options: SteelOptions, *, api_key: str | None = None) -> None:
        super().__init__()
        self.options = options
        self.api_key = api_key or ""

    def secrets(self) -> tuple[str, ...]:
        return (self.api_key,) if self.api_key else ()

    def _headers(self) -> dict[str, str]:
        return {"steel-api-key": self.api_key} if self.api_key else {}

    def _url(self, path: str) -> str:
        return self.options.api_url.rstrip("/") + path

    async def create_session(self) -> Session:
        body = {
            "solveCaptcha": self.options.solve_captcha,
            "timeout": self.options.session_timeout_ms,
            "dimensions": {"width": VIEWPORT_WIDTH, "height": VIEWPORT_HEIGHT},
        }
        data = await self._call("POST", "/v1/sessions", body, "create a session")
        session_id, ws = data.get("id"), data.get("websocketUrl")
        if not isinstance(session_id, str) or not session_id or not isinstance(ws, str) or not ws:
            raise BackendUnavailable("Steel answered a session without an id or a websocketUrl.")
        # Steel Cloud authenticates the CDP connection by the key on the URL; self-hosted needs none.
        url = with_query(ws, apiKey=self.api_key, sessionId=session_id) if self.api_key else ws
        # Steel Cloud answers ``solveCaptcha``; a self-hosted steel-browser (no solver) leaves it out.
        reported = data.get("solveCaptcha")
        return Session(id=session_id, connect_url=url, solve_captcha=reported is True, solver_off=reported is False)

    async def _call(self, method: str, path: str, body: dict[str, Any] | None, what: str) -> dict[str, Any]:
        try:
            async with httpx.AsyncClient(timeout=VENDOR_TIMEOUT_SECONDS) as client:
                response = await client.request(method, self._url(path), json=body, headers=self._headers())
        except httpx.HTTPError as exc:
            raise BackendUnavailable(f"Steel could not be reached to {what} ({type(exc).__name__}).") from None
        if response.status_code in (401, 403):
            raise BackendUnavailable(f"Steel refused the API key ({response.status_code}) when asked to {what}.")
        if response.status_code >= 400:
            raise BackendUnavailable(f"Steel answered {response.status_code} when asked to {what}.")
        try:
            data = response.json()
        except ValueError:
            raise BackendUnavailable(f"Steel's answer to {what} was not JSON.") from None
        return data if isinstance(data, dict) else {}

    def solver(self, page: Page, browser: BrowserSettings) -> Solver:
        if browser.solveCaptcha is True and self.session is not None and self.session.solver_off:
            return SolverNotConfigured()
        if browser.solveCaptcha is True and self.session is not None and self.session.solve_captcha:
            return SteelSolver(
                url=self._url(f"/v1/sessions/{self.session.id}/captchas/status"), headers=self._headers()
            )
        return NoSolver()

    async def release_leftover(self, session_id: str) -> None:
        try:
            await self._call("POST", f"/v1/sessions/{session_id}/release", {}, "release a session")
        except BackendUnavailable as exc:
            logger.warning("steel session not released: %s", scrub(str(exc), self.secrets()))
