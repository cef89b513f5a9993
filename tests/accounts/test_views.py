"""Password sign-in: session rotation, lockout with cool-off, safe ``next``, logout."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from accounts.models import Account
from accounts.services import SESSION_AUTH_METHOD, api_key_create, delegated_sign_in_create

PASSWORD = "correct horse battery"


@pytest.fixture
def person(account: Account, make_user: Callable[..., User]) -> User:
    return make_user(account)


def login(client: Client, username: str, password: str, next_url: str | None = None) -> object:
    data = {"username": username, "password": password}
    if next_url is not None:
        data["next"] = next_url
    return client.post("/accounts/login/", data)


def test_password_login_rotates_the_session_and_marks_it_password(client: Client, person: User) -> None:
    client.get("/accounts/login/")
    session = client.session
    session["before"] = True
    session.save()
    before = client.cookies[settings.SESSION_COOKIE_NAME].value
    response = login(client, person.username, PASSWORD)
    assert response.status_code == 302  # type: ignore[attr-defined]
    after = client.cookies[settings.SESSION_COOKIE_NAME].value
    assert after != before
    assert client.session[SESSION_AUTH_METHOD] == "password"


def test_wrong_password_signs_nobody_in(client: Client, person: User) -> None:
    response = login(client, person.username, "wrong")
    assert response.status_code == 200  # type: ignore[attr-defined]
    assert b"not correct" in response.content  # type: ignore[attr-defined]
    assert "_auth_user_id" not in client.session


@pytest.fixture
def per_address_only(settings: Any) -> None:
    """Isolate the hard lock per (username, address) from the per-username delays."""
    settings.RAM_SIGN_IN_FREE_FAILURES = 1000


@pytest.mark.usefixtures("per_address_only")
def test_repeated_failures_lock_out_even_the_right_password(client: Client, person: User) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT):
        login(client, person.username, "wrong")
    response = login(client, person.username, PASSWORD)
    assert response.status_code == 429  # type: ignore[attr-defined]
    assert "_auth_user_id" not in client.session


@pytest.mark.usefixtures("per_address_only")
def test_lockout_ends_after_the_cool_off(client: Client, person: User) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT):
        login(client, person.username, "wrong")
    assert login(client, person.username, PASSWORD).status_code == 429  # type: ignore[attr-defined]
    # Age the recorded failures past the cool-off instead of waiting for it.
    AccessAttempt.objects.update(
        attempt_time=timezone.now() - timedelta(hours=settings.AXES_COOLOFF_TIME, minutes=1)
    )
    assert login(client, person.username, PASSWORD).status_code == 302  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "unsafe",
    [
        "//evil.example/",
        "https:evil.example",
        "\\\\evil.example",
        "/\\evil.example",
        "javascript:alert(1)",
        "http://evil.example/",
        "https://evil.example/tasks/x/intervention",
    ],
)
def test_login_refuses_open_redirect_next(client: Client, person: User, unsafe: str) -> None:
    response = login(client, person.username, PASSWORD, next_url=unsafe)
    assert response.status_code == 302  # type: ignore[attr-defined]
    assert response["Location"] == settings.LOGIN_REDIRECT_URL  # type: ignore[index]


def test_login_follows_a_local_next(client: Client, person: User) -> None:
    response = login(client, person.username, PASSWORD, next_url="/tasks/abc/intervention")
    assert response["Location"] == "/tasks/abc/intervention"  # type: ignore[index]


def test_login_page_carries_only_a_safe_next(client: Client) -> None:
    page = client.get("/accounts/login/", {"next": "//evil.example/"})
    assert b"evil.example" not in page.content
    page = client.get("/accounts/login/", {"next": "/tasks/abc/intervention"})
    assert b'value="/tasks/abc/intervention"' in page.content


def test_logout_ends_the_session(client: Client, person: User) -> None:
    login(client, person.username, PASSWORD)
    response = client.post("/accounts/logout/")
    assert response.status_code == 302
    assert "_auth_user_id" not in client.session
    assert client.get("/connections").status_code == 302


def _csrf(client: Client, page: str) -> str:
    client.get(page)
    return client.cookies[settings.CSRF_COOKIE_NAME].value


def test_password_sign_in_after_a_delegated_session_gets_a_new_session_and_csrf_token(
    account: Account, person: User
) -> None:
    """Session fixation: a planted delegated cookie must not become a password session."""
    key, _ = api_key_create(account=account, kind="runner")
    browser = Client(enforce_csrf_checks=True)
    token = delegated_sign_in_create(key=key, username=person.username)
    delegated = browser.post(
        "/accounts/delegated", {"token": token, "csrfmiddlewaretoken": _csrf(browser, "/accounts/delegated")}
    )
    assert delegated.status_code == 302
    planted = browser.cookies[settings.SESSION_COOKIE_NAME].value
    planted_csrf = browser.cookies[settings.CSRF_COOKIE_NAME].value
    assert browser.session[SESSION_AUTH_METHOD] == "delegated"

    signed_in = browser.post(
        "/accounts/login/",
        {"username": person.username, "password": PASSWORD, "csrfmiddlewaretoken": _csrf(browser, "/accounts/login/")},
    )
    assert signed_in.status_code == 302
    assert browser.session[SESSION_AUTH_METHOD] == "password"
    assert browser.cookies[settings.SESSION_COOKIE_NAME].value != planted
    assert browser.cookies[settings.CSRF_COOKIE_NAME].value != planted_csrf
    # Whoever kept the planted cookie holds nothing: not the password session, not even the delegated one.
    attacker = Client()
    attacker.cookies[settings.SESSION_COOKIE_NAME] = planted
    assert attacker.get("/connections").status_code == 302
    assert "_auth_user_id" not in attacker.session


def test_every_sign_in_rotates_the_session_id_and_csrf_token(account: Account, person: User) -> None:
    browser = Client(enforce_csrf_checks=True)
    seen_sessions: list[str] = []
    seen_csrf: list[str] = []
    for _ in range(2):  # password, then password again as the same user
        response = browser.post(
            "/accounts/login/",
            {"username": person.username, "password": PASSWORD, "csrfmiddlewaretoken": _csrf(browser, "/accounts/login/")},
        )
        assert response.status_code == 302
        seen_sessions.append(browser.cookies[settings.SESSION_COOKIE_NAME].value)
        seen_csrf.append(browser.cookies[settings.CSRF_COOKIE_NAME].value)
    # password -> delegated: a change of kind rotates too
    key, _ = api_key_create(account=account, kind="runner")
    token = delegated_sign_in_create(key=key, username=person.username)
    csrf = browser.cookies[settings.CSRF_COOKIE_NAME].value
    assert browser.post("/accounts/delegated", {"token": token, "csrfmiddlewaretoken": csrf}).status_code == 302
    assert browser.session[SESSION_AUTH_METHOD] == "delegated"
    seen_sessions.append(browser.cookies[settings.SESSION_COOKIE_NAME].value)
    seen_csrf.append(browser.cookies[settings.CSRF_COOKIE_NAME].value)
    assert len(set(seen_sessions)) == 3, seen_sessions
    assert len(set(seen_csrf)) == 3
