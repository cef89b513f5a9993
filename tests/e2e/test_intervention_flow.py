"""A person in a real browser: from the descriptor's URL to a saved credential,
to the right clean screen, and to a completed Google authorization."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.async_api import Page, Route

from accounts.models import Account
from computers.models import Computer
from runs.models import ConnectionRequest, CredentialRequest, Run, RunEvent
from tests.e2e.conftest import LeakGuard, orm, sign_in
from tests.support.oauth_server import serve_oauth
from tests.support.vault import VaultServer, portal_credential_read_back
from vault_bridge.credentials import PortalCredential, VaultRefused, connection_tokens_read, portal_credential_save

pytestmark = pytest.mark.e2e

PASSWORD = "correct horse battery"
PORTAL_PASSWORD = "Portal-Pa55-never-logged"
TOTP = "JBSWY3DPEHPK3PXPJBSWY3DP"


@pytest.fixture
def person(account: Account, make_user: Callable[..., User]) -> User:
    return make_user(account)


async def invite_catcher(page: Page, guard: LeakGuard) -> list[str]:
    """Invites the open action hands to the browser (observed unchanged, registered as secrets)."""
    seen: list[str] = []

    async def observe(route: Route) -> None:
        response = await route.fetch(max_redirects=0)
        location = response.headers.get("location", "")
        if "#invite=" in location:
            invite = location.partition("#invite=")[2]
            seen.append(invite)
            guard.watch(invite)
        await route.fulfill(response=response)

    await page.route("**/intervention/open", observe)
    return seen


async def descriptor(origin: str, run: Run, key: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=origin, timeout=20) as client:
        response = await client.get(
            f"/api/runs/{run.id}/intervention-descriptor", headers={"Authorization": f"Bearer {key}"}
        )
    assert response.status_code == 200
    return dict(response.json()["intervention"])


async def test_credential_flow_from_descriptor_url_to_saved_credential(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    vault: VaultServer,
    person: User,
    account: Account,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    runner_key: str,
) -> None:
    leak_guard.watch(PASSWORD, PORTAL_PASSWORD, TOTP, runner_key)
    run = await orm(lambda: make_paused_run(account, computer, "credential", portal_origin="https://portal.example"))
    url = (await descriptor(human_origin, run, runner_key))["human_action"]["url"]
    invites = await invite_catcher(page, leak_guard)

    # Without a session: the login page, then back to the same intervention.
    await page.goto(url)
    assert page.url.startswith(f"{human_origin}/accounts/login/?next=")
    await sign_in(page, person.username, PASSWORD)
    assert page.url == url
    await page.reload()  # a second GET
    await page.get_by_text("Open the protected form and save the credential").wait_for()
    request = await orm(lambda: CredentialRequest.objects.get(run=run))
    assert request.opened_at is None and request.state == "pending"
    assert await orm(lambda: RunEvent.objects.filter(run=run, kind="credential_form_opened").count()) == 0

    # Open: the Vault form, the invite only in the fragment and gone from the address bar.
    async with page.expect_navigation():
        await page.get_by_role("button", name="Open the credential form").click()
    assert len(invites) == 1
    assert page.url == f"{human_origin}/tasks/{run.id}/credential"
    assert await page.evaluate("window.location.hash") == ""
    await page.get_by_label("Username").fill("ana@portal")
    await page.get_by_label("Password").fill(PORTAL_PASSWORD)
    await page.get_by_label("Authenticator secret").fill(TOTP)
    await page.get_by_role("button", name="Save in the vault").click()
    await page.get_by_text("Saved in the vault. This is not a sign-in").wait_for()
    await page.get_by_text("What happens next").wait_for()

    request = await orm(lambda: CredentialRequest.objects.get(run=run))
    assert request.state == "credential_saved" and request.saved_at is not None
    event = await orm(lambda: RunEvent.objects.get(run=run, kind="credential_saved"))
    assert event.data == {"request_id": str(request.id), "credential_id": request.credential_id}

    # A one-use read grant of the account reads it; the used invite can do nothing more.
    stored = await orm(
        lambda: portal_credential_read_back(account_id=account.id, credential_id=request.credential_id)
    )
    assert stored == PortalCredential(
        username="ana@portal", password=PORTAL_PASSWORD, origins=("https://portal.example",), totp_secret=TOTP
    )
    with pytest.raises(VaultRefused):
        await orm(
            lambda: portal_credential_save(
                invite=invites[0],
                account_id=account.id,
                credential_id=request.credential_id,
                credential=PortalCredential(username="mallory", password="replaced"),
            )
        )

    # The descriptor says credential_saved; required_action stays until an explicit continue.
    saved = await descriptor(human_origin, run, runner_key)
    assert saved["state"] == "credential_saved"
    async with httpx.AsyncClient(base_url=human_origin, timeout=20) as client:
        got = (await client.get(f"/api/runs/{run.id}", headers={"Authorization": f"Bearer {runner_key}"})).json()
    assert got["required_action"]["kind"] == "credential"

    # Back on the intervention page: stored, not signed in, and no button.
    await page.goto(url)
    await page.get_by_text("That is not a sign-in").wait_for()
    assert await page.get_by_role("button", name="Open the credential form").count() == 0


async def test_second_open_from_another_tab_issues_no_new_invite(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    vault: VaultServer,
    person: User,
    account: Account,
    computer: Computer,
    make_paused_run: Callable[..., Run],
) -> None:
    leak_guard.watch(PASSWORD)
    run = await orm(lambda: make_paused_run(account, computer, "credential"))
    url = f"{human_origin}/tasks/{run.id}/intervention"
    await page.goto(url)
    await sign_in(page, person.username, PASSWORD)
    other = await page.context.new_page()
    other.on("request", leak_guard.record_request)
    await other.goto(url)
    invites = await invite_catcher(page, leak_guard)
    invites_other = await invite_catcher(other, leak_guard)
    async with page.expect_navigation():
        await page.get_by_role("button", name="Open the credential form").click()
    async with other.expect_navigation():
        await other.get_by_role("button", name="Open the credential form").click()
    await other.get_by_role("heading", name="This form was already opened").wait_for()
    await other.get_by_text("Use the form already open before its deadline").wait_for()
    await other.get_by_role("link", name="Back to the task page").wait_for()
    assert len(invites) == 1 and invites_other == []
    assert await orm(lambda: RunEvent.objects.filter(run=run, kind="credential_form_opened").count()) == 1


async def test_expired_request_is_refused_with_a_clear_page(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    vault: VaultServer,
    person: User,
    account: Account,
    computer: Computer,
    make_paused_run: Callable[..., Run],
) -> None:
    leak_guard.watch(PASSWORD)
    run = await orm(lambda: make_paused_run(account, computer, "credential"))
    await page.goto(f"{human_origin}/tasks/{run.id}/intervention")
    await sign_in(page, person.username, PASSWORD)
    invites = await invite_catcher(page, leak_guard)
    # The deadline passes while the page is open.
    await orm(lambda: CredentialRequest.objects.filter(run=run).update(expires_at=timezone.now()))
    await page.get_by_role("button", name="Open the credential form").click()
    await page.get_by_role("heading", name="This credential request expired").wait_for()
    assert invites == []
    assert (await orm(lambda: CredentialRequest.objects.get(run=run))).opened_at is None


async def test_takeover_opens_the_assigned_computers_clean_screen(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    person: User,
    account: Account,
    make_computer: Callable[..., Computer],
    make_paused_run: Callable[..., Run],
) -> None:
    leak_guard.watch(PASSWORD)
    computer = await orm(lambda: make_computer(account, "desk-7"))
    run = await orm(lambda: make_paused_run(account, computer, "takeover"))
    await page.goto(f"{human_origin}/tasks/{run.id}/intervention")
    await sign_in(page, person.username, PASSWORD)
    await page.get_by_text("clean screen of the task's computer").wait_for()
    async with page.expect_navigation():
        await page.get_by_role("button", name="Open the computer's screen").click()
    assert page.url == f"{human_origin}/view?computer_id=desk-7"


@pytest.mark.parametrize("decision", ["allow", "deny"])
async def test_connection_flow_against_a_local_oauth_server(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    vault: VaultServer,
    settings: Any,
    person: User,
    account: Account,
    computer: Computer,
    make_paused_run: Callable[..., Run],
    decision: str,
) -> None:
    with serve_oauth(redirect_uri=f"{human_origin}/connections/callback") as oauth:
        settings.RAM_GOOGLE_CLIENT_ID = oauth.client_id
        settings.RAM_GOOGLE_CLIENT_SECRET = oauth.client_secret
        settings.RAM_GOOGLE_AUTHORIZATION_URL = oauth.authorization_url
        settings.RAM_GOOGLE_TOKEN_URL = oauth.token_url
        leak_guard.watch(PASSWORD, oauth.client_secret)
        run = await orm(lambda: make_paused_run(account, computer, "connection"))
        await page.goto(f"{human_origin}/tasks/{run.id}/intervention")
        await sign_in(page, person.username, PASSWORD)
        async with page.expect_navigation():
            await page.get_by_role("button", name="Open Connections").click()
        assert page.url == f"{human_origin}/connections"
        await page.get_by_text("Read your Gmail messages and settings").wait_for()
        async with page.expect_navigation(url=f"{oauth.origin}/authorize?*"):
            await page.get_by_role("button", name="Authorize at Google").click()
        async with page.expect_navigation(url=f"{human_origin}/connections"):
            await page.locator(f"#{decision}").click()
        request = await orm(lambda: ConnectionRequest.objects.get(run=run))
        if decision == "deny":
            await page.get_by_text("You declined the authorization").wait_for()
            assert request.state == "pending"
            assert oauth.record.token_requests == []
            return
        await page.get_by_text("Google authorized the connection").wait_for()
        assert request.state == "authorized"
        (token_request,) = oauth.record.token_requests
        assert len(token_request["code_verifier"]) >= 43
        issued = oauth.record.issued[0]
        leak_guard.watch(issued["access_token"], issued["refresh_token"], token_request["code_verifier"])
        stored = await orm(lambda: connection_tokens_read(account_id=account.id, connection_id=request.id))
        assert stored is not None
        assert stored["access_token"] == issued["access_token"]
        assert stored["refresh_token"] == issued["refresh_token"]
        assert await page.get_by_text("No task is waiting for a Google authorization").count() == 1
        event = await orm(lambda: RunEvent.objects.get(run=run, kind="connection_authorized"))
        assert json.dumps(event.data) == json.dumps({"provider": "google", "capabilities": ["gmail.readonly"]})
