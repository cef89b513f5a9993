"""HTTP sign-in prompts: a site's basic (or digest) auth challenge, held until someone answers.

Each page the executor adopts gets a CDP session of its own with the ``Fetch`` domain on for
every request and ``handleAuthRequests``: a request the browser pauses there is continued at
once (nothing else waits), and a site's challenge (``Fetch.authRequired``) keeps its request
pending as a ``Challenge`` the runtime lists with the dialogs (kind ``auth``). A person with
control answers it on ``/view`` (username and password) or the agent does with ``auth_answer``
(a Vault credential whose origins include exactly the challenge's origin); cancelling lets the
site's 401 answer through. Playwright's ``http_credentials`` cannot do this: it is fixed when
the context starts and answers every site alike.

A challenge names the origin that asked as the browser reports it (``scheme://host:port``,
never the request's path, query or userinfo) and the realm the site gave (its own text,
bounded and shown as such). A proxy's challenge is never shown to anyone: it is cancelled (a
computer's upstream proxy is answered by the egress proxy, never by the browser). The request
reached the site through the egress policy, so only an allowed destination can ask.

Only the page's own target is covered: a cross-site frame in a process of its own, a worker or
a popup's very first request sent before the executor adopted the popup get the browser's own
answer (no credentials: the site's 401). On a remote backend the egress guard's Playwright
routing (``egress.guard_context``) also intercepts every request and answers a challenge before
this session sees it: the navigation fails (``net::ERR_INVALID_AUTH_CREDENTIALS``), nothing waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from playwright.async_api import CDPSession, Page

from executor.login_guard import normal_origin

logger = logging.getLogger(__name__)

MAX_REALM_CHARS = 200
# Every request is paused (and continued at once): a challenge can come for any of them.
FETCH = {"patterns": [{"urlPattern": "*", "requestStage": "Request"}], "handleAuthRequests": True}


@dataclass(eq=False)
class Challenge:
    """One pending challenge: its request waits in the browser until ``answer``."""

    session: CDPSession
    request_id: str
    origin: str
    realm: str
    # The request is a document of the page's main frame (its navigation commits once answered).
    navigation: bool

    async def answer(self, credentials: tuple[str, str] | None) -> None:
        """Sign in with ``credentials`` (username, password), or cancel (the site's own 401 page)."""
        if credentials is None:
            response: dict[str, str] = {"response": "CancelAuth"}
        else:
            response = {"response": "ProvideCredentials", "username": credentials[0], "password": credentials[1]}
        await self.session.send(
            "Fetch.continueWithAuth", {"requestId": self.request_id, "authChallengeResponse": response}
        )


def realm_text(realm: object) -> str:
    """The site's realm as shown to people and the agent: printable, on one line, bounded."""
    text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in str(realm or ""))
    return " ".join(text.split())[:MAX_REALM_CHARS]


class AuthWatch:
    """The challenges of one page, over its own CDP session (``on_challenge`` gets each one)."""

    def __init__(self, page: Page, on_challenge: Callable[[Page, Challenge], None]) -> None:
        self.page = page
        self.on_challenge = on_challenge
        self.session: CDPSession | None = None
        self.main_frame_id = ""
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        session = await self.page.context.new_cdp_session(self.page)
        self.session = session
        tree = await session.send("Page.getFrameTree")
        self.main_frame_id = str(tree["frameTree"]["frame"]["id"])
        session.on("Fetch.requestPaused", self._paused)
        session.on("Fetch.authRequired", self._challenged)
        await session.send("Fetch.enable", FETCH)

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(_quietly(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _paused(self, params: dict[str, Any]) -> None:
        if self.session is not None:
            self._spawn(self.session.send("Fetch.continueRequest", {"requestId": params["requestId"]}))

    def _challenged(self, params: dict[str, Any]) -> None:
        session = self.session
        if session is None:
            return
        asked = params.get("authChallenge") or {}
        origin = normal_origin(str(asked.get("origin", "")))
        if asked.get("source") == "Proxy" or origin is None or self.page.is_closed():
            logger.info("an HTTP sign-in challenge of a proxy or an unclear origin was cancelled")
            self._spawn(Challenge(session, str(params["requestId"]), "", "", False).answer(None))
            return
        challenge = Challenge(
            session=session,
            request_id=str(params["requestId"]),
            origin=origin,
            realm=realm_text(asked.get("realm")),
            navigation=params.get("resourceType") == "Document" and params.get("frameId") == self.main_frame_id,
        )
        self.on_challenge(self.page, challenge)


async def _quietly(work: Any) -> None:
    # The page (and its session) may be gone: its requests went with it.
    with contextlib.suppress(Exception):
        await work
