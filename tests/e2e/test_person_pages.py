"""The person's own pages in Chromium: home, the task page, stored credentials,
the pages of unavailable interventions, double submission and keyboard-only use.
All on the fixed demo data and frozen clock of the screenshot tour."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator

import httpx
import hvac
import pytest
import time_machine
from playwright.async_api import Browser, Page

from accounts.models import AccountEvent
from accounts.services import api_key_create
from runs.models import CredentialReplacement, CredentialRequest, RunEvent, StoredCredential
from tests.e2e.conftest import LeakGuard, orm, sign_in
from tests.e2e.pages import BROWSER_NOW, FROZEN, PASSWORD, VIEWPORTS, Demo, build_demo
from tests.support.vault import VaultServer, portal_credential_read_back
from vault_bridge.credentials import PortalCredential, portal_credential_path

pytestmark = pytest.mark.e2e

PORTAL_PASSWORD = "Supplier-Pa55-word"


@pytest.fixture
def frozen() -> Iterator[None]:
    with time_machine.travel(FROZEN, tick=False):
        yield


@pytest.fixture
async def demo(human_origin: str, frozen: None, leak_guard: LeakGuard) -> Demo:
    leak_guard.watch(PASSWORD, PORTAL_PASSWORD)
    return await orm(build_demo)


@pytest.fixture(params=list(VIEWPORTS))
async def person_page(request: pytest.FixtureRequest, browser: Browser, leak_guard: LeakGuard) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport=VIEWPORTS[request.param], device_scale_factor=1)
    await context.clock.install(time=BROWSER_NOW)
    await context.clock.pause_at(BROWSER_NOW)
    page = await context.new_page()
    page.on("request", leak_guard.record_request)
    try:
        yield page
    finally:
        await context.close()


async def signed_in(page: Page, origin: str, path: str = "/", username: str = "ana") -> None:
    await page.goto(f"{origin}{path}")
    await sign_in(page, username, PASSWORD)


async def test_home_lists_what_waits_newest_first_then_what_expired_then_recent_tasks(
    human_origin: str, demo: Demo, person_page: Page
) -> None:
    page = person_page
    await signed_in(page, human_origin)
    assert page.url == f"{human_origin}/"
    items = page.locator("#waiting > li")
    goals = [(await items.nth(i).locator("blockquote").inner_text()).strip() for i in range(await items.count())]
    assert goals == [
        "Download the October invoices from the supplier portal and file them in the shared folder.",
        "File the VAT return on the tax portal.",
        "Summarise this week's unread email from suppliers.",
        "Renew the parking permit for the delivery van on the city website.",
    ]
    first = items.nth(0)
    for text in ("Save a credential", "because of a sign-in", "https://portal.example", "acme-desk", "4 minutes"):
        await first.get_by_text(text).first.wait_for()
    assert await first.locator("[data-countdown-for]").inner_text() == "(10 min 15 s left)"
    await items.nth(3).get_by_text("because of a CAPTCHA").wait_for()
    assert await items.nth(3).get_by_text("Deadline").count() == 0  # a takeover has none
    # The payroll request expired: it is listed apart, below, not as something waiting for the person.
    waiting = page.locator("section[aria-labelledby=waiting-title]")
    assert "payroll" not in await waiting.inner_text()
    stale = page.locator("section[aria-labelledby=stale-title]")
    await stale.get_by_role("heading", name="Expired or no longer actionable").wait_for()
    expired = page.locator("#stale > li")
    assert await expired.count() == 1
    assert (await expired.locator("blockquote").inner_text()).strip() == "Download last month's payslips from the payroll site."
    await expired.get_by_text("expired").first.wait_for()
    await expired.get_by_text("https://payroll.example").wait_for()
    assert await expired.locator("[data-countdown-for]").count() == 0
    waiting_box, stale_box = await waiting.bounding_box(), await stale.bounding_box()
    assert waiting_box and stale_box and stale_box["y"] >= waiting_box["y"] + waiting_box["height"]
    recent = await page.locator("#recent").inner_text()
    assert "Succeeded" in recent and "Check the status of order PO-1042" in recent and "Cancelled" in recent
    async with page.expect_navigation():
        await first.get_by_role("link", name="Save a credential").click()
    assert page.url == f"{human_origin}/tasks/{demo.credential_run.id}/intervention"


async def test_home_of_a_person_with_nothing_to_do_explains_what_will_appear(
    human_origin: str, demo: Demo, person_page: Page
) -> None:
    await signed_in(person_page, human_origin, username="bruno")
    await person_page.get_by_text("Nothing is waiting for you. When a task needs a person").wait_for()
    await person_page.get_by_text("No tasks yet.").wait_for()


async def test_a_delegated_session_only_views_home_and_is_asked_for_a_password_to_act(
    human_origin: str, demo: Demo, person_page: Page, leak_guard: LeakGuard
) -> None:
    page = person_page
    _, key = await orm(lambda: api_key_create(account=demo.account, kind="runner"))
    leak_guard.watch(key)
    async with httpx.AsyncClient(base_url=human_origin, timeout=20) as client:
        response = await client.post(
            "/api/sessions/delegate", json={"username": "ana"}, headers={"Authorization": f"Bearer {key}"}
        )
    link = response.json()["url"]
    leak_guard.watch(link.partition("#token=")[2])
    await page.goto(link)
    async with page.expect_navigation():
        await page.get_by_role("button", name="Continue").click()
    assert page.url == f"{human_origin}/"
    await page.get_by_text("You signed in with a link, for viewing only.").wait_for()
    assert await page.locator("#waiting > li").count() == 4
    async with page.expect_navigation():
        await page.locator("#waiting > li").first.get_by_role("link").click()
    assert page.url.startswith(f"{human_origin}/accounts/login/?next=/tasks/")
    for path in ("/credentials", "/connections"):
        await page.goto(f"{human_origin}{path}")
        assert page.url.startswith(f"{human_origin}/accounts/login/")


async def test_task_page_shows_the_task_its_need_site_deadline_and_last_steps(
    human_origin: str, demo: Demo, person_page: Page
) -> None:
    page = person_page
    await signed_in(page, human_origin, f"/tasks/{demo.credential_run.id}/intervention")
    await page.get_by_text("The task, in its own words:").wait_for()
    quote = page.locator("blockquote#task-goal")
    assert (await quote.inner_text()).strip() == (
        "Download the October invoices from the supplier portal and file them in the shared folder."
    )
    assert await page.locator("#kind").inner_text() == "Save a credential, because of a sign-in"
    assert await page.locator("#portal-origin").inner_text() == "https://portal.example"
    assert await page.locator("#task-label").inner_text() == "Supplier portal"
    assert await page.locator("#computer").inner_text() == "acme-desk (Front desk)"
    timer = page.locator("#deadline [data-countdown-for]")
    assert await timer.inner_text() == "(10 min 15 s left)"
    await page.clock.run_for(5_000)
    assert await timer.inner_text() == "(10 min 10 s left)"
    await page.clock.run_for(10 * 60_000 + 10_000)
    assert await timer.inner_text() == "(the deadline has passed: reload the page)"
    steps = await page.locator("#last-steps li").all_inner_texts()
    assert steps == ["navigate — url https://portal.example/login", "wait_for — selector #username"]
    await page.locator("#no-screenshot").wait_for()


async def test_task_page_shows_the_latest_masked_capture_to_its_own_account_only(
    human_origin: str, demo: Demo, person_page: Page
) -> None:
    page = person_page
    await signed_in(page, human_origin, f"/tasks/{demo.takeover_run.id}/intervention")
    image = page.locator("#latest-screenshot")
    src = await image.get_attribute("src")
    assert src is not None and src.startswith(f"/tasks/{demo.takeover_run.id}/screenshots/")
    await page.wait_for_function("document.getElementById('latest-screenshot').naturalWidth === 1280")
    assert await page.locator("#deadline").inner_text() == "None: the task waits until you act or it is cancelled."
    # Not through another run of the same account...
    other = src.replace(str(demo.takeover_run.id), str(demo.credential_run.id))
    assert (await page.request.get(f"{human_origin}{src}")).status == 200
    assert (await page.request.get(f"{human_origin}{other}")).status == 404
    # ...nor to another account.
    await page.goto(f"{human_origin}/")
    async with page.expect_navigation():
        await page.get_by_role("button", name="Sign out").click()
    await signed_in(page, human_origin, "/", username="bruno")
    assert (await page.request.get(f"{human_origin}{src}")).status == 404


async def test_after_saving_the_task_page_says_what_happened_and_what_comes_next(
    human_origin: str, demo: Demo, person_page: Page, vault: VaultServer
) -> None:
    page = person_page
    task = f"/tasks/{demo.credential_run.id}/intervention"
    await signed_in(page, human_origin, task)
    async with page.expect_navigation():
        await page.get_by_role("button", name="Open the credential form").click()
    await page.get_by_label("Username").fill("ana@acme.example")
    await page.get_by_label("Password").fill(PORTAL_PASSWORD)
    await page.get_by_role("button", name="Save in the vault").click()
    await page.get_by_text("Saved in the vault. This is not a sign-in").wait_for()
    await page.goto(f"{human_origin}{task}")
    note = await page.locator("#state-note").inner_text()
    assert note.startswith("Done: the credential is stored in the vault. That is not a sign-in")
    assert "the task's operator checks the task and asks for an explicit continuation" in note
    assert await page.get_by_role("button", name="Open the credential form").count() == 0
    stored = await orm(lambda: StoredCredential.objects.get(account=demo.account, credential_id="supplier-portal"))
    assert (stored.label, stored.origins, stored.username_masked) == (
        "Supplier portal",
        ["https://portal.example"],
        "a***a@acme.example",
    )


@pytest.mark.parametrize(
    ("run_name", "title"),
    [
        ("expired_run", "This credential request expired"),
        ("cancelled_run", "This task was cancelled"),
    ],
)
async def test_unavailable_interventions_get_their_own_page_linking_home(
    human_origin: str, demo: Demo, person_page: Page, run_name: str, title: str
) -> None:
    page = person_page
    path = f"/tasks/{getattr(demo, run_name).id}/intervention"
    await signed_in(page, human_origin, path)
    await page.get_by_role("heading", name=title).wait_for()
    assert await page.locator("blockquote#task-goal").count() == 1
    links = await page.locator("main a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert links == ["/"]
    assert path not in links


async def test_an_already_opened_form_gets_its_own_page_and_no_second_invite(
    human_origin: str, demo: Demo, person_page: Page, vault: VaultServer
) -> None:
    page = person_page
    task = f"/tasks/{demo.opened_run.id}/intervention"
    await signed_in(page, human_origin, task)
    other = await page.context.new_page()
    await other.goto(f"{human_origin}{task}")
    async with other.expect_navigation():
        await other.get_by_role("button", name="Open the credential form").click()
    await other.close()
    async with page.expect_navigation():
        await page.get_by_role("button", name="Open the credential form").click()
    await page.get_by_role("heading", name="This form was already opened").wait_for()
    links = await page.locator("main a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert links == [task, "/"]
    assert await orm(lambda: RunEvent.objects.filter(run=demo.opened_run, kind="credential_form_opened").count()) == 1


async def test_another_accounts_task_looks_exactly_like_a_missing_one(
    human_origin: str, demo: Demo, person_page: Page
) -> None:
    page = person_page
    await signed_in(page, human_origin, "/", username="bruno")
    seen = []
    for path in (
        f"/tasks/{demo.credential_run.id}/intervention",
        "/tasks/00000000-0000-4000-8000-000000000000/intervention",
        "/tasks/not-a-uuid/intervention",
    ):
        response = await page.goto(f"{human_origin}{path}")
        assert response is not None
        seen.append((response.status, await page.locator("main").inner_text()))
    assert seen[0][0] == 404 and seen[0] == seen[1] == seen[2]


async def test_double_submission_is_refused_and_keeps_what_was_typed(
    human_origin: str, demo: Demo, person_page: Page, vault: VaultServer
) -> None:
    page = person_page
    opens: list[str] = []
    page.on("request", lambda r: opens.append(r.url) if r.method == "POST" and r.url.endswith("/open") else None)
    await signed_in(page, human_origin, f"/tasks/{demo.credential_run.id}/intervention")
    async with page.expect_navigation():
        await page.get_by_role("button", name="Open the credential form").dblclick()
    assert len(opens) == 1
    assert await orm(lambda: CredentialRequest.objects.get(run=demo.credential_run).opened_at) is not None

    # The Vault form: a refused input keeps everything typed; a double click saves once.
    saves: list[str] = []
    page.on("request", lambda r: saves.append(r.url) if r.method == "POST" and r.url.endswith("/credential") else None)
    await page.get_by_label("Username").fill("x" * 600)
    await page.get_by_label("Password").fill(PORTAL_PASSWORD)
    await page.get_by_role("button", name="Save in the vault").click()
    await page.locator("#form-status.error").wait_for()
    assert await page.get_by_label("Password").input_value() == PORTAL_PASSWORD
    assert await page.get_by_label("Username").input_value() == "x" * 600
    await page.get_by_label("Username").fill("ana@acme.example")
    await page.get_by_role("button", name="Save in the vault").dblclick()
    await page.get_by_text("Saved in the vault").wait_for()
    assert len(saves) == 2  # the refused one and exactly one save
    assert await orm(lambda: CredentialRequest.objects.get(run=demo.credential_run).state) == "credential_saved"


async def test_sign_in_refusal_keeps_the_username(human_origin: str, demo: Demo, person_page: Page) -> None:
    page = person_page
    await page.goto(f"{human_origin}/")
    await page.get_by_label("Username").fill("ana")
    await page.get_by_label("Password").fill("wrong password")
    async with page.expect_navigation():
        await page.get_by_role("button", name="Sign in").click()
    await page.get_by_role("alert").wait_for()
    assert await page.get_by_label("Username").input_value() == "ana"


async def test_keyboard_only_from_the_task_page_to_a_saved_credential(
    human_origin: str, demo: Demo, person_page: Page, vault: VaultServer
) -> None:
    page = person_page
    await page.goto(f"{human_origin}/tasks/{demo.credential_run.id}/intervention")
    # Sign in with the keyboard: the username field has focus (once the page has given it).
    await page.wait_for_function("document.activeElement && document.activeElement.name === 'username'")
    await page.keyboard.type("ana")
    await page.keyboard.press("Tab")
    await page.keyboard.type(PASSWORD)
    async with page.expect_navigation():
        await page.keyboard.press("Enter")
    await page.wait_for_load_state("load")
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.textContent") == "Skip to the content"
    await page.keyboard.press("Enter")
    for _ in range(20):
        await page.keyboard.press("Tab")
        if await page.evaluate("document.activeElement.id") == "open-button":
            break
    else:
        raise AssertionError("the Open button is not reachable with Tab")
    async with page.expect_navigation():
        await page.keyboard.press("Enter")
    await page.get_by_label("Username").wait_for()
    for _ in range(20):
        if await page.evaluate("document.activeElement.id") == "cred-username":
            break
        await page.keyboard.press("Tab")
    await page.keyboard.type("ana@acme.example")
    await page.keyboard.press("Tab")
    await page.keyboard.type(PORTAL_PASSWORD)
    await page.keyboard.press("Enter")
    await page.get_by_text("Saved in the vault").wait_for()
    stored = await orm(lambda: portal_credential_read_back(account_id=demo.account.id, credential_id="supplier-portal"))
    assert stored == PortalCredential(
        username="ana@acme.example", password=PORTAL_PASSWORD, origins=("https://portal.example",)
    )


async def test_stored_credentials_can_be_replaced_and_deleted(
    human_origin: str, demo: Demo, person_page: Page, vault: VaultServer, leak_guard: LeakGuard
) -> None:
    page = person_page
    await signed_in(page, human_origin, "/credentials")
    card = page.locator("#credential-billing-portal")
    text = await card.inner_text()
    for expected in ("Billing portal", "https://billing.example", "a***a@acme.example", "2026-11-27 14:00 UTC"):
        assert expected in text
    assert "by the task “Check the status of order PO-1042" in text

    # Replace: a new one-time form; the invite never stays in the address bar.
    invites: list[str] = []
    page.on("framenavigated", lambda f: invites.append(f.url) if "#invite=" in f.url else None)
    async with page.expect_navigation():
        await card.get_by_role("button", name="Replace").click()
    assert re.fullmatch(rf"{human_origin}/credentials/forms/[0-9a-f-]{{36}}", page.url)
    assert await page.evaluate("window.location.hash") == ""
    leak_guard.watch(*(u.partition("#invite=")[2] for u in invites))
    await page.get_by_label("Username").fill("bruno@acme.example")
    await page.get_by_label("Password").fill(PORTAL_PASSWORD)
    await page.get_by_role("button", name="Save in the vault").click()
    await page.get_by_text("Replaced in the vault").wait_for()
    stored = await orm(lambda: portal_credential_read_back(account_id=demo.account.id, credential_id="billing-portal"))
    assert stored == PortalCredential(
        username="bruno@acme.example", password=PORTAL_PASSWORD, origins=("https://billing.example",)
    )
    assert await orm(lambda: CredentialReplacement.objects.get().state) == "credential_saved"
    await page.get_by_role("link", name="Back to stored credentials").click()
    await page.locator("#credential-billing-portal").get_by_text("b***o@acme.example").wait_for()

    # Delete: confirm, then every version and the metadata are gone from Vault.
    card = page.locator("#credential-billing-portal")
    await card.get_by_text("Delete…").click()
    async with page.expect_navigation():
        await card.get_by_role("button", name="Delete “Billing portal” for good").click()
    await page.get_by_text("Deleted billing-portal from the vault").wait_for()
    await page.get_by_text("No credentials are stored yet.").wait_for()
    root = hvac.Client(url=vault.addr, token=vault.root_token)
    path = portal_credential_path(account_id=demo.account.id, credential_id="billing-portal")
    with pytest.raises(hvac.exceptions.InvalidPath):
        await orm(lambda: root.secrets.kv.v2.read_secret_metadata(path=path, mount_point=vault.kv_mount))
    event = await orm(lambda: AccountEvent.objects.get(account=demo.account, kind="credential_deleted"))
    assert event.actor == "user:ana"
    # Posting the same delete again (a double submission, a stale tab) changes nothing and says so.
    token = next(c["value"] for c in await page.context.cookies() if c["name"] == "csrftoken")
    response = await page.request.post(
        f"{human_origin}/credentials/billing-portal/delete",
        form={"csrfmiddlewaretoken": token, "confirm": "delete"},
        headers={"Origin": human_origin},
        max_redirects=0,
    )
    assert response.status == 303
    await page.goto(f"{human_origin}/credentials")
    await page.get_by_text("That credential is no longer stored.").wait_for()
    assert await orm(lambda: AccountEvent.objects.filter(kind="credential_deleted").count()) == 1
