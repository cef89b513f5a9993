"""Popups and tabs on /view in a real browser: a person completes an OAuth-style popup
the computer's page opened, comes back to the opener, and switches and closes tabs
(desktop and a phone), all through the screen."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page, expect

from accounts.models import Account
from executor.runtime import Executor
from tests.e2e.conftest import LeakGuard, ana_at_her_desk, screenshot
from tests.e2e.test_view import PASSWORD, _click_at, _open, _status
from tests.support.screen import on_executor
from tests.support.site import Site
from tests.support.waits import eventually_async

pytestmark = pytest.mark.e2e


@pytest.fixture
async def signed_in_desk(human_origin: str, leak_guard: LeakGuard, view_executor: Executor, site: Site) -> Account:
    """Ana's account and computer; the computer's browser is signed in to the local portal."""
    account = await ana_at_her_desk(leak_guard, view_executor, PASSWORD)

    async def portal() -> None:
        page = view_executor.page
        await page.goto(site.origin + "/")
        await page.fill("#name", "Ana")
        async with page.expect_navigation():
            await page.click("#sign-in")

    on_executor(view_executor, portal)
    return account


def _tabs(executor: Executor) -> list[tuple[str, bool]]:
    listed = on_executor(executor, executor.pages.tabs_describe)
    return [(t["title"], t["active"]) for t in listed]


def _remote(executor: Executor, script: str) -> Any:
    return on_executor(executor, lambda: executor.page.evaluate(script))


async def _take_control(page: Page) -> None:
    await page.get_by_role("button", name="Take control").click()
    await _status(page, "You have control")


async def _type_into(page: Page, executor: Executor, x: float, y: float, element_id: str, text: str) -> None:
    await _click_at(page, x, y)
    assert await eventually_async(seconds=20, thread=True, check=lambda: _remote(executor, "document.activeElement && document.activeElement.id") == element_id)
    await page.keyboard.type(text)
    assert await eventually_async(seconds=20, thread=True, check=lambda: _remote(executor, f"document.getElementById('{element_id}').value") == text)


async def test_a_person_completes_an_oauth_popup_through_the_screen_and_returns_to_the_opener(
    human_origin: str, signed_in_desk: Account, desktop: BrowserContext, leak_guard: LeakGuard, view_executor: Executor, site: Site
) -> None:
    page = await _open(desktop, human_origin, leak_guard)
    tabs = page.locator("#screen-tabs")
    address = page.locator("#screen-url")
    assert await tabs.is_hidden()  # one page: no tab strip
    await _take_control(page)
    await _click_at(page, 190, 175)  # the portal's "Connect": window.open of the authorization page

    # The screen follows the popup: the strip lists both pages, the popup is current, the person is told.
    # (Each waits: the popup's title and address arrive after it opens, later on a loaded machine.)
    await page.locator("#screen-tab-notice").filter(has_text="The computer opened a new page").wait_for()
    await page.locator("#screen-tab-notice").filter(has_text="Authorize Portal").wait_for()
    await tabs.wait_for(state="visible")
    await page.locator("#tab-list li").nth(1).wait_for()
    assert await page.locator("#tab-list li").count() == 2
    await page.locator("#tab-list [aria-current=page]").filter(has_text="Authorize Portal").wait_for()
    await expect(address).to_have_value(re.compile(r"/oauth/authorize$"), timeout=20_000)
    assert await eventually_async(seconds=20, thread=True, check=lambda: _tabs(view_executor) == [("Portal home", False), ("Authorize Portal", True)])
    await asyncio.sleep(0.5)  # a frame of the popup on screen
    await screenshot(page, "view-popup")

    # The person completes the popup's form through the screen.
    await _type_into(page, view_executor, 190, 140, "user", "ana@example.com")
    await _click_at(page, 190, 220)  # "Allow": the popup hands the code to its opener and closes

    await page.locator("#screen-tab-notice").filter(has_text="The screen now shows the tab “Portal home”").wait_for()
    await tabs.wait_for(state="hidden")
    assert await eventually_async(seconds=20, thread=True, check=lambda: _tabs(view_executor) == [("Portal home", True)])
    assert await eventually_async(seconds=20, thread=True, check=lambda: _remote(view_executor, "document.getElementById('connected').textContent") == "Connected as ana@example.com")
    await expect(address).to_have_value(site.origin + "/", timeout=20_000)
    assert site.approvals == ["ana@example.com"]
    await page.get_by_role("button", name="Release").click()
    await _status(page, "Observing")


async def test_a_person_with_control_switches_and_closes_tabs_and_an_observer_cannot(
    human_origin: str, signed_in_desk: Account, desktop: BrowserContext, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    page = await _open(desktop, human_origin, leak_guard)
    await _take_control(page)
    await _click_at(page, 190, 275)  # a target=_blank link: a new tab
    await page.locator("#tab-list li").nth(1).wait_for()
    await page.locator("#tab-list [aria-current=page]").filter(has_text="Documentation").wait_for()

    await page.get_by_role("button", name="Portal home", exact=True).click()
    assert await eventually_async(seconds=20, thread=True, check=lambda: _tabs(view_executor) == [("Portal home", True), ("Documentation", False)])
    await page.locator("#tab-list [aria-current=page]").filter(has_text="Portal home").wait_for()
    assert await eventually_async(seconds=20, thread=True, check=lambda: _remote(view_executor, "document.title") == "Portal home")

    await page.get_by_role("button", name="Close the tab Documentation").click()
    assert await eventually_async(seconds=20, thread=True, check=lambda: _tabs(view_executor) == [("Portal home", True)])
    await page.locator("#screen-tabs").wait_for(state="hidden")

    # Released: the strip is only shown, never used.
    await _click_at(page, 190, 275)
    await page.locator("#tab-list li").nth(1).wait_for()
    await page.get_by_role("button", name="Release").click()
    await _status(page, "Observing")
    assert await page.get_by_role("button", name="Portal home", exact=True).is_disabled()
    closers = page.locator("#tab-list .tab-close")
    assert await closers.count() == 2
    assert all([await closers.nth(i).is_disabled() and not await closers.nth(i).is_visible() for i in range(2)])
    assert await eventually_async(seconds=20, thread=True, check=lambda: _tabs(view_executor) == [("Portal home", False), ("Documentation", True)])


async def test_on_a_phone_the_tabs_fit_and_switch(
    human_origin: str, signed_in_desk: Account, phone: BrowserContext, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    on_executor(view_executor, lambda: view_executor.page.evaluate("() => window.open('/docs', '_blank')"))
    page = await _open(phone, human_origin, leak_guard)
    strip = page.locator("#screen-tabs")
    await strip.wait_for(state="visible")
    box = await strip.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    await page.get_by_role("button", name="Take control").tap()
    await _status(page, "You have control")
    await page.get_by_role("button", name="Portal home", exact=True).tap()
    assert await eventually_async(seconds=20, thread=True, check=lambda: _tabs(view_executor) == [("Portal home", True), ("Documentation", False)])
    await screenshot(page, "view-phone-tabs")
    await page.get_by_role("button", name="Release").tap()
    await _status(page, "Observing")
