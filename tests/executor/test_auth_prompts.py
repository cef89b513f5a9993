"""A site's HTTP basic-auth challenge never blocks silently: its request waits as a sign-in
prompt (kind ``auth``) listed with the dialogs, every other request goes on, and it is answered
by a person's username and password (the screen's ``dialog`` input), by the agent from the Vault
(``auth_answer``: a credential of exactly the origin that asks), or cancelled. Real Chromium,
a real OpenBao, a loopback site that checks the ``Authorization`` header."""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.async_api import Error as PlaywrightError

from accounts.models import Account
from computers.client import ExecutorClient, ExecutorError
from computers.models import Computer
from executor.runtime import Executor
from tests.support.live import free_port
from tests.support.screen import on_executor
from tests.support.site import STAGING_REALM, Site, serve_site
from tests.support.vault import VaultServer
from tests.support.waits import eventually
from vault_bridge.credentials import PortalCredential, account_read_grant, portal_credential_write

USERNAME, PASSWORD, STALE_PASSWORD = "ana.lima", "Basic-Secret-4417", "Old-Secret-2290"


@pytest.fixture
def site(allow_egress: Callable[[str], None]) -> Iterator[Site]:
    with serve_site() as served:
        served.basic_users[USERNAME] = PASSWORD
        allow_egress(served.origin)
        yield served


@pytest.fixture
def stored(screen: Executor, vault: VaultServer, account: Account, site: Site) -> Account:
    """The account's credentials: one for the site's exact origin, one for another origin."""
    for credential_id, password, origins in (
        ("staging", PASSWORD, (site.origin,)),
        ("elsewhere", PASSWORD, ("https://staging.example",)),
        ("stale", STALE_PASSWORD, (site.origin,)),
    ):
        portal_credential_write(
            token=vault.root_token,
            account_id=account.id,
            credential_id=credential_id,
            credential=PortalCredential(username=USERNAME, password=password, origins=origins),
        )
    return account


def client() -> ExecutorClient:
    return ExecutorClient(Computer.objects.get(pk="pc-1"))


def context(account: Account) -> dict[str, Any]:
    """What the worker sends with auth_answer: the run's binding and a one-use read grant."""
    computer = Computer.objects.get(pk="pc-1")
    return {
        "account_id": str(account.id),
        "computer_binding": str(computer.binding),
        "vault_grant": account_read_grant(account_id=account.id),
    }


def waiting() -> list[dict[str, Any]]:
    return list(client().status()["dialogs"])


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


@pytest.fixture
def lease(screen: Executor, site: Site) -> Iterator[str]:
    executor = client()
    lease_id = executor.lease_acquire()
    try:
        executor.navigate(lease_id, site.origin + "/docs")
        yield lease_id
    finally:
        executor.lease_release(lease_id)


def ask(lease_id: str, site: Site) -> dict[str, Any]:
    """Navigate to the protected page: the action returns at the challenge, which waits."""
    started = time.monotonic()
    reply = client().navigate(lease_id, site.origin + "/staging?token=private-query-value")
    assert time.monotonic() - started < 10
    return dict(reply["dialog_opened"])


def shown(screen: Executor) -> str:
    """What the computer's page shows ("" while it is between two documents)."""

    async def read() -> str:
        try:
            return str(await screen.page.content())
        except PlaywrightError:
            return ""

    return str(on_executor(screen, read))


async def other_tab(screen: Executor, url: str) -> tuple[int, str]:
    other = await screen.context.new_page()
    try:
        response = await other.goto(url, timeout=10_000)
        return (response.status if response is not None else 0), await other.title()
    finally:
        await other.close()


def test_a_challenge_waits_as_a_sign_in_prompt_and_nothing_else_stalls(lease: str, site: Site, screen: Executor) -> None:
    opened = ask(lease, site)
    assert opened["kind"] == "auth" and opened["tab"] == "t1"
    assert opened["origin"] == site.origin and opened["realm"] == STAGING_REALM
    assert "private-query-value" not in str(opened) and "/staging" not in str(opened)
    assert [(d["id"], d["kind"]) for d in waiting()] == [(opened["id"], "auth")]
    # Every other request goes on: another tab loads a page of the same site meanwhile, and nothing
    # has answered the prompt on its own by then.
    assert on_executor(screen, lambda: other_tab(screen, site.origin + "/docs")) == (200, "Documentation")
    assert [d["id"] for d in waiting()] == [opened["id"]]
    # Like a dialog, the prompt blocks the agent's other actions on its page.
    with pytest.raises(ExecutorError) as blocked:
        client().click(lease, "body")
    assert blocked.value.reason == "dialog_open"
    assert site.authorizations == []


def test_the_agent_answers_from_the_vault_for_exactly_that_origin(lease: str, site: Site, stored: Account) -> None:
    opened = ask(lease, site)
    reply = client().action(lease, "auth_answer", context=context(stored), accept=True, credentialId="staging")
    answered = reply["answered"]
    assert answered["dialog"] == opened["id"] and answered["accepted"] is True
    assert answered["outcome"] == "signed_in" and answered["origin"] == site.origin
    assert USERNAME not in str(reply) and PASSWORD not in str(reply)  # the username masked, the password absent
    assert reply["dialogs"] == []
    assert site.authorizations == [basic(USERNAME, PASSWORD)]
    # The site signed in and echoes the username: the agent reads it redacted (executor/taint.py).
    assert client().extract_text(lease, "#who") == "Staging, signed in as [redacted]"


def test_a_credential_the_site_refuses_is_a_normal_answer_and_the_site_asks_again(
    lease: str, site: Site, stored: Account
) -> None:
    opened = ask(lease, site)
    reply = client().action(lease, "auth_answer", context=context(stored), accept=True, credentialId="stale")
    assert reply["answered"]["outcome"] == "asked_again" and reply["answered"]["dialog"] == opened["id"]
    [again] = reply["dialogs"]
    assert again["kind"] == "auth" and again["id"] != opened["id"] and again["origin"] == site.origin
    assert site.authorizations == [basic(USERNAME, STALE_PASSWORD)]
    assert STALE_PASSWORD not in str(reply)
    signed_in = client().action(lease, "auth_answer", context=context(stored), accept=True, credentialId="staging")
    assert signed_in["answered"]["outcome"] == "signed_in" and signed_in["dialogs"] == []


def test_a_credential_of_another_origin_is_refused_and_nothing_is_sent(lease: str, site: Site, stored: Account) -> None:
    opened = ask(lease, site)
    refused = client().action(lease, "auth_answer", context=context(stored), accept=True, credentialId="elsewhere")
    result = refused["tool_result"]
    assert result["isError"] is True and result["code"] == "browser.origin_refused"
    assert result["category"] == "unprocessable" and site.origin in result["content"]
    missing = client().action(lease, "auth_answer", context=context(stored), accept=True, credentialId="nobody")
    assert missing["tool_result"]["code"] == "browser.credential_not_found"
    no_grant = client().action(
        lease, "auth_answer", context={**context(stored), "vault_grant": ""}, accept=True, credentialId="staging"
    )
    assert no_grant["tool_result"]["code"] == "browser.vault_unavailable"
    moved = client().action(
        lease,
        "auth_answer",
        context={**context(stored), "computer_binding": "00000000-0000-4000-8000-000000000000"},
        accept=True,
        credentialId="staging",
    )
    assert moved["tool_result"]["code"] == "browser.binding_changed"
    assert site.authorizations == []  # nothing reached the site
    assert [d["id"] for d in waiting()] == [opened["id"]]  # the prompt still waits


def test_cancelling_shows_the_sites_401_page(lease: str, site: Site, stored: Account) -> None:
    opened = ask(lease, site)
    reply = client().action(lease, "auth_answer", context=context(stored), accept=False)
    assert reply["answered"] == {
        "dialog": opened["id"], "tab": "t1", "kind": "auth", "accepted": False, "origin": site.origin,
        "outcome": "cancelled", "url": site.origin + "/staging?token=private-query-value",
    }  # fmt: skip
    assert client().extract_text(lease, "#refused") == "401: sign-in required"
    assert site.authorizations == [] and waiting() == []
    # dialog_answer cancels one too, but never signs in (it has no credentials to give).
    ask(lease, site)
    with pytest.raises(ExecutorError) as refused:
        client().action(lease, "dialog_answer", accept=True)
    assert refused.value.reason == "bad_request" and "auth_answer" in refused.value.message
    client().action(lease, "dialog_answer", accept=False)
    assert eventually(lambda: waiting() == [])


def test_bad_auth_answers_are_refused_before_anything_is_read(
    lease: str, site: Site, stored: Account, screen: Executor
) -> None:
    for bad in (
        {"accept": True},
        {"accept": False, "credentialId": "staging"},
        {"accept": "yes", "credentialId": "staging"},
        {"accept": True, "credentialId": "staging", "password": PASSWORD},
        {"accept": True, "credentialId": "../x"},
    ):
        with pytest.raises(ExecutorError) as refused:
            client().action(lease, "auth_answer", context=context(stored), **bad)
        assert refused.value.reason == "bad_request", bad
    with pytest.raises(ExecutorError) as nothing:
        client().action(lease, "auth_answer", context=context(stored), accept=False)
    assert nothing.value.reason == "dialog_not_found"
    # A JavaScript dialog is not a sign-in prompt.
    on_executor(screen, lambda: screen.page.evaluate("() => { setTimeout(() => alert('Hi'), 0); }"))
    assert eventually(lambda: [d["kind"] for d in waiting()] == ["alert"])
    with pytest.raises(ExecutorError) as not_auth:
        client().action(lease, "auth_answer", context=context(stored), accept=True, credentialId="staging")
    assert not_auth.value.reason == "bad_request" and "dialog_answer" in not_auth.value.message
    client().action(lease, "dialog_answer", accept=True)
    assert site.authorizations == []


def test_a_person_with_control_signs_in_and_a_wrong_password_asks_again(
    screen: Executor, site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    grant_id = client().call("takeover")["grant_id"]

    def person(value: dict[str, Any]) -> Any:
        """One input of the person, as the gateway sends it (the grant renewed as the gateway does)."""
        client().call("grant_renew", grant_id=grant_id)
        return client().call("input", grant_id=grant_id, input=value)

    person({"type": "navigate", "url": site.origin + "/staging"})  # acknowledged at the challenge
    [first] = eventually(waiting)
    assert first["kind"] == "auth"
    # Malformed sign-in answers are refused and change nothing.
    for bad in (
        {"accept": True, "username": USERNAME},
        {"accept": True, "password": PASSWORD},
        {"accept": True, "username": USERNAME, "password": PASSWORD, "text": "x"},
        {"accept": False, "username": USERNAME, "password": PASSWORD},
        {"accept": True, "username": USERNAME, "password": "p" * 1001},
        {"accept": True, "username": USERNAME, "password": 4417},
    ):
        with pytest.raises(ExecutorError) as refused:
            person({"type": "dialog", "dialog": first["id"], **bad})
        assert refused.value.reason == "bad_request" and PASSWORD not in refused.value.message
    with pytest.raises(ExecutorError) as no_credentials:
        person({"type": "dialog", "dialog": first["id"], "accept": True})
    assert "username and password" in no_credentials.value.message
    with pytest.raises(ExecutorError) as not_auth:  # a prompt's text is no sign-in
        person({"type": "dialog", "dialog": first["id"], "accept": True, "text": PASSWORD})
    assert not_auth.value.reason == "bad_request" and PASSWORD not in not_auth.value.message
    assert [d["id"] for d in waiting()] == [first["id"]] and site.authorizations == []

    person({"type": "dialog", "dialog": first["id"], "accept": True, "username": USERNAME, "password": "wrong-one"})
    again = eventually(lambda: [d for d in waiting() if d["id"] != first["id"]])
    assert [d["kind"] for d in again] == ["auth"]  # the site refused it and asks again
    person({"type": "dialog", "dialog": again[0]["id"], "accept": True, "username": USERNAME, "password": PASSWORD})
    assert eventually(lambda: waiting() == [])
    assert eventually(lambda: "signed in as" in shown(screen))
    assert site.authorizations == [basic(USERNAME, "wrong-one"), basic(USERNAME, PASSWORD)]
    client().call("grant_release", grant_id=grant_id)
    assert PASSWORD not in caplog.text and "wrong-one" not in caplog.text


def test_a_destination_the_egress_policy_refuses_never_asks(lease: str, site: Site) -> None:
    elsewhere = f"http://127.0.0.1:{free_port()}/staging"  # loopback, not allowed
    with pytest.raises(ExecutorError) as refused:
        client().navigate(lease, elsewhere)
    assert refused.value.reason == "egress_refused"
    assert waiting() == []
