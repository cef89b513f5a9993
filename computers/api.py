"""REST endpoints of computers (runner keys of the account): create one, list them, read one, choose a
computer's browser backend, set its browser settings, reset its profile, start one, delete one. Thin: authenticate, parse with the contract
model, one service call, render."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from accounts.auth import RUNNER_KEY
from accounts.models import ApiKey
from computers.contracts import (
    ComputerBrowserIn,
    ComputerCreateIn,
    ComputerList,
    ComputerOut,
    ComputerSettingsIn,
    ComputerStartIn,
    ProfileResetIn,
    ProfileResetOut,
)
from computers.errors import BrowserSecretNotStored, ComputerNotFound, ComputerSettingsRefused, ComputerUnknown
from computers.placement import computer_start
from computers.selectors import computer_out, computers_for_account
from computers.services import (
    computer_browser_set,
    computer_create,
    computer_delete,
    computer_profile_reset,
    computer_settings_set,
)
from core.api import Router, json_response, operation, parse_json_body
from executor.contracts import BACKENDS, ComputerSettings, ProxySettings
from vault_bridge.credentials import VaultRefused, VaultUnavailable

router = Router()


@operation(
    summary="The account's computers and whether each is available", auth=RUNNER_KEY, responses={200: ComputerList}
)
def computers_list(request: HttpRequest, *, key: ApiKey) -> HttpResponse:
    computers = [computer_out(c) for c in computers_for_account(account=key.account)]
    return json_response(ComputerList(computers=computers).model_dump(mode="json"))


@operation(
    summary="One of the account's computers: whether it is available and its state",
    auth=RUNNER_KEY,
    responses={200: ComputerOut, 404: "No such computer in this account."},
)
def computer_get(request: HttpRequest, *, key: ApiKey, computer_id: str) -> HttpResponse:
    computer = computers_for_account(account=key.account).filter(handle=computer_id).first()
    if computer is None:
        raise ComputerUnknown()
    return json_response(computer_out(computer).model_dump(mode="json"))


@operation(
    summary="Create a computer in the account, named by an id of its own (ids are per account and never given twice)",
    auth=RUNNER_KEY,
    body=ComputerCreateIn,
    responses={
        201: ComputerOut,
        400: "Invalid body: an unknown field, an id that is not 1-128 letters, digits, _ or - "
        "starting with a letter or digit, a name over 200 characters.",
        409: "A computer of your account has or had that id (computer.id_used).",
        429: "Your account holds RAM_ACCOUNT_MAX_COMPUTERS computers already (computer.limit).",
    },
)
def computer_post(request: HttpRequest, *, key: ApiKey, body: ComputerCreateIn) -> HttpResponse:
    computer = computer_create(account=key.account, handle=body.id, name=body.name)
    computer = computers_for_account(account=key.account).get(pk=computer.pk)  # with what the state reads
    return json_response(computer_out(computer).model_dump(mode="json"), status=201)


@operation(
    summary="Delete a computer: its open runs are cancelled, its generation ends, its profile is wiped; its id then answers 404",
    auth=RUNNER_KEY,
    responses={204: "Deleted.", 404: "No such computer in this account."},
)
def computer_delete_op(request: HttpRequest, *, key: ApiKey, computer_id: str) -> HttpResponse:
    computer = computers_for_account(account=key.account).filter(handle=computer_id).first()
    if computer is None:
        raise ComputerUnknown()
    computer_delete(computer=computer)
    return HttpResponse(status=204)


@operation(
    summary=f"Choose a computer's browser backend: {', '.join(BACKENDS[:-1])} or {BACKENDS[-1]} (a change ends its generation: a running executor switches within its heartbeat)",
    auth=RUNNER_KEY,
    body=ComputerBrowserIn,
    responses={
        200: ComputerOut,
        400: "Invalid body: unknown backend or field, options that do not fit the backend, a secret for local.",
        404: "No such computer in this account.",
        503: "Vault could not store the secret; nothing was changed.",
    },
)
def computer_browser_put(
    request: HttpRequest, *, key: ApiKey, computer_id: str, body: ComputerBrowserIn
) -> HttpResponse:
    computer = computers_for_account(account=key.account).filter(handle=computer_id).first()
    if computer is None:
        raise ComputerUnknown()
    try:
        computer = computer_browser_set(
            computer=computer, backend=body.backend, options=body.options, secret=body.secret
        )
    except (VaultRefused, VaultUnavailable):
        raise BrowserSecretNotStored() from None
    except ValueError as exc:
        raise ComputerSettingsRefused(f"Invalid request: {exc}.") from None
    return json_response(computer_out(computer).model_dump(mode="json"))


@operation(
    summary="Set a computer's locale, time zone, user agent, viewport and upstream proxy (applied when its browser next starts)",
    auth=RUNNER_KEY,
    body=ComputerSettingsIn,
    responses={
        200: ComputerOut,
        400: "Invalid body: an unknown field, a bad locale, time zone, user agent, a viewport outside "
        "320–1280 × 240–720, a proxy that is not http://host:port or carries credentials in its URL, "
        "one of username/password without the other, or a proxy on a remote browser backend.",
        404: "No such computer in this account.",
        503: "Vault could not store or delete the proxy's credentials; nothing was changed.",
    },
)
def computer_settings_put(
    request: HttpRequest, *, key: ApiKey, computer_id: str, body: ComputerSettingsIn
) -> HttpResponse:
    computer = computers_for_account(account=key.account).filter(handle=computer_id).first()
    if computer is None:
        raise ComputerUnknown()
    wanted = ComputerSettings(
        locale=body.locale,
        timezone=body.timezone,
        user_agent=body.user_agent,
        viewport=body.viewport,
        proxy=None if body.proxy is None else ProxySettings(server=body.proxy.server),
    )
    try:
        computer = computer_settings_set(
            computer=computer,
            settings=wanted,
            proxy_username=body.proxy.username if body.proxy else None,
            proxy_password=body.proxy.password if body.proxy else None,
        )
    except (VaultRefused, VaultUnavailable):
        raise BrowserSecretNotStored("Vault could not store the proxy's credentials; nothing was changed.") from None
    except ValueError as exc:
        raise ComputerSettingsRefused(f"Invalid request: {exc}.") from None
    return json_response(computer_out(computer).model_dump(mode="json"))


@operation(
    summary="Reset the computer's browser profile: every cookie, storage and login is wiped, a new generation starts",
    auth=RUNNER_KEY,
    responses={
        200: ProfileResetOut,
        400: "A body other than empty or {}.",
        404: "No computer of your account has that id.",
    },
)
def computer_profile_reset_post(request: HttpRequest, *, key: ApiKey, computer_id: str) -> HttpResponse:
    if request.body.strip():
        parse_json_body(request, ProfileResetIn)  # an empty body or {}; any field is refused
    computer = computers_for_account(account=key.account).filter(handle=computer_id).first()
    if computer is None:
        raise ComputerNotFound()
    computer = computer_profile_reset(computer=computer)
    return json_response(ProfileResetOut(computer=computer_out(computer)).model_dump(mode="json"))


@operation(
    summary="Start a computer (202): its executor starts on a free computer slot; it reads ready once it can be used",
    auth=RUNNER_KEY,
    responses={
        202: ComputerOut,
        400: "A body other than empty or {}.",
        404: "No such computer in this account.",
    },
)
def computer_start_post(request: HttpRequest, *, key: ApiKey, computer_id: str) -> HttpResponse:
    if request.body.strip():
        parse_json_body(request, ComputerStartIn)  # an empty body or {}; any field is refused
    computer = computers_for_account(account=key.account).filter(handle=computer_id).first()
    if computer is None:
        raise ComputerUnknown()
    computer_start(computer=computer)
    computer = computers_for_account(account=key.account).get(pk=computer.pk)
    return json_response(computer_out(computer).model_dump(mode="json"), status=202)


router.route("/api/computers", get=computers_list, post=computer_post)
router.route("/api/computers/{computer_id}", get=computer_get, delete=computer_delete_op)
router.route("/api/computers/{computer_id}/browser", put=computer_browser_put)
router.route("/api/computers/{computer_id}/settings", put=computer_settings_put)
router.route("/api/computers/{computer_id}/start", post=computer_start_post)
router.route("/api/computers/{computer_id}/profile/reset", post=computer_profile_reset_post)
