"""The /view page: who may open it, and that a GET creates nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.test import Client

from accounts.models import Account
from accounts.services import DELEGATED, PASSWORD, SESSION_AUTH_METHOD
from computers.models import Computer
from visual.models import VisualSession


def _signed_in(client: Client, user: Any, method: str) -> Client:
    client.force_login(user)
    session = client.session
    session[SESSION_AUTH_METHOD] = method
    session.save()
    return client


def test_a_password_session_of_the_account_gets_the_screen_and_nothing_is_created(
    client: Client, account: Account, make_user: Callable[..., Any], computer: Computer
) -> None:
    _signed_in(client, make_user(account), PASSWORD)
    response = client.get("/view", {"computer_id": "pc-1"})
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="screen-canvas"' in body and 'data-computer-id="pc-1"' in body
    assert "Take control" in body and "/static/ram/view.js" in body and 'nonce="' in body
    assert not VisualSession.objects.exists()


def test_without_login_the_screen_asks_for_a_sign_in(client: Client, computer: Computer) -> None:
    response = client.get("/view", {"computer_id": "pc-1"})
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_delegated_session_is_refused(
    client: Client, account: Account, make_user: Callable[..., Any], computer: Computer
) -> None:
    _signed_in(client, make_user(account), DELEGATED)
    assert client.get("/view", {"computer_id": "pc-1"}).status_code == 403


def test_another_accounts_or_unknown_computer_is_not_shown(
    client: Client, account: Account, make_account: Callable[..., Account], make_user: Callable[..., Any],
    make_computer: Callable[..., Computer],
) -> None:
    make_computer(make_account("Other"), "theirs")
    _signed_in(client, make_user(account), PASSWORD)
    assert client.get("/view", {"computer_id": "theirs"}).status_code == 404
    assert client.get("/view", {"computer_id": "nope"}).status_code == 404
    assert client.get("/view").status_code == 404



def test_the_start_of_a_computer_from_the_screen_needs_this_servers_own_origin(
    client: Client, account: Account, make_user: Callable[..., Any], computer: Computer, settings: Any
) -> None:
    """``POST /view/start`` (the page's Start button) is a person's POST like any other: from another
    Origin, or none, it is refused with 403 and nothing starts; from this server's own pages it starts."""
    signed_in = Client(enforce_csrf_checks=False)
    _signed_in(signed_in, make_user(account), PASSWORD)
    for origin in ({}, {"HTTP_ORIGIN": "https://evil.example"}, {"HTTP_ORIGIN": "null"}):
        refused = signed_in.post("/view/start?computer_id=pc-1", "{}", content_type="application/json", **origin)
        assert refused.status_code == 403, refused.content
        assert "error" in refused.json()
        assert not Computer.objects.get(pk="pc-1").wanted_running
    started = signed_in.post(
        "/view/start?computer_id=pc-1", "{}", content_type="application/json", HTTP_ORIGIN=settings.RAM_PUBLIC_ORIGIN
    )
    assert started.status_code == 202, started.content
    assert Computer.objects.get(pk="pc-1").wanted_running
