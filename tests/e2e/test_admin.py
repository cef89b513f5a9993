"""The staff admin in a real browser: sign in, create an account, a user, a runner
key (shown once) and a computer, top up credits so a ``credits`` run can be
continued, revoke a key; the run side is strictly read-only."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import time_machine
from django.contrib.auth.models import User
from playwright.async_api import Browser, Page

from accounts.models import Account, AccountEvent, ApiKey, Membership
from accounts.services import digest
from computers.models import Computer
from runs.models import CredentialRequest, Run, RunEvent, RunStep
from tests.e2e.conftest import LeakGuard, orm
from tests.e2e.pages import FROZEN, PASSWORD, VIEWPORTS, build_demo
from tests.support.vault import VaultServer, vendor_secret_read_back
from visual.models import VisualSession

pytestmark = pytest.mark.e2e

STAFF_PASSWORD = "staff horse battery staple"
NEW_USER_PASSWORD = "a new person's passphrase 42"


@pytest.fixture
def staff(transactional_db: None) -> User:
    return User.objects.create_superuser(username="staff", password=STAFF_PASSWORD, email="")


async def admin_sign_in(page: Page, origin: str) -> None:
    await page.goto(f"{origin}/admin/login/?next=/admin/")
    await page.get_by_label("Username").fill("staff")
    await page.get_by_label("Password").fill(STAFF_PASSWORD)
    async with page.expect_navigation():
        await page.get_by_role("button", name="Log in").click()
    assert page.url == f"{origin}/admin/"


async def save(page: Page) -> None:
    async with page.expect_navigation():
        await page.get_by_role("button", name="Save", exact=True).click()


async def api(origin: str, method: str, path: str, key: str, body: Any = None) -> httpx.Response:
    async with httpx.AsyncClient(base_url=origin, timeout=20) as client:
        return await client.request(method, path, json=body, headers={"Authorization": f"Bearer {key}"})


async def test_staff_sets_up_an_account_and_unblocks_a_credits_run(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    staff: User,
    make_paused_run: Callable[..., Run],
) -> None:
    leak_guard.watch(STAFF_PASSWORD, NEW_USER_PASSWORD)
    posts: list[tuple[str, str | None]] = []
    page.on("request", lambda r: posts.append((r.url, r.headers.get("origin"))) if r.method == "POST" else None)
    await admin_sign_in(page, human_origin)

    # An account.
    await page.goto(f"{human_origin}/admin/accounts/account/add/")
    await page.get_by_label("Name").fill("Globex")
    await save(page)
    await page.get_by_text("was added successfully").first.wait_for()
    account = await orm(lambda: Account.objects.get(name="Globex"))

    # A user of that account, with a password.
    await page.goto(f"{human_origin}/admin/auth/user/add/")
    await page.get_by_label("Username").fill("ana")
    await page.locator("#id_password1").fill(NEW_USER_PASSWORD)
    await page.locator("#id_password2").fill(NEW_USER_PASSWORD)
    await page.locator("select[name='membership-0-account']").select_option(label="Globex")
    await save(page)
    await page.get_by_text("was added successfully").first.wait_for()
    user = await orm(lambda: User.objects.get(username="ana"))
    assert await orm(lambda: user.check_password(NEW_USER_PASSWORD))
    assert await orm(lambda: Membership.objects.get(user=user).account_id) == account.id

    # A runner key, shown once.
    await page.goto(f"{human_origin}/admin/accounts/apikey/add/")
    await page.get_by_label("Account").select_option(label="Globex")
    await page.get_by_label("Kind").select_option("runner")
    await page.get_by_label("Name").fill("harness")
    await save(page)
    raw = (await page.locator("#raw-key").text_content() or "").strip()
    leak_guard.watch(raw)
    assert raw.startswith("ram_rk_")
    key = await orm(lambda: ApiKey.objects.get(account=account, name="harness"))
    assert key.digest == digest(raw) and key.kind == "runner"
    await page.goto(f"{human_origin}/admin/accounts/apikey/{key.pk}/change/")
    assert raw not in await page.content()

    # A computer.
    await page.goto(f"{human_origin}/admin/computers/computer/add/")
    await page.get_by_role("textbox", name="Id:").fill("globex-pc")
    await page.get_by_label("Account").select_option(label="Globex")
    await page.get_by_role("textbox", name="Name:", exact=True).fill("Globex desk")  # not "Proxy username"
    await save(page)
    await page.get_by_text("was added successfully").first.wait_for()
    computer = await orm(lambda: Computer.objects.get(pk="globex-pc"))
    assert computer.account_id == account.id

    # A run paused for credits cannot continue until staff tops up the account.
    run = await orm(lambda: make_paused_run(account, computer, "credits", required=12_000_000))
    refused = await api(human_origin, "POST", f"/api/runs/{run.id}/continue", raw, {"idempotency_key": "credits-1"})
    assert refused.status_code == 409 and refused.json()["missing_microcredits"] == "12000000"
    await page.goto(f"{human_origin}/admin/accounts/account/{account.pk}/change/")
    await page.get_by_label("Top up microcredits").fill("12000000")
    await save(page)
    assert (await orm(lambda: Account.objects.get(pk=account.pk))).microcredit_balance == 12_000_000
    event = await orm(lambda: AccountEvent.objects.get(account=account, kind="credits_topped_up"))
    assert event.actor == "staff:staff" and event.data["microcredits"] == "12000000"
    continued = await api(human_origin, "POST", f"/api/runs/{run.id}/continue", raw, {"idempotency_key": "credits-2"})
    assert continued.status_code == 201

    # Revoke the key from the list's action: it stops working at once.
    await page.goto(f"{human_origin}/admin/accounts/apikey/")
    await page.locator(f"input[name='_selected_action'][value='{key.pk}']").check()
    await page.locator("select[name='action']").select_option("revoke")
    async with page.expect_navigation():
        await page.get_by_role("button", name="Run").click()
    await page.get_by_text("Revoked 1 key(s).").wait_for()
    assert (await api(human_origin, "GET", "/api/runs", raw)).status_code == 401

    # Every one of those posts carried this site's exact Origin (Referrer-Policy same-origin).
    assert posts and all(origin == human_origin for _, origin in posts), posts


async def test_run_side_of_the_admin_is_read_only(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    staff: User,
    account: Account,
    computer: Computer,
    make_paused_run: Callable[..., Run],
) -> None:
    leak_guard.watch(STAFF_PASSWORD)
    run = await orm(lambda: make_paused_run(account, computer, "credential"))

    def add_rows() -> tuple[int, int, Any, Any]:
        step = RunStep.objects.create(run=run, index=0, tool="navigate", summary={"url": "https://example.com/"})
        session = VisualSession.objects.create(account=account, computer=computer, mode="observe")
        return step.pk, RunEvent.objects.filter(run=run).first().pk, CredentialRequest.objects.get(run=run).pk, session.pk  # type: ignore[union-attr]

    step_id, event_id, request_id, session_id = await orm(add_rows)
    await admin_sign_in(page, human_origin)
    await page.goto(f"{human_origin}/admin/runs/run/{run.id}/change/")
    await page.get_by_role("heading", name="View run").wait_for()
    assert await page.get_by_role("button", name="Save").count() == 0
    assert await page.get_by_role("link", name="Delete").count() == 0
    assert await page.locator("textarea, input[type=text], select").count() == 0

    for path in (
        f"runs/run/{run.id}",
        f"runs/runstep/{step_id}",
        f"runs/runevent/{event_id}",
        f"runs/credentialrequest/{request_id}",
        f"visual/visualsession/{session_id}",
    ):
        response = await page.goto(f"{human_origin}/admin/{path}/delete/")
        assert response is not None and response.status == 403, path
        response = await page.goto(f"{human_origin}/admin/{path}/change/")
        assert response is not None and response.status == 200, path
        assert await page.get_by_role("button", name="Save").count() == 0, path
    for model in ("runs/run", "runs/runstep", "runs/runevent", "runs/credentialrequest", "visual/visualsession"):
        await page.goto(f"{human_origin}/admin/{model}/")
        assert await page.locator("option[value='delete_selected']").count() == 0, model
        response = await page.goto(f"{human_origin}/admin/{model}/add/")
        assert response is not None and response.status == 403, model

    # A forged change post (with a valid CSRF token, from this origin) changes nothing.
    token = next(c["value"] for c in await page.context.cookies() if c["name"] == "csrftoken")
    before = await orm(lambda: Run.objects.get(pk=run.pk))
    response = await page.request.post(
        f"{human_origin}/admin/runs/run/{run.id}/change/",
        form={"csrfmiddlewaretoken": token, "agent_state": '{"cursor": 99}', "status": "succeeded"},
        headers={"Origin": human_origin, "Referer": f"{human_origin}/admin/"},
    )
    assert response.status == 403
    after = await orm(lambda: Run.objects.get(pk=run.pk))
    assert (after.status, after.agent_state) == (before.status, before.agent_state)


async def test_staff_choose_steel_with_a_secret_that_lands_in_vault_only(
    human_origin: str,
    page: Page,
    leak_guard: LeakGuard,
    staff: User,
    account: Account,
    computer: Computer,
    vault: VaultServer,
    settings: Any,
) -> None:
    secret = "sk-steel-" + secrets.token_urlsafe(18)
    other = "bb-" + secrets.token_urlsafe(18)
    leak_guard.watch(STAFF_PASSWORD, secret, other)

    async def stored(vendor: str) -> str | None:
        return await orm(lambda: vendor_secret_read_back(account_id=account.id, vendor=vendor))

    url = f"{human_origin}/admin/computers/computer/{computer.pk}/change/"
    await admin_sign_in(page, human_origin)
    await page.goto(url)
    # The backend says when a change applies.
    help_text = await page.locator("#id_browser_backend_helptext").text_content() or ""
    assert "applies at once" in help_text and "heartbeat" in help_text

    # A bad option: the form again with its error; nothing changed, nothing in Vault.
    await page.get_by_label("Browser backend").select_option("steel")
    await page.get_by_label("Browser options").fill('{"solve_captcha": "yes"}')
    await page.get_by_label("Browser secret").fill(secret)
    await save(page)
    await page.get_by_text("Options that do not fit the steel backend").wait_for()
    assert secret not in await page.content()
    assert (await orm(lambda: Computer.objects.get(pk=computer.pk))).browser_backend == "local"
    assert await stored("steel") is None

    # Steel with its API key: the key goes to Vault only, the row holds the options.
    await page.get_by_label("Browser options").fill('{"api_url": "https://steel.internal.example", "solve_captcha": true}')
    await page.get_by_label("Browser secret").fill(secret)
    await save(page)
    await page.get_by_text("was changed successfully").wait_for()
    row = await orm(lambda: Computer.objects.get(pk=computer.pk))
    assert row.browser_backend == "steel"
    assert row.browser_options == {
        "api_url": "https://steel.internal.example", "solve_captcha": True, "session_timeout_ms": 3_600_000
    }  # fmt: skip
    assert await stored("steel") == secret
    await page.goto(url)
    assert secret not in await page.content()
    assert await page.get_by_label("Browser secret").input_value() == ""

    # Vault refusing the write: the backend is not changed, and the page says so.
    settings.VAULT_TOKEN = "not-a-vault-token"
    await page.get_by_label("Browser backend").select_option("browserbase")
    await page.get_by_label("Browser options").fill("{}")
    await page.get_by_label("Browser secret").fill(other)
    await save(page)
    await page.get_by_text("Vault could not store the browser secret; the browser backend was not changed.").wait_for()
    assert await page.get_by_text("was changed successfully").count() == 0
    assert other not in await page.content()
    row = await orm(lambda: Computer.objects.get(pk=computer.pk))
    assert row.browser_backend == "steel" and row.browser_options["api_url"] == "https://steel.internal.example"
    settings.VAULT_TOKEN = vault.server_token
    assert await stored("browserbase") is None


@pytest.mark.parametrize("size", ["desktop", "phone"])
async def test_staff_read_the_run_list_and_a_runs_steps_with_their_masked_captures(
    human_origin: str, browser: Browser, leak_guard: LeakGuard, size: str
) -> None:
    leak_guard.watch(PASSWORD)
    with time_machine.travel(FROZEN, tick=False):
        demo = await orm(build_demo)
    context = await browser.new_context(viewport=VIEWPORTS[size], device_scale_factor=1)
    page = await context.new_page()
    page.on("request", leak_guard.record_request)
    posts: list[str | None] = []
    page.on("request", lambda r: posts.append(r.headers.get("origin")) if r.method == "POST" else None)
    try:
        # A real sign-in and clicks: index, Runs, then the run by its goal.
        await page.goto(f"{human_origin}/admin/login/?next=/admin/")
        await page.get_by_label("Username").fill("staff")
        await page.get_by_label("Password").fill(PASSWORD)
        async with page.expect_navigation():
            await page.get_by_role("button", name="Log in").click()
        assert page.url == f"{human_origin}/admin/"
        async with page.expect_navigation():
            await page.locator("#runs-run").get_by_role("link", name="Runs", exact=True).click()
        assert page.url == f"{human_origin}/admin/runs/run/"

        # The list names each run by its goal, with its status, computer and creation time.
        headers = [h.strip().lower() for h in await page.locator("#result_list thead th").all_inner_texts()]
        for column in ("goal", "status", "computer", "created at"):
            assert column in headers, headers
        row = page.locator("#result_list tbody tr").filter(has_text="Renew the parking permit for the delivery van")
        assert await row.count() == 1
        row_text = await row.inner_text()
        assert "Waiting For Input" in row_text and "acme-desk" in row_text and "Nov. 30, 2026" in row_text
        assert str(demo.takeover_run.id) not in row_text  # a short id only, the goal is the link
        async with page.expect_navigation():
            await row.get_by_role("link", name=re.compile("Renew the parking permit")).click()
        assert page.url == f"{human_origin}/admin/runs/run/{demo.takeover_run.id}/change/"

        # Its steps, each with its secret-free details, and the masked capture taken after step 3.
        steps = page.locator("table.ram-steps tbody tr")
        assert await steps.count() == 4
        assert "https://permits.city.example/renew" in await steps.nth(0).inner_text()
        assert "typed 8 characters" in await steps.nth(2).inner_text()
        assert await steps.nth(0).locator("img").count() == 0
        capture = steps.nth(3).get_by_role("img", name="Masked capture after step 3")
        await capture.scroll_into_view_if_needed()
        await page.wait_for_function(
            "(img) => img.complete && img.naturalWidth === 1280", arg=await capture.element_handle()
        )
        box = await capture.bounding_box()
        assert box is not None and 0 < box["x"] and box["x"] + box["width"] <= VIEWPORTS[size]["width"]
        href = await steps.nth(3).locator("a.ram-capture").get_attribute("href")
        assert href is not None and href.startswith(f"/admin/runs/run/{demo.takeover_run.id}/captures/")
        async with page.expect_navigation():
            await steps.nth(3).locator("a.ram-capture").click()
        shown = await page.request.get(f"{human_origin}{href}")
        assert shown.status == 200 and shown.headers["content-type"] == "image/jpeg"

        # A capture through another run's address is not served; without a staff session, nothing is.
        artifact_id = href.rsplit("/", 1)[1]
        other = await page.request.get(f"{human_origin}/admin/runs/run/{demo.credential_run.id}/captures/{artifact_id}")
        assert other.status == 404
        anonymous = await browser.new_context()
        try:
            refused = await anonymous.request.get(f"{human_origin}{href}", max_redirects=0)
            assert refused.status == 302 and "/admin/login/" in refused.headers["location"]
        finally:
            await anonymous.close()
        assert all(origin == human_origin for origin in posts), posts
    finally:
        await context.close()
