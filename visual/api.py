"""REST endpoints of the screen: computers, visual sessions, a run's viewer.
Thin: authenticate, parse with the contract model, one service call, render."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from accounts.auth import RUNNER_KEY, authenticate_key
from accounts.models import Account, ApiKey
from accounts.services import PASSWORD, account_of_user, session_auth_method
from core.api import Router, json_response, operation
from visual import services
from visual.contracts import (
    CONNECT_EXPIRES_IN_SECONDS,
    SESSION_MAX_SECONDS,
    SUBPROTOCOL,
    TICKET_PROTOCOL_PREFIX,
    TRANSPORT,
    WEBSOCKET_PATH,
    Viewport,
    VisualSessionIn,
    VisualSessionOut,
)
from visual.errors import (
    CallerRefused,
    IntentMissing,
    SignInRequired,
)

INTENT_HEADER = "X-RAM-Intent"
INTENT = "visual-session"

router = Router()


@dataclass(frozen=True)
class Caller:
    account: Account
    key: ApiKey | None


@dataclass(frozen=True)
class RunnerKeyOrPasswordSession:
    """``core.api.Auth``: a runner key, or a password web session from the configured origin exactly.

    The intent header is checked here too, before the body is read.
    """

    arg: str = "caller"
    description: str = "API key kinds allowed: runner."

    def __call__(self, request: HttpRequest) -> Caller:
        if "Authorization" in request.headers:
            key = authenticate_key(request, RUNNER_KEY.kinds)
            caller = Caller(account=key.account, key=key)
        else:
            caller = Caller(account=self._session_account(request), key=None)
        if request.headers.get(INTENT_HEADER) != INTENT:
            raise IntentMissing(f"Invalid request: send the header {INTENT_HEADER}: {INTENT}.")
        return caller

    @staticmethod
    def _session_account(request: HttpRequest) -> Account:
        method = session_auth_method(request)
        if method is None:
            raise SignInRequired()
        if method != PASSWORD:
            raise CallerRefused("This web session was not signed in with a password; sign in again to view the screen.")
        if request.headers.get("Origin") != settings.RAM_PUBLIC_ORIGIN:
            raise CallerRefused("The request's Origin is not allowed.")
        account = account_of_user(request.user)  # type: ignore[arg-type]
        if account is None or not account.is_active:
            raise CallerRefused("Your user has no active account.")
        return account


@operation(
    summary="Create a jpeg-websocket-v1 session and its single-use ticket (runner key or password web session)",
    auth=RunnerKeyOrPasswordSession(),
    body=VisualSessionIn,
    responses={
        201: VisualSessionOut,
        400: "Invalid body or missing X-RAM-Intent: visual-session.",
        401: "No runner key and no signed-in web session.",
        403: "task_observer key, delegated web session, or an Origin other than the configured one.",
        409: "No ready computer of your account has that id.",
        429: "Over your account's open sockets (2) or pending tickets (8), or the server's (4, 32).",
    },
)
def visual_session_post(request: HttpRequest, *, caller: Caller, body: VisualSessionIn) -> HttpResponse:
    account, key = caller.account, caller.key
    session, ticket = services.visual_session_create(
        account=account,
        computer_id=body.computer_id,
        mode=body.mode,
        api_key=key,
        user=None if key is not None else request.user,  # type: ignore[arg-type]
    )
    out = VisualSessionOut(
        version=1,
        transport=TRANSPORT,
        session_id=session.id,
        ticket=ticket,
        websocket_path=WEBSOCKET_PATH,
        subprotocol=SUBPROTOCOL,
        ticket_protocol_prefix=TICKET_PROTOCOL_PREFIX,
        connect_expires_in_seconds=CONNECT_EXPIRES_IN_SECONDS,
        session_max_seconds=SESSION_MAX_SECONDS,
        max_fps=settings.RAM_VISUAL_MAX_FPS,
        viewport=Viewport(),
        mode=body.mode,
    )
    return json_response(out.model_dump(mode="json"), status=201)


router.route("/api/visual/sessions", post=visual_session_post)
