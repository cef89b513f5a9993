"""Human pages of an intervention: the intervention page and its open action,
the one-time Vault form and its submit endpoint, and Connections with Google's
authorization. Thin: check the session, call one service or selector, render.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pydantic
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.csp import CSP
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.models import Account
from accounts.services import DELEGATED, PASSWORD, account_of_user, session_auth_method
from computers.models import DiagnosticArtifact
from core.api import InvalidBody, domain_error_response, error_response, json_response, refuse_nul, validation_message
from core.errors import DomainError, NotFound
from core.middleware import no_referrer
from core.pages import navigate, origin_is_public, page_status, require_public_origin
from runs import credentials, oauth, pages, selectors, services
from runs.contracts import CredentialIn, CredentialSavedOut
from runs.errors import CredentialFormAlreadyOpened
from runs.models import RunEvent
from runs.pauses import pause_kind

NOT_AVAILABLE = (
    "This intervention is not available to you. Check the link, or sign in with the account that owns the task."
)
OPEN_INTENT = "open"
_OAUTH_SESSION_KEY = "ram_oauth_pending"


def _password_account(request: HttpRequest) -> Account | None:
    if session_auth_method(request) != PASSWORD:
        return None
    return account_of_user(request.user)  # type: ignore[arg-type]


def _unavailable(
    request: HttpRequest, message: str, status: int, *, title: str = "Not available", **context: Any
) -> HttpResponse:
    if context.get("run_id") and request.path == f"/tasks/{context['run_id']}/intervention":
        context["run_id"] = None  # never a link to the page itself
    return render(request, "runs/unavailable.html", {"title": title, "message": message, **context}, status=status)


def _error_page(request: HttpRequest, exc: DomainError, run_id: str | None = None) -> HttpResponse:
    # Not-found pages say nothing about whether the task exists in another account.
    if isinstance(exc, NotFound):
        return _unavailable(request, NOT_AVAILABLE, page_status(exc))
    return _unavailable(request, exc.message, page_status(exc), run_id=run_id)


def _situation_page(request: HttpRequest, exc: DomainError, run_id: str) -> HttpResponse:
    """A refused open gets the page of its own situation: already opened, expired, cancelled..."""
    account = _password_account(request)
    if account is None or isinstance(exc, NotFound):
        return _error_page(request, exc, run_id)
    run = selectors.run_for_account(account=account, run_id=run_id)
    if isinstance(exc, CredentialFormAlreadyOpened):
        title, message = "This form was already opened", exc.message
    else:
        situation = pages.intervention_unavailable(run=run, message=exc.message)
        title, message = situation.title, situation.message
    return _unavailable(request, message, page_status(exc), title=title, goal=pages.goal_of(run), run_id=run_id)


@require_GET
def home_page(request: HttpRequest) -> HttpResponse:
    """What waits for the person, newest first, then recent runs. A delegated session only views."""
    if session_auth_method(request) not in (PASSWORD, DELEGATED):
        return redirect_to_login(request.path, settings.LOGIN_URL)
    account = account_of_user(request.user)  # type: ignore[arg-type]
    home = pages.home_for_account(account=account) if account is not None else None
    return render(
        request,
        "runs/home.html",
        {
            "title": "Home",
            "nav": "home",
            "home": home,
            "has_account": account is not None,
            "delegated": session_auth_method(request) == DELEGATED,
            "now": timezone.now(),
        },
    )


@require_GET
def intervention_page(request: HttpRequest, run_id: str) -> HttpResponse:
    """The task page: the task's words, what it needs, its last steps, one button; creates and consumes nothing."""
    account = _password_account(request)
    if account is None:
        return redirect_to_login(request.path, settings.LOGIN_URL)
    try:
        run = selectors.run_for_account(account=account, run_id=run_id)
    except DomainError as exc:
        return _error_page(request, exc)
    try:
        descriptor = selectors.intervention_descriptor(run=run).intervention
        current = selectors.intervention_current(run=run)
    except DomainError as exc:
        if isinstance(exc, NotFound):
            return _error_page(request, exc)
        situation = pages.intervention_unavailable(run=run, message=exc.message)
        return _unavailable(
            request,
            situation.message,
            page_status(exc),
            title=situation.title,
            goal=pages.goal_of(run),
            replay_url=pages.replay_url(run=run),
        )
    kind = pause_kind(current.pause)
    request_row = current.credential_request
    already_opened = request_row is not None and request_row.opened_at is not None
    opened_event = (
        RunEvent.objects.filter(run=run, kind="intervention_opened").order_by("-id").first()
        if kind.notes_opening
        else None
    )
    screenshot_id = pages.latest_screenshot_id(run=run)
    return render(
        request,
        "runs/intervention.html",
        {
            "title": "The task needs you",
            "account": account,
            "descriptor": descriptor,
            "run": run,
            "goal": pages.goal_of(run),
            "kind_words": kind.words,
            "reason_words": kind.reason_words(descriptor.reason),
            "computer": run.computer,
            "steps": pages.last_steps(run=run),
            "replay_url": pages.replay_url(run=run),
            "screenshot_url": f"/tasks/{run.id}/screenshots/{screenshot_id}" if screenshot_id else None,
            "what_opening_does": kind.what_opening_does,
            "open_label": kind.open_label,
            "credential_request": request_row,
            "label_from_task": selectors.label_from_task(request_row.label) if request_row else "",
            "already_opened": already_opened,
            "already_opened_text": CredentialFormAlreadyOpened.message_default,
            "opened_event": opened_event,
            "opened_note": kind.opened_note,
            "can_open": not already_opened,
            "intent": OPEN_INTENT,
        },
    )


@require_GET
def intervention_screenshot(request: HttpRequest, run_id: str, artifact_id: str) -> HttpResponse:
    """The run's latest masked capture (blurred before it was stored), for its own account only."""
    account = _password_account(request)
    if account is None:
        return HttpResponse(status=404)
    try:
        run = selectors.run_for_account(account=account, run_id=run_id)
        artifact = pages.screenshot_for_account(account=account, run=run, artifact_id=artifact_id)
    except DomainError:
        return HttpResponse(status=404)
    return capture_response(artifact)


def capture_response(artifact: DiagnosticArtifact) -> HttpResponse:
    """A masked capture's bytes (blurred before they were stored), kept out of shared caches;
    the person's task page and the staff admin both serve captures through this."""
    response = HttpResponse(bytes(artifact.data), content_type=artifact.content_type)
    response["Cache-Control"] = "private, no-store"
    return response


@require_POST
@require_public_origin
def intervention_open(request: HttpRequest, run_id: str) -> HttpResponse:
    """Open the resource once: Vault form (invite in the fragment), clean screen, or Connections."""
    if request.POST.get("intent") != OPEN_INTENT:
        return _unavailable(request, "Use the Open button on the intervention page.", 400, run_id=run_id)
    if not request.user.is_authenticated:
        return _unavailable(request, "Sign in with your password first, then open the intervention again.", 403)
    try:
        target = services.intervention_open(
            run_id=run_id,
            user=request.user,  # type: ignore[arg-type]
            auth_method=session_auth_method(request),
        )
    except DomainError as exc:
        return _situation_page(request, exc, run_id)
    return navigate(request, target)


@require_http_methods(["GET", "POST"])
@no_referrer
def credential(request: HttpRequest, run_id: str) -> HttpResponse:
    if request.method == "POST":
        return credential_save(request, run_id)
    return credential_form(request, run_id)


def credential_form(request: HttpRequest, run_id: str) -> HttpResponse:
    """The Vault form page; its script takes the invite from the fragment and clears the address bar."""
    account = _password_account(request)
    if account is None:
        return redirect_to_login(f"/tasks/{run_id}/intervention", settings.LOGIN_URL)
    try:
        run = selectors.run_for_account(account=account, run_id=run_id)
        current = selectors.intervention_current(run=run)
    except DomainError as exc:
        return _error_page(request, exc, run_id)
    if current.credential_request is None:
        return _unavailable(request, "This task is not waiting for a credential.", 409, run_id=run_id)
    return render(
        request,
        "runs/credential_form.html",
        {
            "title": "Save a credential",
            "account": account,
            "run_id": run.id,
            "credential_request": current.credential_request,
            "label_from_task": selectors.label_from_task(current.credential_request.label),
            "replaces": selectors.credential_replaced_by(current.credential_request),
        },
    )


def credential_save(request: HttpRequest, run_id: str) -> HttpResponse:
    """JSON endpoint of the Vault form: the invite comes in the ``X-RAM-Invite`` header."""
    if not origin_is_public(request):
        return error_response(403, "This request did not come from this site's own pages; nothing was saved.")
    if not request.user.is_authenticated:
        return error_response(403, "Sign in with your password first.")
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
    if content_type != "application/json" or len(request.body) > 16 * 1024:
        return error_response(400, "Invalid request: send the form as JSON.")
    try:
        body = CredentialIn.model_validate_json(request.body)
        refuse_nul(body.model_dump())
    except pydantic.ValidationError as exc:
        return error_response(400, validation_message(exc))
    except InvalidBody as exc:
        return domain_error_response(exc)
    try:
        saved = services.credential_request_save(
            run_id=run_id,
            user=request.user,  # type: ignore[arg-type]
            auth_method=session_auth_method(request),
            invite=request.headers.get("X-RAM-Invite", ""),
            username=body.username,
            password=body.password,
            totp_secret=body.totp_secret,
            replace_existing=body.replace_existing,
        )
    except DomainError as exc:
        if isinstance(exc, NotFound):
            return error_response(404, NOT_AVAILABLE)
        return domain_error_response(exc)
    return json_response(CredentialSavedOut(request_id=saved.id, state="credential_saved").model_dump(mode="json"))


@require_GET
def connections_page(request: HttpRequest) -> HttpResponse:
    account = _password_account(request)
    if account is None:
        return redirect_to_login(request.path, settings.LOGIN_URL)
    pending, authorized = selectors.connections_for_account(account=account)
    notice = request.session.pop("ram_connections_notice", None)
    response = render(
        request,
        "runs/connections.html",
        {
            "title": "Connections",
            "nav": "connections",
            "pending": [(c, [oauth.capability_words(x) for x in c.capabilities]) for c in pending],
            "authorized": [(c, [oauth.capability_words(x) for x in c.capabilities]) for c in authorized],
            "notice": notice,
            "configured": bool(settings.RAM_GOOGLE_CLIENT_ID),
        },
    )
    # The Authorize form's answer redirects to Google: form-action covers redirects too.
    google = urlsplit(settings.RAM_GOOGLE_AUTHORIZATION_URL)
    form_action = [CSP.SELF, f"{google.scheme}://{google.netloc}"]
    response._csp_config = {**settings.SECURE_CSP, "form-action": form_action}  # type: ignore[attr-defined]
    return response


@require_POST
@require_public_origin
def connection_authorize(request: HttpRequest, request_id: str) -> HttpResponse:
    """Start Google's authorization-code flow with PKCE and state; redirects to Google."""
    if not request.user.is_authenticated:
        return _unavailable(request, "Sign in with your password first.", 403)
    try:
        start = services.connection_authorization_begin(
            connection_request_id=request_id,
            user=request.user,  # type: ignore[arg-type]
            auth_method=session_auth_method(request),
        )
    except DomainError as exc:
        return _error_page(request, exc)
    pending = request.session.get(_OAUTH_SESSION_KEY, {})
    # Only the latest attempt per request stays valid.
    pending = {s: v for s, v in pending.items() if v["request_id"] != request_id}
    pending[start.state] = {"request_id": request_id, "verifier": start.code_verifier}
    request.session[_OAUTH_SESSION_KEY] = pending
    return navigate(request, start.url)


_DENIAL_WORDS = {
    "access_denied": "You declined the authorization at Google. Nothing was stored; the task still waits.",
}


@require_http_methods(["GET", "POST"])
def connection_callback(request: HttpRequest) -> HttpResponse:
    """GET renders a page that posts the result back (a GET consumes nothing); POST finishes."""
    if request.method == "GET":
        if _password_account(request) is None:
            return redirect_to_login("/connections", settings.LOGIN_URL)
        return render(
            request,
            "runs/connection_callback.html",
            {
                "title": "Finishing the authorization",
                "fields": {k: request.GET.get(k, "")[:2048] for k in ("code", "state", "error")},
            },
        )
    return _connection_callback_finish(request)


@require_public_origin
def _connection_callback_finish(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return _unavailable(request, "Sign in with your password first.", 403)
    state = request.POST.get("state", "")
    pending = request.session.get(_OAUTH_SESSION_KEY, {})
    entry = pending.pop(state, None) if state else None
    request.session[_OAUTH_SESSION_KEY] = pending
    if entry is None:
        return _unavailable(
            request, "This authorization answer does not match one started here; start again from Connections.", 400
        )
    error = request.POST.get("error", "")
    if error:
        message = _DENIAL_WORDS.get(error, "Google did not authorize the connection; nothing was stored.")
        request.session["ram_connections_notice"] = {"kind": "error", "text": message}
        return navigate(request, "/connections")
    try:
        services.connection_authorization_complete(
            connection_request_id=entry["request_id"],
            user=request.user,  # type: ignore[arg-type]
            auth_method=session_auth_method(request),
            code=request.POST.get("code", ""),
            code_verifier=entry["verifier"],
        )
    except DomainError as exc:
        request.session["ram_connections_notice"] = {
            "kind": "error",
            "text": NOT_AVAILABLE if isinstance(exc, NotFound) else exc.message,
        }
        return navigate(request, "/connections")
    request.session["ram_connections_notice"] = {
        "kind": "ok",
        "text": "Google authorized the connection; its tokens are stored in the vault. "
        "Check the task, then ask for an explicit continuation.",
    }
    return navigate(request, "/connections")


# --- Stored credentials: list, replace (a new one-time Vault form), delete ---

_CREDENTIALS_NOTICE = "ram_credentials_notice"
DELETE_CONFIRM = "delete"


@require_GET
def credentials_page(request: HttpRequest) -> HttpResponse:
    account = _password_account(request)
    if account is None:
        return redirect_to_login(request.path, settings.LOGIN_URL)
    return render(
        request,
        "runs/credentials.html",
        {
            "title": "Stored credentials",
            "nav": "credentials",
            "credentials": credentials.stored_credentials_for_account(account=account),
            "notice": request.session.pop(_CREDENTIALS_NOTICE, None),
            "delete_confirm": DELETE_CONFIRM,
        },
    )


@require_POST
@require_public_origin
def credential_replace(request: HttpRequest, credential_id: str) -> HttpResponse:
    """Person-initiated: a new one-time Vault form for a stored credential."""
    account = _password_account(request)
    if account is None:
        return _unavailable(request, "Sign in with your password first.", 403)
    try:
        target = credentials.credential_replacement_open(account=account, credential_id=credential_id)
    except DomainError as exc:
        request.session[_CREDENTIALS_NOTICE] = {"kind": "error", "text": exc.message}
        return navigate(request, "/credentials")
    return navigate(request, target)


@require_POST
@require_public_origin
def credential_delete(request: HttpRequest, credential_id: str) -> HttpResponse:
    account = _password_account(request)
    if account is None:
        return _unavailable(request, "Sign in with your password first.", 403)
    if request.POST.get("confirm") != DELETE_CONFIRM:
        return _unavailable(request, "Use the Delete button on the stored credentials page.", 400)
    try:
        credentials.stored_credential_delete(
            account=account, credential_id=credential_id, actor=f"user:{request.user.get_username()}"
        )
    except DomainError as exc:
        text = "That credential is no longer stored." if isinstance(exc, NotFound) else exc.message
        request.session[_CREDENTIALS_NOTICE] = {"kind": "error", "text": text}
        return navigate(request, "/credentials")
    request.session[_CREDENTIALS_NOTICE] = {
        "kind": "ok",
        "text": f"Deleted {credential_id!s} from the vault: every version is destroyed and cannot be restored.",
    }
    return navigate(request, "/credentials")


@require_http_methods(["GET", "POST"])
@no_referrer
def credential_replacement(request: HttpRequest, replacement_id: str) -> HttpResponse:
    if request.method == "POST":
        return _credential_replacement_save(request, replacement_id)
    account = _password_account(request)
    if account is None:
        return redirect_to_login("/credentials", settings.LOGIN_URL)
    try:
        form = credentials.credential_replacement_get(account=account, replacement_id=replacement_id)
    except DomainError as exc:
        return _error_page(request, exc)
    return render(
        request,
        "runs/credential_replace.html",
        {"title": "Replace a credential", "replacement": form.replacement, "stored": form.stored},
    )


def _credential_replacement_save(request: HttpRequest, replacement_id: str) -> HttpResponse:
    """JSON endpoint of the replacement form: the invite comes in the ``X-RAM-Invite`` header."""
    if not origin_is_public(request):
        return error_response(403, "This request did not come from this site's own pages; nothing was saved.")
    account = _password_account(request)
    if account is None:
        return error_response(403, "Sign in with your password first.")
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
    if content_type != "application/json" or len(request.body) > 16 * 1024:
        return error_response(400, "Invalid request: send the form as JSON.")
    try:
        body = CredentialIn.model_validate_json(request.body)
        refuse_nul(body.model_dump())
    except pydantic.ValidationError as exc:
        return error_response(400, validation_message(exc))
    except InvalidBody as exc:
        return domain_error_response(exc)
    try:
        saved = credentials.credential_replacement_save(
            account=account,
            replacement_id=replacement_id,
            invite=request.headers.get("X-RAM-Invite", ""),
            username=body.username,
            password=body.password,
            totp_secret=body.totp_secret,
        )
    except DomainError as exc:
        return domain_error_response(exc)
    return json_response(CredentialSavedOut(request_id=saved.id, state="credential_saved").model_dump(mode="json"))
