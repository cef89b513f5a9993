"""The intervention pages through Django's test client: sessions, Origin, CSRF, and what a GET may do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import Account
from accounts.services import api_key_authenticate, delegated_sign_in_consume, delegated_sign_in_create
from computers.models import Computer
from runs.models import CredentialRequest, Run, RunEvent
from runs.services import run_cancel
from tests.support.vault import VaultServer
from vault_bridge.credentials import PortalCredential, VaultRefused, portal_credential_save

PASSWORD = "correct horse battery"


@pytest.fixture
def person(account: Account, make_user: Callable[..., User]) -> User:
    return make_user(account)


def signed_in(user: User, *, enforce_csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=enforce_csrf)
    client.get("/accounts/login/")
    token = client.cookies["csrftoken"].value
    response = client.post(
        "/accounts/login/", {"username": user.username, "password": PASSWORD, "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    return client


def own_origin() -> str:
    """This server's origin as a browser sends it: equal to the setting, never the same object."""
    return "".join(list(settings.RAM_PUBLIC_ORIGIN))


def open_intervention(client: Client, run: Run, **extra: Any) -> Any:
    headers = {"Origin": own_origin(), **extra.pop("headers", {})}
    data = {"intent": "open", **extra.pop("data", {})}
    return client.post(f"/tasks/{run.id}/intervention/open", data, headers=headers)


@pytest.fixture
def credential_run(account: Account, computer: Computer, make_paused_run: Callable[..., Run]) -> Run:
    return make_paused_run(account, computer, "credential")


def test_intervention_page_without_session_redirects_to_login_and_back(client: Client, credential_run: Run) -> None:
    response = client.get(f"/tasks/{credential_run.id}/intervention")
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next=/tasks/{credential_run.id}/intervention"


def test_intervention_page_get_creates_and_consumes_nothing(person: User, credential_run: Run) -> None:
    client = signed_in(person)
    events_before = RunEvent.objects.count()
    for _ in range(2):
        response = client.get(f"/tasks/{credential_run.id}/intervention")
        assert response.status_code == 200
        assert b"Open the credential form" in response.content
    request = CredentialRequest.objects.get(run=credential_run)
    assert request.opened_at is None and request.state == "pending"
    assert RunEvent.objects.count() == events_before


def test_intervention_page_of_another_account_reveals_nothing(
    make_account: Callable[..., Account],
    make_user: Callable[..., User],
    make_computer: Callable[..., Computer],
    make_paused_run: Callable[..., Run],
    person: User,
) -> None:
    other = make_account(name="Other")
    run = make_paused_run(other, make_computer(other, "other-pc"), "credential")
    client = signed_in(person)
    theirs = client.get(f"/tasks/{run.id}/intervention")
    missing = client.get("/tasks/00000000-0000-4000-8000-000000000000/intervention")
    assert theirs.status_code == missing.status_code == 404
    assert b"not available to you" in theirs.content
    assert str(run.id).encode() not in theirs.content and b"Other" not in theirs.content


def test_cancelled_run_shows_a_clear_unavailable_page(person: User, credential_run: Run) -> None:
    run_cancel(run=credential_run)
    response = signed_in(person).get(f"/tasks/{credential_run.id}/intervention")
    assert response.status_code == 409
    assert b"cancelled" in response.content


def test_revoked_computer_binding_shows_unavailable(person: User, credential_run: Run, computer: Computer) -> None:
    Computer.objects.filter(pk=computer.pk).update(is_active=False)
    response = signed_in(person).get(f"/tasks/{credential_run.id}/intervention")
    assert response.status_code == 409
    assert b"binding was revoked" in response.content


def test_inactive_account_cannot_open(person: User, account: Account, credential_run: Run) -> None:
    client = signed_in(person)
    Account.objects.filter(pk=account.pk).update(is_active=False)
    assert client.get(f"/tasks/{credential_run.id}/intervention").status_code == 403
    assert open_intervention(client, credential_run).status_code == 403
    assert CredentialRequest.objects.get(run=credential_run).opened_at is None


@pytest.mark.parametrize(
    "origin",
    # The last three extend this server's own origin: only an exact match is this server.
    [None, "null", "http://evil.example", "http://127.0.0.1:1", "{public}.evil.example", "{public}0", "{public}/"],
)
def test_open_refuses_missing_null_or_other_origin(
    person: User, credential_run: Run, origin: str | None, vault: VaultServer, settings: Any
) -> None:
    client = signed_in(person)
    headers = {} if origin is None else {"Origin": origin.format(public=settings.RAM_PUBLIC_ORIGIN)}
    response = client.post(f"/tasks/{credential_run.id}/intervention/open", {"intent": "open"}, headers=headers)
    assert response.status_code == 403
    assert CredentialRequest.objects.get(run=credential_run).opened_at is None


def test_open_without_csrf_token_is_refused(person: User, credential_run: Run, vault: VaultServer) -> None:
    client = signed_in(person, enforce_csrf=True)
    response = open_intervention(client, credential_run)
    assert response.status_code == 403
    with_token = open_intervention(
        client, credential_run, data={"csrfmiddlewaretoken": client.cookies["csrftoken"].value}
    )
    assert with_token.status_code == 303  # the same request with the token is accepted
    CredentialRequest.objects.filter(run=credential_run).update(opened_at=None)
    assert CredentialRequest.objects.get(run=credential_run).opened_at is None


def test_open_without_explicit_intent_is_refused(person: User, credential_run: Run, vault: VaultServer) -> None:
    response = open_intervention(signed_in(person), credential_run, data={"intent": "yes"})
    assert response.status_code == 400
    assert CredentialRequest.objects.get(run=credential_run).opened_at is None


def test_open_with_a_delegated_session_is_refused(
    person: User, credential_run: Run, runner_key: str, vault: VaultServer
) -> None:
    raw = delegated_sign_in_create(key=api_key_authenticate(raw_key=runner_key), username=person.username)  # type: ignore[arg-type]
    client = Client()
    client.get("/accounts/delegated")
    assert client.post("/accounts/delegated", {"token": raw}).status_code == 302
    response = open_intervention(client, credential_run)
    assert response.status_code == 403
    assert CredentialRequest.objects.get(run=credential_run).opened_at is None
    # And the page itself asks for a password sign-in.
    assert client.get(f"/tasks/{credential_run.id}/intervention").status_code == 302
    assert delegated_sign_in_consume  # the service under test


def test_open_with_a_runner_key_is_refused(client: Client, credential_run: Run, runner_key: str) -> None:
    response = client.post(
        f"/tasks/{credential_run.id}/intervention/open",
        {"intent": "open"},
        headers={"Origin": own_origin(), "Authorization": f"Bearer {runner_key}"},
    )
    assert response.status_code == 403
    assert CredentialRequest.objects.get(run=credential_run).opened_at is None


def test_open_credential_redirects_with_invite_only_in_fragment(
    person: User, credential_run: Run, vault: VaultServer
) -> None:
    response = open_intervention(signed_in(person), credential_run)
    assert response.status_code == 303
    location = response["Location"]
    path, _, fragment = location.partition("#")
    assert path == f"/tasks/{credential_run.id}/credential"
    assert fragment.startswith("invite=") and len(fragment) > len("invite=") + 10
    request = CredentialRequest.objects.get(run=credential_run)
    assert request.opened_at is not None and request.credential_id == str(request.id)
    event = RunEvent.objects.filter(run=credential_run, kind="credential_form_opened").get()
    assert fragment.removeprefix("invite=") not in str(event.data)


def test_second_open_is_refused_without_a_new_invite(person: User, credential_run: Run, vault: VaultServer) -> None:
    client = signed_in(person)
    assert open_intervention(client, credential_run).status_code == 303
    second = open_intervention(client, credential_run)
    assert second.status_code == 409
    assert "Location" not in second
    assert b"already opened" in second.content
    page = client.get(f"/tasks/{credential_run.id}/intervention")
    assert b"already opened" in page.content and b"open-button" not in page.content


def test_expired_request_is_refused(
    person: User, account: Account, computer: Computer, make_paused_run: Callable[..., Run], vault: VaultServer
) -> None:
    run = make_paused_run(account, computer, "credential", ttl_seconds=-1)
    client = signed_in(person)
    response = open_intervention(client, run)
    assert response.status_code == 409
    assert b"expired" in response.content
    assert CredentialRequest.objects.get(run=run).opened_at is None


def test_open_takeover_redirects_to_the_assigned_computer_view(
    person: User, account: Account, computer: Computer, make_paused_run: Callable[..., Run]
) -> None:
    run = make_paused_run(account, computer, "takeover")
    response = open_intervention(signed_in(person), run)
    assert response.status_code == 303
    assert response["Location"] == f"{settings.RAM_PUBLIC_ORIGIN}/view?computer_id={computer.id}"


def test_open_connection_redirects_to_connections(
    person: User, account: Account, computer: Computer, make_paused_run: Callable[..., Run]
) -> None:
    run = make_paused_run(account, computer, "connection")
    response = open_intervention(signed_in(person), run)
    assert response.status_code == 303
    assert response["Location"] == "/connections"


def test_cancel_after_open_revokes_the_invite(
    person: User, credential_run: Run, vault: VaultServer, django_capture_on_commit_callbacks: Any
) -> None:
    client = signed_in(person)
    invite = open_intervention(client, credential_run)["Location"].partition("#invite=")[2]
    with django_capture_on_commit_callbacks(execute=True):
        run_cancel(run=credential_run)
    request = CredentialRequest.objects.get(run=credential_run)
    with pytest.raises(VaultRefused):
        portal_credential_save(
            invite=invite,
            account_id=credential_run.account_id,
            credential_id=request.credential_id,
            credential=PortalCredential(username="u", password="p"),
        )


def test_save_refuses_other_origin_and_missing_invite(person: User, credential_run: Run, vault: VaultServer) -> None:
    client = signed_in(person)
    open_intervention(client, credential_run)
    body = '{"username": "u", "password": "p"}'
    other = client.post(
        f"/tasks/{credential_run.id}/credential", body, content_type="application/json", headers={"Origin": "null"}
    )
    assert other.status_code == 403
    missing = client.post(
        f"/tasks/{credential_run.id}/credential",
        body,
        content_type="application/json",
        headers={"Origin": own_origin()},
    )
    assert missing.status_code == 403 and "invite" in missing.json()["error"]
    assert CredentialRequest.objects.get(run=credential_run).state == "pending"


def test_save_refuses_unknown_fields(person: User, credential_run: Run, vault: VaultServer) -> None:
    client = signed_in(person)
    invite = open_intervention(client, credential_run)["Location"].partition("#invite=")[2]
    response = client.post(
        f"/tasks/{credential_run.id}/credential",
        '{"username": "u", "password": "p", "extra": 1}',
        content_type="application/json",
        headers={"Origin": own_origin(), "X-RAM-Invite": invite},
    )
    assert response.status_code == 400
    assert "p" not in response.json()["error"].split()


def test_save_refuses_a_nul_in_any_field_and_keeps_the_request_pending(
    person: User, credential_run: Run, vault: VaultServer
) -> None:
    client = signed_in(person)
    invite = open_intervention(client, credential_run)["Location"].partition("#invite=")[2]
    for body in ('{"username": "u\\u0000", "password": "p"}', '{"username": "u", "password": "p\\u0000w"}'):
        response = client.post(
            f"/tasks/{credential_run.id}/credential",
            body,
            content_type="application/json",
            headers={"Origin": own_origin(), "X-RAM-Invite": invite},
        )
        assert response.status_code == 400
        assert response.json()["error"] == "Invalid request: text may not hold the NUL character (U+0000)."
    assert CredentialRequest.objects.get(run=credential_run).state == "pending"


def test_legacy_intervention_returns_descriptor_and_never_an_invite(
    api: Any, credential_run: Run, runner_key: str, observer_key: str
) -> None:
    response = api.get(f"/api/runs/{credential_run.id}/intervention", key=runner_key)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"intervention", "invite"} and body["invite"] is None
    assert body["intervention"]["kind"] == "credential"
    assert CredentialRequest.objects.get(run=credential_run).opened_at is None
    assert api.get(f"/api/runs/{credential_run.id}/intervention", key=observer_key).status_code == 403
    assert api.get(f"/api/runs/{credential_run.id}/intervention").status_code == 401


def test_continued_run_shows_a_clear_unavailable_page(
    person: User, credential_run: Run, runner_key: str, api: Any
) -> None:
    response = api.post(f"/api/runs/{credential_run.id}/continue", {"idempotency_key": "continue-once-1"}, key=runner_key)
    assert response.status_code == 201
    page = signed_in(person).get(f"/tasks/{credential_run.id}/intervention")
    assert page.status_code == 409
    assert b"already continued" in page.content


@pytest.mark.parametrize("https", [False, True], ids=["http", "https"])
def test_signing_in_and_opening_work_with_the_cookie_names_of_either_scheme(
    person: User, credential_run: Run, vault: VaultServer, settings: Any, https: bool
) -> None:
    """Under https the session and CSRF cookies are ``__Host-`` prefixed (ramsite/settings.py); the
    sign-in form and the CSRF-checked Open button work under both names."""
    if https:
        settings.RAM_PUBLIC_ORIGIN = "https://testserver"
        settings.CSRF_TRUSTED_ORIGINS = ["https://testserver"]
        settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME = "__Host-sessionid", "__Host-csrftoken"
        settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    client = Client(enforce_csrf_checks=True)
    client.get("/accounts/login/", secure=https)
    token = client.cookies[settings.CSRF_COOKIE_NAME].value
    signed = client.post(
        "/accounts/login/",
        {"username": person.username, "password": PASSWORD, "csrfmiddlewaretoken": token},
        headers={"Origin": own_origin()},
        secure=https,
    )
    assert signed.status_code == 302, signed.content
    session = signed.cookies[settings.SESSION_COOKIE_NAME]
    assert bool(session["secure"]) is https and session["path"] == "/" and not session["domain"]
    token = client.cookies[settings.CSRF_COOKIE_NAME].value  # rotated at sign-in
    opened = client.post(
        f"/tasks/{credential_run.id}/intervention/open",
        {"intent": "open", "csrfmiddlewaretoken": token},
        headers={"Origin": own_origin()},
        secure=https,
    )
    assert opened.status_code in (302, 303), opened.content
    assert CredentialRequest.objects.get(run=credential_run).opened_at is not None
