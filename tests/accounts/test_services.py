"""API keys, delegated sign-in and credit top-ups."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from accounts import services
from accounts.errors import TopUpInvalid, UnknownKeyKind
from accounts.models import Account, AccountEvent, ApiKey, DelegatedSignIn
from tests.conftest import Api

pytestmark = pytest.mark.django_db


def test_api_key_has_256_random_bits_and_is_kept_as_digest(account: Account) -> None:
    key, raw = services.api_key_create(account=account, kind="runner")
    assert raw.startswith(f"ram_rk_{key.prefix}_")
    assert len(raw.split("_", 3)[3]) == 43
    assert key.digest == services.digest(raw)
    assert raw not in str(ApiKey.objects.filter(pk=key.pk).values().first())
    assert services.api_key_authenticate(raw_key=raw) == key


def test_tampered_key_with_valid_prefix_is_refused(account: Account) -> None:
    _, raw = services.api_key_create(account=account, kind="task_observer")
    assert raw.startswith("ram_ok_")
    tampered = raw[:-1] + ("A" if raw[-1] != "A" else "B")
    assert services.api_key_authenticate(raw_key=tampered) is None


def test_unknown_kind_is_refused(account: Account) -> None:
    with pytest.raises(UnknownKeyKind):
        services.api_key_create(account=account, kind="admin")


def test_revocation_signal_is_sent_once(account: Account) -> None:
    seen: list[ApiKey] = []

    def receiver(sender: object, key: ApiKey, **_: object) -> None:
        seen.append(key)

    services.api_key_revoked.connect(receiver)
    try:
        key, raw = services.api_key_create(account=account, kind="runner")
        services.api_key_revoke(key=key)
        services.api_key_revoke(key=key)
    finally:
        services.api_key_revoked.disconnect(receiver)
    assert seen == [key]
    assert services.api_key_authenticate(raw_key=raw) is None


def test_top_up_is_recorded_as_event(account: Account) -> None:
    services.account_top_up(account=account, microcredits=2_000_000, actor="staff:alice")
    account.refresh_from_db()
    assert account.microcredit_balance == 2_000_000
    event = AccountEvent.objects.get(account=account)
    assert event.kind == "credits_topped_up"
    assert event.data == {"microcredits": "2000000", "balance": "2000000"}
    with pytest.raises(TopUpInvalid):
        services.account_top_up(account=account, microcredits=0, actor="x")


def test_password_login_marks_session_password(client: Client, account: Account, make_user: Callable[..., User]) -> None:
    make_user(account, "alice", "correct horse battery")
    before = client.get("/accounts/login/")
    assert before.status_code == 200
    response = client.post("/accounts/login/", {"username": "alice", "password": "correct horse battery"})
    assert response.status_code in (302, 303)
    assert client.session[services.SESSION_AUTH_METHOD] == services.PASSWORD


def test_delegated_link_signs_in_once_as_delegated(
    api: Api, client: Client, account: Account, make_user: Callable[..., User], runner_key: str, observer_key: str
) -> None:
    make_user(account, "bob")
    assert api.post("/api/sessions/delegate", {"username": "bob"}, observer_key).status_code == 403
    assert api.post("/api/sessions/delegate", {"username": "nobody"}, runner_key).status_code == 404
    assert api.post("/api/sessions/delegate", {"username": "bob", "admin": True}, runner_key).status_code == 400
    response = api.post("/api/sessions/delegate", {"username": "bob"}, runner_key)
    assert response.status_code == 201
    url = response.json()["url"]
    path, _, fragment = url.partition("#")
    assert "?" not in path and fragment.startswith("token=")
    token = fragment.removeprefix("token=")
    assert not DelegatedSignIn.objects.filter(digest=token).exists()
    # GET renders the page and consumes nothing.
    assert client.get("/accounts/delegated").status_code == 200
    assert DelegatedSignIn.objects.get().used_at is None
    signed_in = client.post("/accounts/delegated", {"token": token})
    assert signed_in.status_code in (302, 303)
    assert client.session[services.SESSION_AUTH_METHOD] == services.DELEGATED
    again = Client().post("/accounts/delegated", {"token": token})
    assert again.status_code == 403


def test_expired_delegated_link_is_refused(
    api: Api, account: Account, make_user: Callable[..., User], runner_key: str
) -> None:
    make_user(account, "bob")
    token = api.post("/api/sessions/delegate", {"username": "bob"}, runner_key).json()["url"].split("token=")[1]
    DelegatedSignIn.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    client = Client()
    assert client.post("/accounts/delegated", {"token": token}).status_code == 403
    assert services.SESSION_AUTH_METHOD not in client.session


def test_delegated_link_for_another_accounts_user_is_refused(
    api: Api, make_account: Callable[..., Account], make_user: Callable[..., User], runner_key: str
) -> None:
    make_user(make_account("Other"), "mallory")
    assert api.post("/api/sessions/delegate", {"username": "mallory"}, runner_key).status_code == 404
