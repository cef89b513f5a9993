"""The clean screen page /view in a real browser: frames render; take control,
click and type into the computer's real page, release."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.async_api import Browser, Page

from accounts.models import Account
from executor.models import Computer
from executor.runtime import Executor
from tests.e2e.conftest import LeakGuard, orm, screenshot, sign_in
from tests.support.screen import on_executor, register, reset_executor, start_executor

pytestmark = pytest.mark.e2e

TARGET = """<!doctype html><title>target</title>
<style>body{margin:0;background:#fff} #b{position:absolute;left:400px;top:150px;width:200px;height:80px}
#t{position:absolute;left:400px;top:300px;width:300px;height:40px;font-size:24px}</style>
<button id="b" onclick="this.dataset.clicks=(+this.dataset.clicks||0)+1">Press</button>
<input id="t" autocomplete="off">"""


@pytest.fixture(scope="module")
def view_executor() -> Iterator[Executor]:
    thread = start_executor("screen-1")
    yield thread.executor
    thread.stop()


async def _click_at(page: Page, x: float, y: float) -> None:
    """Click the displayed image where the computer's viewport point (x, y) is shown."""
    box = await page.locator("#screen-canvas").bounding_box()
    assert box is not None
    scale = min(box["width"] / 1280, box["height"] / 720)
    left = box["x"] + (box["width"] - 1280 * scale) / 2
    top = box["y"] + (box["height"] - 720 * scale) / 2
    await page.mouse.click(left + x * scale, top + y * scale)


async def _eventually(check: Any, seconds: float = 15) -> Any:
    for _ in range(int(seconds * 10)):
        value = await asyncio.to_thread(check)
        if value:
            return value
        await asyncio.sleep(0.1)
    return await asyncio.to_thread(check)


async def test_the_clean_screen_shows_frames_and_gives_control_only_on_click(
    human_origin: str, browser: Browser, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    password = "correct horse battery"
    leak_guard.watch(password)

    def setup() -> None:
        from django.contrib.auth.models import User

        from accounts.models import Membership

        account = Account.objects.create(name="Acme")
        user = User.objects.create_user(username="ana", password=password)
        Membership.objects.create(user=user, account=account)
        Computer.objects.create(id="screen-1", account=account, name="Office PC")
        register(view_executor)

    await orm(setup)
    reset_executor(view_executor, TARGET)
    context = await browser.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=1)
    page = await context.new_page()
    page.on("request", leak_guard.record_request)
    try:
        await page.goto(f"{human_origin}/view?computer_id=screen-1")
        await sign_in(page, "ana", password)
        assert page.url.endswith("/view?computer_id=screen-1")
        await page.locator("#screen-canvas[data-frames]").wait_for()  # a frame was drawn
        await page.get_by_text("Observing").wait_for()
        # Watching sends nothing: a click on the image is not an input.
        await _click_at(page, 500, 190)
        await asyncio.sleep(0.5)
        clicks = lambda: on_executor(view_executor, lambda: view_executor.page.evaluate("document.getElementById('b').dataset.clicks || '0'"))  # noqa: E731
        assert await asyncio.to_thread(clicks) == "0"
        assert view_executor.control.state == "available"

        await page.get_by_role("button", name="Take control").click()
        await page.get_by_text("You have control").wait_for()
        assert view_executor.control.state == "human"
        await screenshot(page, "view-controlling")
        await _click_at(page, 500, 190)
        assert await _eventually(lambda: clicks() == "1")
        await _click_at(page, 500, 320)
        await page.keyboard.type("hi")
        value = lambda: on_executor(view_executor, lambda: view_executor.page.evaluate("document.getElementById('t').value"))  # noqa: E731
        assert await _eventually(lambda: value() == "hi")

        await page.get_by_role("button", name="Release").click()
        await page.get_by_text("Observing").wait_for()
        assert view_executor.control.state == "released"
        assert await page.get_by_role("button", name="Take control").is_visible()
    finally:
        await context.close()
