"""Guessing counted per username across addresses: growing delays (never a lock),
a notice to the person, the hard lock per address kept, and identical answers
for existing and unknown usernames."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from accounts.models import Account, AccountEvent, SignInGuessing
from accounts.services import KNOWN_DEVICE_COOKIE

PASSWORD = "correct horse battery"


@pytest.fixture
def person(account: Account, make_user: Callable[..., User]) -> User:
    return make_user(account)


def attempt(address: str, username: str, password: str, browser: Client | None = None) -> Any:
    client = browser or Client(REMOTE_ADDR=address)
    return client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def guess_from_four_addresses(username: str, guesses: int = 16) -> list[Any]:
    """Wrong passwords spread over four addresses, each under the per-address lock."""
    answers = []
    for n in range(guesses):
        SignInGuessing.objects.filter(username=username).update(next_attempt_at=None)  # each waited its delay
        answers.append(attempt(f"10.0.0.{n % 4 + 1}", username, f"guess {n}"))
    return answers


def test_guesses_from_many_addresses_delay_the_next_sign_in_from_a_fifth(person: User) -> None:
    answers = guess_from_four_addresses(person.username)
    assert all(a.status_code == 200 for a in answers)  # each a plain failure: no address reached its lock
    # The right password from a fifth address is not even checked during the delay.
    refused = attempt("10.0.0.5", person.username, PASSWORD)
    assert refused.status_code == 429
    assert b"Too many failed sign-ins for this username" in refused.content
    assert "_auth_user_id" not in refused.wsgi_request.session
    # The delay is not a lock: once it has passed, the person signs in.
    SignInGuessing.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    browser = Client(REMOTE_ADDR="10.0.0.5")
    assert attempt("10.0.0.5", person.username, PASSWORD, browser).status_code == 302
    # ... and is told about the guessing, once.
    page = browser.get("/connections")
    assert b"There were 16 failed sign-in attempts for your username" in page.content
    assert b"failed sign-in attempts" not in browser.get("/connections").content
    notice = AccountEvent.objects.get(kind="sign_in_guessing")
    assert notice.account_id == person.membership.account_id
    assert notice.data == {"username": person.username, "failures": settings.RAM_SIGN_IN_FREE_FAILURES}


def test_each_failure_past_the_free_ones_doubles_the_delay_up_to_the_cap(person: User) -> None:
    delays = []
    for n in range(settings.RAM_SIGN_IN_FREE_FAILURES + 12):
        SignInGuessing.objects.filter(username=person.username).update(next_attempt_at=None)
        attempt(f"10.1.{n}.1", person.username, "wrong")
        row = SignInGuessing.objects.get(username=person.username)
        assert row.last_failure_at is not None
        delays.append(None if row.next_attempt_at is None else (row.next_attempt_at - row.last_failure_at).total_seconds())
    free = settings.RAM_SIGN_IN_FREE_FAILURES
    assert delays[: free - 1] == [None] * (free - 1)
    assert delays[free - 1 :] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 300.0, 300.0, 300.0, 300.0]


def _normalised(response: Any, username: str) -> tuple[int, str]:
    body = response.content.decode()
    body = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", body)
    body = re.sub(r'nonce="[^"]+"', "", body)  # fresh on every response
    return response.status_code, body.replace(username, "USERNAME")


def test_existing_and_unknown_usernames_get_identical_answers(person: User) -> None:
    existing = [_normalised(a, person.username) for a in guess_from_four_addresses(person.username, 8)]
    existing.append(_normalised(attempt("10.0.0.9", person.username, "again"), person.username))
    unknown = [_normalised(a, "nobody") for a in guess_from_four_addresses("nobody", 8)]
    unknown.append(_normalised(attempt("10.0.0.9", "nobody", "again"), "nobody"))
    assert [status for status, _ in existing] == [200] * 8 + [429]
    for mine, theirs in zip(existing, unknown, strict=True):
        assert mine == theirs, "\n".join(difflib.unified_diff(mine[1].splitlines(), theirs[1].splitlines(), lineterm=""))


def test_a_browser_that_signed_in_before_is_not_delayed_by_a_strangers_guessing(person: User) -> None:
    browser = Client(REMOTE_ADDR="192.0.2.7")
    assert attempt("192.0.2.7", person.username, PASSWORD, browser).status_code == 302
    assert browser.cookies[KNOWN_DEVICE_COOKIE]["httponly"]
    browser.post("/accounts/logout/")
    guess_from_four_addresses(person.username)
    assert attempt("10.0.0.5", person.username, PASSWORD).status_code == 429  # a new browser waits
    assert attempt("192.0.2.7", person.username, PASSWORD, browser).status_code == 302  # the person's does not


def test_the_hard_lock_per_address_holds_even_for_a_known_browser(person: User) -> None:
    browser = Client(REMOTE_ADDR="192.0.2.7")
    assert attempt("192.0.2.7", person.username, PASSWORD, browser).status_code == 302
    browser.post("/accounts/logout/")
    for n in range(settings.AXES_FAILURE_LIMIT):
        attempt("192.0.2.7", person.username, f"typo {n}", browser)
    locked = attempt("192.0.2.7", person.username, PASSWORD, browser)
    assert locked.status_code == 429
    assert "_auth_user_id" not in browser.session
    # A forged or foreign marker does not skip the delays.
    guess_from_four_addresses(person.username)
    stranger = Client(REMOTE_ADDR="10.0.0.5")
    stranger.cookies[KNOWN_DEVICE_COOKIE] = "forged"
    assert attempt("10.0.0.5", person.username, PASSWORD, stranger).status_code == 429


def test_one_address_spraying_many_usernames_is_locked_and_its_own_sign_in_does_not_clear_it(
    person: User, account: Account, make_user: Callable[..., User]
) -> None:
    """Per address over all usernames: RAM_SIGN_IN_ADDRESS_FAILURE_LIMIT failures lock the address."""
    limit = settings.RAM_SIGN_IN_ADDRESS_FAILURE_LIMIT
    assert limit > settings.AXES_FAILURE_LIMIT
    make_user(account, "sprayer")  # an account of the sprayer's own
    for n in range(limit - 1):
        assert attempt("10.3.0.1", f"user-{n:03}", "Summer2026!").status_code == 200  # one guess per username
    # A correct password of its own account resets that username's failures only, not the address's count.
    assert attempt("10.3.0.1", "sprayer", PASSWORD).status_code == 302
    assert attempt("10.3.0.1", "user-last", "Summer2026!").status_code == 429  # the limit-th failure locks
    # Locked for every username, the right password included, existing or not, with one answer.
    refused = [attempt("10.3.0.1", name, PASSWORD) for name in (person.username, "sprayer", "nobody")]
    assert [r.status_code for r in refused] == [429, 429, 429]
    assert len({r.content for r in refused}) == 1
    assert all("_auth_user_id" not in r.wsgi_request.session for r in refused)
    # Other addresses are not concerned.
    assert attempt("10.3.0.2", person.username, PASSWORD).status_code == 302
