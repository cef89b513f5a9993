"""The person's email preferences page in Chromium: reached from the header,
typed and clicked; refused without a password sign-in or from another origin."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from playwright.async_api import Browser, Page

from accounts.models import Account
from notifications.models import NotificationPreference
from tests.e2e.conftest import LeakGuard, orm, screenshot, sign_in

pytestmark = pytest.mark.e2e

PASSWORD = "correct horse battery"


async def test_a_person_opts_in_from_the_header_link(
    human_origin: str, page: Page, leak_guard: LeakGuard, account: Account, make_user: Callable[..., User]
) -> None:
    person = await orm(lambda: make_user(account, "ana", PASSWORD))
    leak_guard.watch(PASSWORD)
    await page.goto(f"{human_origin}/connections")
    await sign_in(page, person.username, PASSWORD)
    async with page.expect_navigation():
        await page.get_by_role("link", name="Email notifications").click()
    assert page.url == f"{human_origin}/account/notifications"
    assert not await page.get_by_label("Email me when a task pauses and needs a person").is_checked()

    # Asking for emails without an address is refused, and nothing is saved.
    await page.get_by_label("Email me when a task pauses and needs a person").check()
    await page.get_by_role("button", name="Save preferences").click()
    await page.get_by_text("Give an email address to receive emails.").wait_for()
    assert not await orm(lambda: NotificationPreference.objects.exists())

    await page.get_by_label("Email address").fill("ana@example.com")
    await page.get_by_label("Email me when a task pauses and needs a person").check()
    await page.get_by_label("Email me a reminder before a credential request expires").check()
    await page.get_by_role("button", name="Save preferences").click()
    await page.get_by_text("Saved.").wait_for()
    await screenshot(page, "notification-preferences")
    pref = await orm(lambda: NotificationPreference.objects.select_related("user").get(user=person))
    assert (pref.user.email, pref.email_on_pause, pref.email_reminder) == ("ana@example.com", True, True)

    # Reloaded, the page shows what was saved; unticking one keeps the other.
    await page.reload()
    assert await page.get_by_label("Email address").input_value() == "ana@example.com"
    await page.get_by_label("Email me a reminder before a credential request expires").uncheck()
    await page.get_by_role("button", name="Save preferences").click()
    await page.get_by_text("Saved.").wait_for()
    pref = await orm(lambda: NotificationPreference.objects.get(user=person))
    assert (pref.email_on_pause, pref.email_reminder) == (True, False)


async def test_the_page_needs_a_password_sign_in_and_this_sites_origin(
    human_origin: str, page: Page, account: Account, make_user: Callable[..., User], settings: Any
) -> None:
    person = await orm(lambda: make_user(account, "bo", PASSWORD))
    async with httpx.AsyncClient(base_url=human_origin, timeout=20) as client:
        anonymous = await client.get("/account/notifications")
        assert anonymous.status_code == 302
        assert anonymous.headers["location"].startswith("/accounts/login/")

    await page.goto(f"{human_origin}/account/notifications")
    await sign_in(page, person.username, PASSWORD)
    assert page.url == f"{human_origin}/account/notifications"
    # A post from another origin, with the person's cookies and a valid CSRF token, changes nothing.
    token = await page.locator("main input[name=csrfmiddlewaretoken]").input_value()
    cookies = {c["name"]: c["value"] for c in await page.context.cookies()}
    form = {"csrfmiddlewaretoken": token, "email": "mallory@example.com", "email_on_pause": "on"}
    async with httpx.AsyncClient(base_url=human_origin, timeout=20, cookies=cookies) as client:
        for origin in ("https://evil.example", "null", None):
            headers = {"Origin": origin} if origin else {}
            refused = await client.post("/account/notifications", data=form, headers=headers)
            assert refused.status_code == 403, origin
        accepted = await client.post("/account/notifications", data=form, headers={"Origin": human_origin})
        assert accepted.status_code == 200
    email = await orm(lambda: User.objects.get(pk=person.pk).email)
    assert email == "mallory@example.com"  # only the post from this site's own origin changed it


def _apart(a: dict[str, float], b: dict[str, float]) -> bool:
    """Two boxes that do not overlap."""
    return (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
async def test_header_links_and_checkboxes_are_laid_out_at_desktop_and_phone_size(
    human_origin: str,
    browser: Browser,
    leak_guard: LeakGuard,
    account: Account,
    make_user: Callable[..., User],
    size: tuple[int, int],
) -> None:
    person = await orm(lambda: make_user(account, "ana", PASSWORD))
    leak_guard.watch(PASSWORD)
    context = await browser.new_context(viewport={"width": size[0], "height": size[1]}, device_scale_factor=1)
    page = await context.new_page()
    try:
        await page.goto(f"{human_origin}/account/notifications")
        await sign_in(page, person.username, PASSWORD)

        # The header's account links stand apart: at least 8 px between them, never overlapping.
        header = page.locator("header.top")
        boxes = [
            await header.locator(".who").bounding_box(),
            await header.get_by_role("link", name="Email notifications").bounding_box(),
            await header.get_by_role("button", name="Sign out").bounding_box(),
        ]
        assert all(boxes)
        for left, right in zip(boxes, boxes[1:], strict=False):
            assert left and right and _apart(left, right)
            if abs(left["y"] - right["y"]) < left["height"] / 2:  # on one line
                assert right["x"] - (left["x"] + left["width"]) >= 8, (left, right)
        for box in boxes:
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= size[0]

        # Each checkbox sits on its label's first line, left of it, and is a checkbox's size.
        for name in ("Email me when a task pauses and needs a person", "Email me a reminder before a credential request expires"):
            box = await page.get_by_role("checkbox", name=name).bounding_box()
            label = await page.locator("label", has_text=name).bounding_box()
            assert box and label
            assert box["width"] <= 32 and box["height"] <= 32, box
            assert box["x"] + box["width"] <= label["x"], (box, label)
            assert label["x"] - (box["x"] + box["width"]) <= 24, (box, label)
            line = 16 * 1.5
            assert box["y"] < label["y"] + line and label["y"] < box["y"] + box["height"], (box, label)
            assert label["x"] + label["width"] <= size[0]
        await page.get_by_role("checkbox", name="Email me when a task pauses and needs a person").click()
        assert await page.get_by_role("checkbox", name="Email me when a task pauses and needs a person").is_checked()
        await page.locator("label", has_text="Email me a reminder before a credential request expires").click()
        assert await page.get_by_role("checkbox", name="Email me a reminder before a credential request expires").is_checked()
    finally:
        await context.close()
