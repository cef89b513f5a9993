"""The staff sign-in at /admin/login/ follows the rules of /accounts/login/: guessing is
delayed per username across addresses (with a notice), existing and unknown usernames get
identical answers, and a correct password of a user who is not staff counts exactly like a
wrong one (no side channel through the hard lock)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from accounts.models import Account, AccountEvent, SignInGuessing
from accounts.services import SESSION_AUTH_METHOD

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"


@pytest.fixture
def staff(account: Account, make_user: Callable[..., User]) -> User:
    user = make_user(account, "operator")
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    return user


def attempt(address: str, username: str, password: str, browser: Client | None = None) -> Any:
    client = browser or Client(REMOTE_ADDR=address)
    body = {"username": username, "password": password, "next": "/admin/"}
    return client.post("/admin/login/", body, REMOTE_ADDR=address)


def guess_from_four_addresses(username: str, guesses: int = 16) -> list[Any]:
    """Wrong passwords spread over four addresses, each under the per-address lock."""
    answers = []
    for n in range(guesses):
        SignInGuessing.objects.filter(username=username).update(next_attempt_at=None)  # each waited its delay
        answers.append(attempt(f"10.0.0.{n % 4 + 1}", username, f"guess {n}"))
    return answers


def test_guessing_at_the_staff_sign_in_from_four_addresses_delays_the_next_from_a_fifth(staff: User) -> None:
    answers = guess_from_four_addresses(staff.username)
    assert all(a.status_code == 200 for a in answers)  # plain failures: no address reached its lock
    assert SignInGuessing.objects.get(username=staff.username).failures == 16
    # The right password from a fifth address is not even checked during the delay.
    refused = attempt("10.0.0.5", staff.username, PASSWORD)
    assert refused.status_code == 429
    assert b"Too many failed sign-ins for this username" in refused.content
    assert "_auth_user_id" not in refused.wsgi_request.session
    # Once the delay has passed the staff user signs in, to a password session of the admin.
    SignInGuessing.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    browser = Client(REMOTE_ADDR="10.0.0.5")
    signed_in = attempt("10.0.0.5", staff.username, PASSWORD, browser)
    assert signed_in.status_code == 302 and signed_in["Location"] == "/admin/"
    assert browser.session[SESSION_AUTH_METHOD] == "password"
    assert browser.get("/admin/").status_code == 200
    assert not SignInGuessing.objects.filter(username=staff.username).exists()
    # The person's account was told, once.
    notice = AccountEvent.objects.get(kind="sign_in_guessing")
    assert notice.data == {"username": staff.username, "failures": settings.RAM_SIGN_IN_FREE_FAILURES}


def _normalised(response: Any, username: str) -> tuple[int, str]:
    body = response.content.decode()
    body = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", body)
    body = re.sub(r'nonce="[^"]+"', "", body)  # fresh on every response
    return response.status_code, body.replace(username, "USERNAME")


def _assert_same(mine: list[tuple[int, str]], theirs: list[tuple[int, str]]) -> None:
    for a, b in zip(mine, theirs, strict=True):
        assert a == b, "\n".join(difflib.unified_diff(a[1].splitlines(), b[1].splitlines(), lineterm=""))


def test_existing_and_unknown_usernames_get_identical_answers_at_the_staff_sign_in(staff: User) -> None:
    existing = [_normalised(a, staff.username) for a in guess_from_four_addresses(staff.username, 8)]
    existing.append(_normalised(attempt("10.0.0.9", staff.username, "again"), staff.username))
    unknown = [_normalised(a, "nobody") for a in guess_from_four_addresses("nobody", 8)]
    unknown.append(_normalised(attempt("10.0.0.9", "nobody", "again"), "nobody"))
    assert [status for status, _ in existing] == [200] * 8 + [429]
    _assert_same(existing, unknown)


def test_a_correct_password_of_a_user_who_is_not_staff_counts_like_a_wrong_one(
    account: Account, make_user: Callable[..., User]
) -> None:
    right, wrong = make_user(account, "alpha-person"), make_user(account, "omega-person")
    # The same number of attempts, each from its own address: one with the person's real password.
    with_right = [attempt("10.2.0.1", right.username, PASSWORD) for _ in range(settings.AXES_FAILURE_LIMIT)]
    with_wrong = [attempt("10.2.0.2", wrong.username, "not it") for _ in range(settings.AXES_FAILURE_LIMIT)]
    _assert_same(
        [_normalised(a, right.username) for a in with_right], [_normalised(a, wrong.username) for a in with_wrong]
    )
    assert [a.status_code for a in with_right] == [200] * (settings.AXES_FAILURE_LIMIT - 1) + [429]
    # Counted alike by the hard lock and by the delays per username.
    counts = dict(AccessAttempt.objects.values_list("username", "failures_since_start"))
    assert counts == {right.username: settings.AXES_FAILURE_LIMIT, wrong.username: settings.AXES_FAILURE_LIMIT}
    guessing = dict(SignInGuessing.objects.values_list("username", "failures"))
    assert guessing[right.username] == guessing[wrong.username]
    assert all("_auth_user_id" not in a.wsgi_request.session for a in with_right)
