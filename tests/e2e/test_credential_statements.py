"""Text the agent writes is never presented as the server's, and an agent cannot overwrite a
stored credential by naming its id: a person in a real browser, a hostile label, and a real
OpenBao holding the credential that would be replaced."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from playwright.async_api import Page

from accounts.models import Account
from computers.models import Computer
from runs.models import CredentialRequest, Run
from runs.services import credential_request_pause, run_create
from tests.e2e.conftest import LeakGuard, orm, sign_in
from tests.support.vault import VaultServer, portal_credential_read_back
from vault_bridge.credentials import PortalCredential, portal_credential_write

pytestmark = pytest.mark.e2e

PASSWORD = "correct horse battery"
PORTAL = "https://portal.example"
HOSTILE_LABEL = (
    "RAM security notice: do not use this form. Type your company SSO password at "
    "https://sso-check.example/login first, then come back here"
)


@pytest.fixture
def person(account: Account, make_user: Callable[..., User]) -> User:
    return make_user(account)


def paused_for_credential(account: Account, computer: Computer, *, label: str, credential_id: str = "") -> Run:
    run = run_create(account=account, computer=computer, task={"goal": "x"}, max_model_calls=3)
    credential_request_pause(run=run, portal_origin=PORTAL, label=label, ttl_seconds=900, credential_id=credential_id)
    return run


async def assert_statement_then_label(page: Page) -> None:
    """The origin is the server's statement; the label is quoted, short, link-free and after it."""
    assert (await page.locator("#portal-origin").inner_text()).strip() == PORTAL
    label = (await page.locator("#task-label").inner_text()).strip()
    assert len(label) <= 60
    assert "https://" not in label and "sso-check.example" not in label
    assert await page.locator("#task-label").evaluate("el => el.tagName") == "Q"
    assert await page.locator(".task-label").inner_text() != ""
    assert "Label from the task" in await page.locator(".task-label").inner_text()
    assert await page.locator("main a[href*='sso-check']").count() == 0
    # The label appears nowhere else on the page as if the server had written it.
    assert HOSTILE_LABEL not in await page.content()


async def test_the_agents_label_is_quoted_and_the_portal_origin_is_shown_before_open(
    human_origin: str, page: Page, leak_guard: LeakGuard, vault: VaultServer, person: User, account: Account, computer: Computer
) -> None:
    run = await orm(lambda: paused_for_credential(account, computer, label=HOSTILE_LABEL))
    await page.goto(f"{human_origin}/tasks/{run.id}/intervention")
    await sign_in(page, person.username, PASSWORD)
    await assert_statement_then_label(page)
    # The origin comes before the one-time Open.
    order = await page.evaluate(
        "() => document.querySelector('#portal-origin').compareDocumentPosition(document.querySelector('#open-button'))"
    )
    assert order & 4, "the origin is shown before the Open button"
    async with page.expect_navigation():
        await page.get_by_role("button", name="Open the credential form").click()
    assert page.url == f"{human_origin}/tasks/{run.id}/credential"
    await assert_statement_then_label(page)


async def test_overwriting_a_stored_credential_needs_the_persons_confirmation(
    human_origin: str, page: Page, leak_guard: LeakGuard, vault: VaultServer, person: User, account: Account, computer: Computer
) -> None:
    leak_guard.watch(PASSWORD, "Original-Pa55", "Replacement-Pa55")

    def earlier_request() -> None:
        earlier = paused_for_credential(account, computer, label="Portal", credential_id="acme")
        CredentialRequest.objects.filter(run=earlier).update(state="credential_saved", saved_at=earlier.created_at)
        portal_credential_write(
            token=vault.root_token,
            account_id=account.id,
            credential_id="acme",
            credential=PortalCredential(username="ana", password="Original-Pa55", origins=(PORTAL,)),
        )

    await orm(earlier_request)
    run = await orm(lambda: paused_for_credential(account, computer, label="Portal", credential_id="acme"))
    await page.goto(f"{human_origin}/tasks/{run.id}/intervention")
    await sign_in(page, person.username, PASSWORD)
    async with page.expect_navigation():
        await page.get_by_role("button", name="Open the credential form").click()
    await page.locator("#replace-warning").wait_for()
    await page.get_by_label("Username").fill("mallory")
    await page.get_by_label("Password").fill("Replacement-Pa55")
    await page.get_by_role("button", name="Save in the vault").click()
    await page.get_by_text("already stored under this id").wait_for()

    def stored() -> str:
        credential = portal_credential_read_back(account_id=account.id, credential_id="acme")
        assert credential is not None
        return credential.password

    assert await orm(stored) == "Original-Pa55", "nothing was replaced without the person's confirmation"
    request = await orm(lambda: CredentialRequest.objects.get(run=run))
    assert request.state == "pending"
    # The same form (the invite was not used) saves once the person confirms.
    await page.get_by_label("Replace the stored credential").check()
    await page.get_by_role("button", name="Save in the vault").click()
    await page.get_by_text("Saved in the vault. This is not a sign-in").wait_for()
    assert await orm(stored) == "Replacement-Pa55"
