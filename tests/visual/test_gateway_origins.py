"""Which Origin may use a ticket (RAM_VISUAL_TICKET_ORIGINS): a ticket a runner key made may
come from a listed origin exactly (a WebView app's local page) or with no Origin (a native app);
a ticket a cookie session made keeps the exact public origin; ``null`` is never accepted.
Real uvicorn and a real WebSocket client; a refused handshake uses its ticket up."""

from __future__ import annotations

import json
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from accounts.models import Account
from tests.support.screen import create_session, db, ws_url
from visual import services
from visual.models import VisualSession

APP = "capacitor://localhost"  # what a Capacitor app's WebView sends (not an http origin)
ELECTRON = "http://localhost:5173"  # a local dev server or an Electron app's own origin


def _protocols(session: dict[str, Any]) -> list[str]:
    return [session["subprotocol"], session["ticket_protocol_prefix"] + session["ticket"]]


async def _key_session(live_origin: str, runner_key: str) -> dict[str, Any]:
    response = await create_session(live_origin, runner_key, "pc-1")
    assert response.status_code == 201, response.text
    return response.json()


async def _opens(live_origin: str, session: dict[str, Any], origin: str | None) -> bool:
    try:
        ws = await connect(ws_url(live_origin), subprotocols=_protocols(session), origin=origin)  # type: ignore[arg-type]
    except InvalidStatus as refused:
        assert refused.response.status_code == 401
        return False
    assert json.loads(await ws.recv())["type"] == "hello"
    await ws.close()
    return True


async def test_a_runner_key_ticket_comes_from_a_listed_origin_or_none_and_never_null(
    screen: Any, live_origin: str, runner_key: str, settings: Any
) -> None:
    settings.RAM_VISUAL_TICKET_ORIGINS = [ELECTRON, APP]
    assert await _opens(live_origin, await _key_session(live_origin, runner_key), ELECTRON)
    assert await _opens(live_origin, await _key_session(live_origin, runner_key), APP)
    assert await _opens(live_origin, await _key_session(live_origin, runner_key), None)  # a native app
    assert await _opens(live_origin, await _key_session(live_origin, runner_key), live_origin)
    for foreign in ("null", "http://localhost:5174", "https://evil.example", ELECTRON + "/"):
        session = await _key_session(live_origin, runner_key)
        assert not await _opens(live_origin, session, foreign), foreign
        assert not await _opens(live_origin, session, ELECTRON), "a refused handshake uses its ticket up"


async def test_an_unlisted_app_origin_is_refused_by_default(screen: Any, live_origin: str, runner_key: str) -> None:
    assert not await _opens(live_origin, await _key_session(live_origin, runner_key), ELECTRON)


async def test_a_ticket_made_by_a_cookie_session_keeps_the_exact_public_origin(
    screen: Any, live_origin: str, account: Account, make_user: Any, settings: Any
) -> None:
    settings.RAM_VISUAL_TICKET_ORIGINS = [ELECTRON]
    user = await db(lambda: make_user(account))

    async def cookie_ticket() -> dict[str, Any]:
        session, raw = await db(
            lambda: services.visual_session_create(account=account, computer_id="pc-1", mode="observe", user=user)
        )
        return {
            "subprotocol": "ram-jpeg-v1",
            "ticket_protocol_prefix": "ram-ticket.",
            "ticket": raw,
            "id": str(session.id),
        }

    for origin in (ELECTRON, None, "null"):
        ticket = await cookie_ticket()
        assert not await _opens(live_origin, ticket, origin), origin
        ended = await db(lambda t=ticket: VisualSession.objects.get(pk=t["id"]))
        assert ended.ended_at is not None and ended.connected_at is None
    assert await _opens(live_origin, await cookie_ticket(), live_origin)
