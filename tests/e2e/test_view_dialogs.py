"""Dialogs on /view in a real browser: a confirm, a prompt, an alert and a "leave this
page?" the computer's page opens appear over the screen; a person with control answers
them (desktop and a phone), an observer sees them and cannot."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page

from accounts.models import Account
from executor.runtime import Executor
from tests.e2e.conftest import LeakGuard, ana_at_her_desk, screenshot
from tests.e2e.test_view import PASSWORD, _click_at, _open, _status
from tests.support.screen import on_executor
from tests.support.site import Site
from tests.support.waits import eventually_async

pytestmark = pytest.mark.e2e

# The centres of the buttons of the site's /dialogs page, in the computer's viewport.
ALERT, CONFIRM, PROMPT, EDIT, LEAVE = (190, 65), (190, 135), (190, 205), (190, 275), (190, 345)


@pytest.fixture
async def desk(human_origin: str, leak_guard: LeakGuard, view_executor: Executor, site: Site) -> Account:
    """Ana's account and computer; the computer shows the site's dialogs page."""
    account = await ana_at_her_desk(leak_guard, view_executor, PASSWORD)
    on_executor(view_executor, lambda: view_executor.page.goto(site.origin + "/dialogs"))
    return account


def _answer(executor: Executor) -> str:
    return str(on_executor(executor, lambda: executor.page.inner_text("#answer")))


def _waiting(executor: Executor) -> list[str]:
    async def read() -> list[str]:
        return [d["kind"] for d in executor.pages.dialogs_describe()]

    return list(on_executor(executor, read))


def _remote(executor: Executor, script: str) -> Any:
    return on_executor(executor, lambda: executor.page.evaluate(script))


async def _take_control(page: Page, *, tap: bool = False) -> None:
    button = page.get_by_role("button", name="Take control")
    await (button.tap() if tap else button.click())
    await _status(page, "You have control")


async def test_a_person_answers_a_confirm_a_prompt_and_leave_this_page_over_the_screen(
    human_origin: str, desk: Account, desktop: BrowserContext, leak_guard: LeakGuard, view_executor: Executor, site: Site
) -> None:
    page = await _open(desktop, human_origin, leak_guard)
    overlay = page.locator("#screen-dialog")
    assert await overlay.is_hidden()
    await _take_control(page)

    # The person's click opens a confirm: its ack does not wait for the answer, the dialog covers the screen.
    await _click_at(page, *CONFIRM)
    await overlay.wait_for(state="visible")
    card = page.get_by_role("alertdialog")
    assert await card.locator("#dialog-title").text_content() == "The page asks you to confirm"
    assert await card.locator("#dialog-message").text_content() == "Delete the draft?"
    assert await page.locator("#dialog-accept").evaluate("(b) => b === document.activeElement")
    assert await page.locator("#screen-pending").text_content() == ""  # nothing waits for an ack
    box, stage = await card.bounding_box(), await page.locator("#screen-stage").bounding_box()
    assert box is not None and stage is not None
    assert stage["y"] <= box["y"] and box["y"] + box["height"] <= stage["y"] + stage["height"], (box, stage)  # over the screen
    await screenshot(page, "view-dialog")
    await page.get_by_role("button", name="Cancel").click()
    await overlay.wait_for(state="hidden")
    assert await eventually_async(seconds=20, thread=True, check=lambda: _answer(view_executor) == "cancelled")

    # A prompt: the person's own answer, Enter sends it.
    await _click_at(page, *PROMPT)
    await overlay.wait_for(state="visible")
    field = page.get_by_label("Your answer")
    assert await field.input_value() == "guest"
    await field.fill("Ana Lima")
    await field.press("Enter")
    await overlay.wait_for(state="hidden")
    assert await eventually_async(seconds=20, thread=True, check=lambda: _answer(view_executor) == "name: Ana Lima")

    # Leave this page? Stay keeps it; Leave goes.
    await _click_at(page, *EDIT)
    assert await eventually_async(seconds=20, thread=True, check=lambda: _answer(view_executor) == "editing")
    await _click_at(page, *LEAVE)
    await overlay.wait_for(state="visible")
    assert await page.locator("#dialog-title").text_content() == "Leave this page? Changes may not be saved."
    await page.get_by_role("button", name="Stay").click()
    await overlay.wait_for(state="hidden")
    assert view_executor.page.url == site.origin + "/dialogs"
    await _click_at(page, *LEAVE)
    await page.get_by_role("button", name="Leave").click()
    await overlay.wait_for(state="hidden")
    assert await eventually_async(seconds=20, thread=True, check=lambda: view_executor.page.url == site.origin + "/docs")
    assert _waiting(view_executor) == []
    await page.get_by_role("button", name="Release").click()
    await _status(page, "Observing")


async def test_an_observer_sees_the_dialog_and_answers_it_only_after_taking_control(
    human_origin: str, desk: Account, desktop: BrowserContext, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    page = await _open(desktop, human_origin, leak_guard)
    _remote(view_executor, "() => { setTimeout(() => document.getElementById('confirm').click(), 0); }")
    overlay = page.locator("#screen-dialog")
    await overlay.wait_for(state="visible")
    assert await page.locator("#dialog-message").text_content() == "Delete the draft?"
    assert await page.get_by_role("button", name="OK").is_disabled()
    assert "Take control to answer it" in (await page.locator("#dialog-note").text_content() or "")
    assert _waiting(view_executor) == ["confirm"]
    await _take_control(page)
    accept = page.get_by_role("button", name="OK")
    assert await accept.is_enabled()
    assert await accept.evaluate("(b) => b === document.activeElement")
    await accept.click()
    await overlay.wait_for(state="hidden")
    assert await eventually_async(seconds=20, thread=True, check=lambda: _answer(view_executor) == "confirmed")


async def test_on_a_phone_the_dialog_fits_above_the_screen_and_is_answered_by_a_tap(
    human_origin: str, desk: Account, phone: BrowserContext, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    page = await _open(phone, human_origin, leak_guard)
    _remote(view_executor, "() => { setTimeout(() => document.getElementById('alert').click(), 0); }")
    card = page.get_by_role("alertdialog")
    await card.wait_for(state="visible")
    box, stage = await card.bounding_box(), await page.locator("#screen-stage").bounding_box()
    assert box is not None and stage is not None
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["y"] + box["height"] <= stage["y"]  # above the screen
    assert await card.locator("#dialog-message").text_content() == "Your session ends soon."
    assert await page.locator("#dialog-dismiss").is_hidden()  # an alert has only OK
    await _take_control(page, tap=True)
    await screenshot(page, "view-phone-dialog")
    ok = page.get_by_role("button", name="OK")
    ok_box = await ok.bounding_box()
    assert ok_box is not None and ok_box["height"] >= 44 and ok_box["x"] + ok_box["width"] <= 390
    await ok.tap()
    await card.wait_for(state="hidden")
    assert await eventually_async(seconds=20, thread=True, check=lambda: _answer(view_executor) == "alert closed")
    await page.get_by_role("button", name="Release").tap()
    await _status(page, "Observing")
