"""Password sign-in: session rotation, lockout with cool-off, safe ``next``, logout."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from accounts.models import Account
from accounts.services import SESSION_AUTH_METHOD

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


def test_repeated_failures_lock_out_even_the_right_password(client: Client, person: User) -> None:
    for _ in range(settings.AXES_FAILURE_LIMIT):
        login(client, person.username, "wrong")
    response = login(client, person.username, PASSWORD)
    assert response.status_code == 429  # type: ignore[attr-defined]
    assert "_auth_user_id" not in client.session


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
