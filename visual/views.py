"""The clean screen page ``/view?computer_id=ID`` (a password web session of
the computer's account). GET renders only; the page's script creates a visual
session with a POST when it connects."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.csp import csp_override
from django.views.decorators.http import require_GET, require_POST

from accounts.services import PASSWORD, account_of_user, session_auth_method
from computers.contracts import ComputerStartIn
from computers.models import Computer
from computers.placement import computer_start
from computers.selectors import computer_is_ready, computer_state
from core.api import InvalidBody, domain_error_response, error_response, json_response, parse_json_body
from core.contracts import COMPUTER_ID_RE
from core.pages import origin_is_public
from executor.contracts import VIEWPORT_HEIGHT, VIEWPORT_WIDTH
from visual import selectors

_COMPUTER_ID = re.compile(COMPUTER_ID_RE)


def _unavailable(request: HttpRequest, message: str, status: int) -> HttpResponse:
    return render(
        request, "visual/unavailable.html", {"title": "Screen unavailable", "message": message}, status=status
    )


def framable(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``/view`` may be framed by the exact origins of ``RAM_VIEW_FRAME_ANCESTORS`` (none by default).

    Its ``frame-ancestors`` lists them, and ``X-Frame-Options: DENY`` is left out (it cannot name
    an origin); with the setting empty both stay as on every other page.
    """

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        ancestors = list(settings.RAM_VIEW_FRAME_ANCESTORS)
        if not ancestors:
            return response
        policy: dict[str, Any] = {**settings.SECURE_CSP, "frame-ancestors": ancestors}
        return xframe_options_exempt(csp_override(policy)(lambda _: response))(request)

    return wrapped


@require_GET
@framable
def view_page(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if session_auth_method(request) != PASSWORD:
        return _unavailable(request, "This screen needs a sign-in with your password. Sign out and sign in again.", 403)
    computer_id = request.GET.get("computer_id", "")
    account = account_of_user(request.user)
    computer = (
        Computer.objects.filter(handle=computer_id, account=account, is_active=True).first()
        if account is not None and _COMPUTER_ID.match(computer_id)
        else None
    )
    if computer is None:
        return _unavailable(request, "No computer with that id is assigned to your account.", 404)
    return render(
        request,
        "visual/view.html",
        {
            "title": f"Screen of {computer.name or computer.handle}",
            "computer": computer,
            "viewport_width": VIEWPORT_WIDTH,
            "viewport_height": VIEWPORT_HEIGHT,
            "max_fps": settings.RAM_VISUAL_MAX_FPS,
            "task": selectors.computer_current_task(account_id=computer.account_id, computer_id=computer.id),
            "ready": computer_is_ready(computer),
            # A person's control is recorded (the account opted in): the screen says so, visibly.
            "records_person": bool(settings.RAM_RECORDING and account is not None and account.record_person_control),
        },
    )


def _persons_computer(request: HttpRequest) -> Computer | HttpResponse:
    """The signed-in person's computer named by ``?computer_id=`` (a password session only), else the refusal."""
    if not request.user.is_authenticated:
        return error_response(401, "Sign in first.")
    if session_auth_method(request) != PASSWORD:
        return error_response(403, "This screen needs a sign-in with your password.")
    computer_id = request.GET.get("computer_id", "")
    account = account_of_user(request.user)
    computer = (
        Computer.objects.filter(handle=computer_id, account=account, is_active=True).first()
        if account is not None and _COMPUTER_ID.match(computer_id)
        else None
    )
    if computer is None:
        return error_response(404, "No computer with that id is assigned to your account.")
    return computer


def _state(computer: Computer) -> HttpResponse:
    state, reason = computer_state(computer)
    return json_response({"state": state, "state_reason": reason, "available": computer_is_ready(computer)})


@require_GET
def view_state(request: HttpRequest) -> HttpResponse:
    """``GET /view/state?computer_id=ID``: whether the person's computer is ready (the page polls it after Start)."""
    computer = _persons_computer(request)
    return computer if isinstance(computer, HttpResponse) else _state(computer)


@require_POST
def view_start(request: HttpRequest) -> HttpResponse:
    """``POST /view/start?computer_id=ID`` (the page's Start, CSRF-checked, a closed empty body): the
    computer starts as ``POST /api/computers/{id}/start`` starts it; 202 with its state. A request whose
    Origin is not exactly this server's is refused (403, nothing started), as every person's POST is."""
    if not origin_is_public(request):
        return error_response(403, "This request did not come from this server's own pages; nothing was started.")
    computer = _persons_computer(request)
    if isinstance(computer, HttpResponse):
        return computer
    try:
        parse_json_body(request, ComputerStartIn)
    except InvalidBody as exc:
        return domain_error_response(exc)
    computer_start(computer=computer)
    response = _state(Computer.objects.get(pk=computer.pk))
    response.status_code = 202
    return response
