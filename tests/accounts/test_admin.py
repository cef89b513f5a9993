"""Staff admin: keys shown once, revoke action, credit top-up, read-only run timeline."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import Account, AccountEvent, ApiKey, Membership
from computers.models import Computer
from runs.models import Run
from runs.services import run_event_append

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client: Client) -> Client:
    User.objects.create_superuser(username="staff", password="correct horse battery")
    response = client.post("/accounts/login/", {"username": "staff", "password": "correct horse battery"})
    assert response.status_code in (302, 303)
    return client


def test_new_key_is_shown_once_and_never_again(staff_client: Client, account: Account) -> None:
    response = staff_client.post(
        "/admin/accounts/apikey/add/", {"account": str(account.pk), "kind": "runner", "name": "ci"}
    )
    assert response.status_code == 200
    raw = re.search(r"ram_rk_[0-9a-f]{12}_[A-Za-z0-9_-]{43}", response.content.decode())
    assert raw is not None
    key = ApiKey.objects.get(name="ci")
    assert key.digest != raw.group(0)
    for page in ("/admin/accounts/apikey/", f"/admin/accounts/apikey/{key.pk}/change/"):
        assert raw.group(0) not in staff_client.get(page).content.decode()
        assert key.digest not in staff_client.get(page).content.decode()


def test_revoke_action(staff_client: Client, account: Account, runner_key: str) -> None:
    key = ApiKey.objects.get(account=account)
    response = staff_client.post(
        "/admin/accounts/apikey/", {"action": "revoke", "_selected_action": [str(key.pk)]}, follow=True
    )
    assert response.status_code == 200
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_top_up_through_admin_records_event(staff_client: Client, account: Account) -> None:
    response = staff_client.post(
        f"/admin/accounts/account/{account.pk}/change/",
        {
            "name": account.name,
            "is_active": "on",
            "top_up_microcredits": "5000",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
            "events-TOTAL_FORMS": "0",
            "events-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    account.refresh_from_db()
    assert account.microcredit_balance == 5000
    assert AccountEvent.objects.get(account=account).actor == "staff:staff"


def test_deactivating_an_account_in_the_admin_records_who_did_it(staff_client: Client, account: Account) -> None:
    response = staff_client.post(
        f"/admin/accounts/account/{account.pk}/change/",
        {
            "name": account.name,
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
            "events-TOTAL_FORMS": "0",
            "events-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    account.refresh_from_db()
    assert account.is_active is False
    event = AccountEvent.objects.get(account=account)
    assert (event.kind, event.actor) == ("account_deactivated", "staff:staff")


def test_run_pages_and_filters_render(
    staff_client: Client, account: Account, computer: Computer, make_paused_run: Callable[..., Run]
) -> None:
    run = make_paused_run(account, computer, "credential")
    listing = staff_client.get("/admin/runs/run/", {"status": "waiting_for_input", "pause_kind": "credential"})
    assert str(run.id) in listing.content.decode()
    detail = staff_client.get(f"/admin/runs/run/{run.id}/change/").content.decode()
    assert "credential_requested" in detail and "run_paused" in detail
    assert staff_client.get("/admin/runs/credentialrequest/").status_code == 200
    assert staff_client.get("/admin/runs/connectionrequest/").status_code == 200
    assert staff_client.get("/admin/computers/computer/").status_code == 200


def test_run_events_are_append_only(account: Account, computer: Computer, make_paused_run: Callable[..., Run]) -> None:
    event = make_paused_run(account, computer, "takeover").events.first()
    assert event is not None
    with pytest.raises(ValueError):
        event.save()
    with pytest.raises(ValueError):
        run_event_append(run=event.run, kind="x", data={"password": "hunter2"})


def test_admin_requires_a_password_session(client: Client) -> None:
    staff = User.objects.create_superuser(username="boss", password="correct horse battery")
    client.force_login(staff)  # a session not marked as a password sign-in
    response = client.get("/admin/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_delegated_session_never_reaches_the_admin(account: Account, runner_key: str) -> None:
    api = Client()
    staff = User.objects.create_superuser(username="boss", password="correct horse battery")
    Membership.objects.create(user=staff, account=account)
    refused = api.post(
        "/api/sessions/delegate",
        data=json.dumps({"username": "boss"}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {runner_key}"},
    )
    assert refused.status_code == 403
    # A link minted while the user was not staff still opens only a delegated session.
    User.objects.filter(pk=staff.pk).update(is_staff=False, is_superuser=False)
    url = api.post(
        "/api/sessions/delegate",
        data=json.dumps({"username": "boss"}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {runner_key}"},
    ).json()["url"]
    User.objects.filter(pk=staff.pk).update(is_staff=True, is_superuser=True)
    browser = Client()
    assert browser.post("/accounts/delegated", {"token": url.split("token=")[1]}).status_code in (302, 303)
    assert browser.get("/admin/").status_code == 302
