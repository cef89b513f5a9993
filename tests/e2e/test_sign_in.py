"""Sign-in in a real browser: a planted delegated session never becomes the
password session (new session id and CSRF token), and guessing from other
addresses delays the next sign-in of that username."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.utils import timezone
from playwright.async_api import Page

from accounts.models import Account, AccountEvent, SignInGuessing
from accounts.services import SESSION_AUTH_METHOD
from tests.e2e.conftest import LeakGuard, orm, sign_in

pytestmark = pytest.mark.e2e

PASSWORD = "correct horse battery"


@pytest.fixture
def person(account: Account, make_user: Callable[..., User]) -> User:
    return make_user(account)


async def _cookies(page: Page) -> dict[str, str]:
    return {c["name"]: c["value"] for c in await page.context.cookies()}


def _session_method(session_key: str) -> str | None:
    store = SessionStore(session_key=session_key)
    return store.get(SESSION_AUTH_METHOD) if store.exists(session_key) else None


async def test_a_planted_delegated_session_does_not_become_the_password_session(
    human_origin: str, page: Page, leak_guard: LeakGuard, person: User, runner_key: str
) -> None:
    leak_guard.watch(runner_key, PASSWORD)
    async with httpx.AsyncClient(base_url=human_origin, timeout=20) as client:
        link = (
            await client.post(
                "/api/sessions/delegate", json={"username": person.username}, headers={"Authorization": f"Bearer {runner_key}"}
            )
        ).json()["url"]
    leak_guard.watch(link.partition("#token=")[2])
    # The key holder opens the link in the person's browser: a delegated session is planted.
    await page.goto(link)
    async with page.expect_navigation():
        await page.get_by_role("button", name="Continue").click()
    planted = await _cookies(page)
    assert await orm(lambda: _session_method(planted[settings.SESSION_COOKIE_NAME])) == "delegated"
    # The person then signs in with the password in that same browser.
    await page.goto(f"{human_origin}/accounts/login/?next=/connections")
    await sign_in(page, person.username, PASSWORD)
    assert page.url == f"{human_origin}/connections"
    after = await _cookies(page)
    assert after[settings.SESSION_COOKIE_NAME] != planted[settings.SESSION_COOKIE_NAME]
    assert after[settings.CSRF_COOKIE_NAME] != planted[settings.CSRF_COOKIE_NAME]
    assert await orm(lambda: _session_method(after[settings.SESSION_COOKIE_NAME])) == "password"
    # The planted cookie is worth nothing now: not a password session, not even the delegated one.
    assert await orm(lambda: _session_method(planted[settings.SESSION_COOKIE_NAME])) is None
    async with httpx.AsyncClient(base_url=human_origin, timeout=20, cookies={settings.SESSION_COOKIE_NAME: planted[settings.SESSION_COOKIE_NAME]}) as stolen:
        response = await stolen.get("/connections")
        assert response.status_code == 302 and response.headers["location"].startswith("/accounts/login/")


async def _guess_from(origin: str, address: str, username: str, password: str, path: str = "/accounts/login/") -> int:
    """One wrong guess sent from ``address`` (a loopback address of its own), as a form post."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    async with httpx.AsyncClient(base_url=origin, transport=transport, timeout=30) as client:
        await client.get(path)
        token = client.cookies[settings.CSRF_COOKIE_NAME]
        response = await client.post(
            path,
            data={"username": username, "password": password, "csrfmiddlewaretoken": token},
            headers={"Origin": origin},
        )
        return response.status_code


async def test_guessing_from_four_addresses_delays_the_persons_next_sign_in(
    human_origin: str, page: Page, leak_guard: LeakGuard, person: User
) -> None:
    leak_guard.watch(PASSWORD)
    for n in range(16):
        await orm(lambda: SignInGuessing.objects.update(next_attempt_at=None))  # each guess waited its delay
        assert await _guess_from(human_origin, f"127.0.0.{n % 4 + 2}", person.username, f"guess {n}") == 200
    # From a fifth address, a browser that never signed in here: the right password waits.
    await page.goto(f"{human_origin}/accounts/login/")
    await page.get_by_label("Username").fill(person.username)
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await page.get_by_text("Too many failed sign-ins for this username").wait_for()
    assert page.url.startswith(f"{human_origin}/accounts/login/")
    # Once the delay has passed the same typing signs in, and the person is told.
    await orm(lambda: SignInGuessing.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1)))
    await sign_in(page, person.username, PASSWORD)
    assert page.url == f"{human_origin}/"  # a sign-in lands on the person's home
    await page.get_by_text("There were 16 failed sign-in attempts for your username").wait_for()
    assert await orm(lambda: AccountEvent.objects.filter(kind="sign_in_guessing").count()) == 1


async def test_guessing_at_the_staff_sign_in_from_four_addresses_delays_the_next_one(
    human_origin: str, page: Page, leak_guard: LeakGuard, person: User
) -> None:
    leak_guard.watch(PASSWORD)
    await orm(lambda: User.objects.filter(pk=person.pk).update(is_staff=True))
    for n in range(16):
        await orm(lambda: SignInGuessing.objects.update(next_attempt_at=None))  # each guess waited its delay
        status = await _guess_from(human_origin, f"127.0.0.{n % 4 + 2}", person.username, f"guess {n}", "/admin/login/")
        assert status == 200
    # From a fifth address, the staff user's right password waits on the admin's own form.
    await page.goto(f"{human_origin}/admin/login/?next=/admin/")
    await page.get_by_label("Username").fill(person.username)
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Log in").click()
    await page.get_by_text("Too many failed sign-ins for this username").wait_for()
    assert page.url.startswith(f"{human_origin}/admin/login/")
    # Once the delay has passed, the same typing opens the admin.
    await orm(lambda: SignInGuessing.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1)))
    await page.get_by_label("Password").fill(PASSWORD)
    async with page.expect_navigation():
        await page.get_by_role("button", name="Log in").click()
    assert page.url == f"{human_origin}/admin/"
    assert await orm(lambda: AccountEvent.objects.filter(kind="sign_in_guessing").count()) == 1
