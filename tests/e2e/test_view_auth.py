"""A site's HTTP sign-in prompt on /view in a real browser: when the computer's page asks for
basic auth, the prompt appears over the screen like a dialog (the origin that asks, the site's
realm as its own words, a username and a password field); a person with control signs in or
cancels with plain clicks and typing, on a desktop and on a phone. The password reaches the
site's Authorization header and nothing else: no log line, event, table or Referer holds it."""

from __future__ import annotations

import base64

import pytest
from playwright.async_api import BrowserContext, Page
from playwright.async_api import Error as PlaywrightError

from accounts.models import Account
from executor.runtime import Executor
from tests.e2e.conftest import LeakGuard, ana_at_her_desk, screenshot
from tests.e2e.test_view import PASSWORD, _open, _status
from tests.support.screen import on_executor
from tests.support.site import STAGING_REALM, Site
from tests.support.waits import eventually_async

pytestmark = pytest.mark.e2e

SITE_USER, SITE_PASSWORD, WRONG_PASSWORD = "ana.lima", "Staging-Key-5521", "Staging-Wrong-0042"


@pytest.fixture
async def desk(human_origin: str, leak_guard: LeakGuard, view_executor: Executor, site: Site) -> Account:
    """Ana's account and computer; the computer shows the site; /staging asks for basic auth."""
    leak_guard.watch(SITE_PASSWORD, WRONG_PASSWORD)
    site.basic_users[SITE_USER] = SITE_PASSWORD
    account = await ana_at_her_desk(leak_guard, view_executor, PASSWORD)
    on_executor(view_executor, lambda: view_executor.page.goto(site.origin + "/docs"))
    return account


def _ask(executor: Executor) -> None:
    """The computer's page goes to the protected page (a link the page follows, not awaited)."""
    on_executor(executor, lambda: executor.page.evaluate("() => { setTimeout(() => { location.href = '/staging'; }, 0); }"))


def _waiting(executor: Executor) -> list[str]:
    async def read() -> list[str]:
        return [d["kind"] for d in executor.pages.dialogs_describe()]

    return list(on_executor(executor, read))


def _shown(executor: Executor) -> str:
    """What the computer's page shows ("" while it is between two documents)."""

    async def read() -> str:
        try:
            return str(await executor.page.content())
        except PlaywrightError:
            return ""

    return str(on_executor(executor, read))


def _basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


async def _type_into(page: Page, label: str, text: str, *, tap: bool = False) -> None:
    """A person's own click (or tap) on a field, then typing, key by key."""
    field = page.get_by_label(label, exact=True)
    await (field.tap() if tap else field.click())
    await page.keyboard.type(text)


async def test_a_person_signs_in_over_the_screen_and_a_wrong_password_is_asked_again(
    human_origin: str, desk: Account, desktop: BrowserContext, leak_guard: LeakGuard, view_executor: Executor, site: Site
) -> None:
    page = await _open(desktop, human_origin, leak_guard)
    overlay = page.locator("#screen-dialog")
    _ask(view_executor)
    await overlay.wait_for(state="visible")
    card = page.get_by_role("alertdialog")
    assert await card.locator("#dialog-title").text_content() == "The site asks you to sign in"
    message = await card.locator("#dialog-message").text_content() or ""
    assert message == f"{site.origin} asks for a username and password. The site calls it “{STAGING_REALM}”."
    # Watching: the prompt is shown, and answered only with control.
    assert await page.get_by_role("button", name="Sign in").is_disabled()
    assert await page.get_by_label("Password", exact=True).is_disabled()
    assert "Take control to answer it" in (await page.locator("#dialog-note").text_content() or "")
    assert await page.locator("#dialog-text-label").is_hidden()

    await page.get_by_role("button", name="Take control").click()
    await _status(page, "You have control")
    assert await page.get_by_label("Username", exact=True).evaluate("(f) => f === document.activeElement")
    assert await page.get_by_label("Password", exact=True).get_attribute("type") == "password"
    await _type_into(page, "Username", SITE_USER)
    await _type_into(page, "Password", WRONG_PASSWORD)
    await screenshot(page, "view-auth")
    await page.get_by_role("button", name="Sign in").click()

    # The site refuses it and asks again: a new prompt, its fields empty, saying why.
    await page.locator("#dialog-where").filter(has_text="The site asked again").wait_for()
    assert await overlay.is_visible()
    assert await page.get_by_label("Password", exact=True).input_value() == ""
    assert await page.get_by_label("Username", exact=True).input_value() == ""
    await _type_into(page, "Username", SITE_USER)
    await _type_into(page, "Password", SITE_PASSWORD)
    await page.keyboard.press("Enter")
    await overlay.wait_for(state="hidden")
    assert await eventually_async(seconds=20, thread=True, check=lambda: f"Staging, signed in as {SITE_USER}" in _shown(view_executor))
    assert site.authorizations == [_basic(SITE_USER, WRONG_PASSWORD), _basic(SITE_USER, SITE_PASSWORD)]
    assert _waiting(view_executor) == []
    # The person's page keeps no copy of what was typed.
    for label in ("Username", "Password"):
        assert await page.get_by_label(label, exact=True).input_value() == ""
    await page.get_by_role("button", name="Release").click()
    await _status(page, "Observing")


async def test_on_a_phone_a_person_cancels_then_signs_in_with_taps_and_typing(
    human_origin: str, desk: Account, phone: BrowserContext, leak_guard: LeakGuard, view_executor: Executor, site: Site
) -> None:
    page = await _open(phone, human_origin, leak_guard)
    _ask(view_executor)
    card = page.get_by_role("alertdialog")
    await card.wait_for(state="visible")
    box, stage = await card.bounding_box(), await page.locator("#screen-stage").bounding_box()
    assert box is not None and stage is not None
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["y"] + box["height"] <= stage["y"]  # above the screen
    await page.get_by_role("button", name="Take control").tap()
    await _status(page, "You have control")
    cancel = page.get_by_role("button", name="Cancel")
    cancel_box = await cancel.bounding_box()
    assert cancel_box is not None and cancel_box["height"] >= 44
    await cancel.tap()
    await card.wait_for(state="hidden")
    assert await eventually_async(seconds=20, thread=True, check=lambda: "401: sign-in required" in _shown(view_executor))
    assert site.authorizations == []

    _ask(view_executor)
    await card.wait_for(state="visible")
    await _type_into(page, "Username", SITE_USER, tap=True)
    await _type_into(page, "Password", SITE_PASSWORD, tap=True)
    await screenshot(page, "view-phone-auth")
    sign_in = page.get_by_role("button", name="Sign in")
    sign_in_box = await sign_in.bounding_box()
    assert sign_in_box is not None and sign_in_box["x"] + sign_in_box["width"] <= 390
    await sign_in.tap()
    await card.wait_for(state="hidden")
    assert await eventually_async(seconds=20, thread=True, check=lambda: f"Staging, signed in as {SITE_USER}" in _shown(view_executor))
    assert site.authorizations == [_basic(SITE_USER, SITE_PASSWORD)]
    await page.get_by_role("button", name="Release").tap()
    await _status(page, "Observing")
