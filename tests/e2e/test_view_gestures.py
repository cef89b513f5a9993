"""Taps land where tapped and taking control never fails silently: on /view in a real
browser (a 390×844 touch phone and a 1280×800 desktop) a tap, a double tap and a drag
reach the computer's page at the positions the person touched (the remote page logs
what it receives), and Take control works with another screen of the account open."""

from __future__ import annotations

import asyncio

import pytest
from playwright.async_api import Browser, BrowserContext, Page

from accounts.models import Account, ApiKey
from accounts.services import api_key_create
from executor.runtime import Executor
from tests.e2e.conftest import LeakGuard, ana_at_her_desk, orm
from tests.e2e.test_view import PASSWORD, _at, _open, _status
from tests.support.screen import on_executor, open_socket
from tests.support.site import Site
from tests.support.waits import eventually_async

pytestmark = pytest.mark.e2e

LOGGING_PAGE = """<!doctype html><title>log</title>
<style>html,body{margin:0;width:100%;height:100%;background:#fff}</style>
<script>window.log = [];
for (const t of ["pointerdown", "pointerup", "click", "pointermove"])
  document.addEventListener(t, e => log.push([t, e.clientX, e.clientY]));</script>"""


@pytest.fixture
async def logging_desk(human_origin: str, leak_guard: LeakGuard, view_executor: Executor) -> Account:
    return await ana_at_her_desk(leak_guard, view_executor, PASSWORD, html=LOGGING_PAGE)


def _log(executor: Executor, *kinds: str) -> list[tuple[str, float, float]]:
    entries = on_executor(executor, lambda: executor.page.evaluate("window.log"))
    return [(k, x, y) for k, x, y in entries if k in kinds]


def _clear(executor: Executor) -> None:
    on_executor(executor, lambda: executor.page.evaluate("window.log = []"))


def _near(entry: tuple[str, float, float], x: float, y: float, slack: float = 4) -> bool:
    return abs(entry[1] - x) <= slack and abs(entry[2] - y) <= slack


async def _take_control(page: Page, *, tap: bool) -> None:
    button = page.get_by_role("button", name="Take control")
    await (button.tap() if tap else button.click())
    await _status(page, "You have control")


async def _clicks(executor: Executor, count: int) -> list[tuple[str, float, float]]:
    assert await eventually_async(seconds=20, thread=True, check=lambda: len(_log(executor, "click")) >= count), _log(
        executor, "pointerdown", "pointerup", "click"
    )
    await asyncio.sleep(0.3)  # nothing more arrives
    return _log(executor, "pointerdown", "pointerup", "click")


async def _touch_drag(page: Page, start: tuple[float, float], end: tuple[float, float], steps: int = 10) -> None:
    """One finger down, moved in steps, lifted: the touch events a phone's screen delivers."""
    cdp = await page.context.new_cdp_session(page)
    await cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": start[0], "y": start[1]}]})
    for step in range(1, steps + 1):
        x = start[0] + (end[0] - start[0]) * step / steps
        y = start[1] + (end[1] - start[1]) * step / steps
        await cdp.send("Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [{"x": x, "y": y}]})
        await asyncio.sleep(0.03)
    await cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    await cdp.detach()


async def test_on_a_phone_a_tap_a_double_tap_and_a_drag_land_where_touched(
    human_origin: str, logging_desk: Account, phone: BrowserContext, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    page = await _open(phone, human_origin, leak_guard)
    await _take_control(page, tap=True)
    # A tap: down, up and the click at the point touched (the "Sending…" line appearing
    # between down and up must not move the screen, nor the up).
    await page.touchscreen.tap(*await _at(page, 300, 120))
    got = await _clicks(view_executor, 1)
    assert [k for k, _, _ in got] == ["pointerdown", "pointerup", "click"], got
    assert all(_near(e, 300, 120) for e in got), got

    # A double tap: two clicks, both at the point touched.
    _clear(view_executor)
    x, y = await _at(page, 640, 360)
    await page.touchscreen.tap(x, y)
    await asyncio.sleep(0.08)
    await page.touchscreen.tap(x, y)
    got = await _clicks(view_executor, 2)
    assert [k for k, _, _ in got] == ["pointerdown", "pointerup", "click"] * 2, got
    assert all(_near(e, 640, 360) for e in got), got

    # A drag: down where the finger went down, up where it was lifted, the moves in between.
    _clear(view_executor)
    await _touch_drag(page, await _at(page, 200, 500), await _at(page, 900, 500))
    assert await eventually_async(seconds=20, thread=True, check=lambda: len(_log(view_executor, "pointerup")) == 1)
    await asyncio.sleep(0.3)
    entries = _log(view_executor, "pointerdown", "pointermove", "pointerup")
    kinds = [k for k, _, _ in entries]
    assert kinds.count("pointerdown") == 1 and kinds.count("pointerup") == 1, entries
    start = kinds.index("pointerdown")
    down, moves, up = entries[start], entries[start + 1 : -1], entries[-1]
    assert up[0] == "pointerup" and _near(down, 200, 500) and _near(up, 900, 500), entries
    # Every move on the drag's line, from the down to the lift (none off by a shifted box).
    assert moves and all(_near(m, m[1], 500) and 200 <= m[1] <= 904 for m in moves), moves


async def test_on_a_desktop_a_click_a_double_click_and_a_drag_land_where_pointed(
    human_origin: str, logging_desk: Account, browser: Browser, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    context = await browser.new_context(viewport={"width": 1280, "height": 800}, device_scale_factor=1)
    try:
        page = await _open(context, human_origin, leak_guard)
        await _take_control(page, tap=False)
        await page.mouse.click(*await _at(page, 300, 120))
        got = await _clicks(view_executor, 1)
        assert [k for k, _, _ in got] == ["pointerdown", "pointerup", "click"], got
        assert all(_near(e, 300, 120, slack=2) for e in got), got

        _clear(view_executor)
        await page.mouse.dblclick(*await _at(page, 640, 360))
        got = await _clicks(view_executor, 2)
        assert [k for k, _, _ in got] == ["pointerdown", "pointerup", "click"] * 2, got
        assert all(_near(e, 640, 360, slack=2) for e in got), got

        _clear(view_executor)
        await page.mouse.move(*await _at(page, 200, 500))
        await page.mouse.down()
        await page.mouse.move(*await _at(page, 900, 500), steps=10)
        await page.mouse.up()
        assert await eventually_async(seconds=20, thread=True, check=lambda: len(_log(view_executor, "pointerup")) == 1)
        down, up = _log(view_executor, "pointerdown"), _log(view_executor, "pointerup")
        assert _near(down[0], 200, 500, slack=2) and _near(up[0], 900, 500, slack=2), (down, up)
    finally:
        await context.close()


async def test_take_control_works_with_another_screen_of_the_account_open_and_a_refusal_stays(
    human_origin: str, logging_desk: Account, desktop: BrowserContext, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    """The account's limit is two open screens: a native observer plus /view must still take control,
    and a third screen is refused with a message that stays and says what to close."""
    key = await orm(lambda: api_key_create(account=logging_desk, kind=ApiKey.Kind.RUNNER)[1])
    leak_guard.watch(key)
    watcher = await open_socket(human_origin, key, "screen-1", "observe")  # the phone app watching
    try:
        page = await _open(desktop, human_origin, leak_guard)
        await _status(page, "Observing. Nothing you do here reaches the computer.")
        await _take_control(page, tap=False)
        assert view_executor.control.state == "human"
        await page.mouse.click(*await _at(page, 300, 120))
        await _clicks(view_executor, 1)

        # A third screen (another tab): refused, and the refusal stays until the person acts.
        other = await desktop.new_page()
        await other.goto(f"{human_origin}/view?computer_id=screen-1")
        state = other.locator("#screen-state")
        await state.filter(has_text="Close another screen of this account").wait_for()
        await asyncio.sleep(2.5)  # frames would have overwritten it by now
        assert "Close another screen of this account" in (await state.text_content() or "")
        assert await other.get_by_role("button", name="Reconnect").is_visible()
        await other.close()
    finally:
        await watcher.close()


async def test_on_a_phone_the_address_field_navigates_and_a_refused_address_is_explained(
    human_origin: str,
    logging_desk: Account,
    phone: BrowserContext,
    leak_guard: LeakGuard,
    view_executor: Executor,
    site: Site,
) -> None:
    page = await _open(phone, human_origin, leak_guard)
    address = page.get_by_label("Page address")
    assert await address.get_attribute("readonly") is not None  # watching: read-only
    await _take_control(page, tap=True)
    await address.tap()
    await address.fill(site.origin + "/docs")
    await page.get_by_role("button", name="Go").tap()

    async def remote_url() -> str:
        return str(view_executor.page.url)

    assert await eventually_async(seconds=20, thread=True, check=lambda: on_executor(view_executor, remote_url) == site.origin + "/docs")
    # A refused address: acked, explained on the page, and the person keeps control.
    await address.tap()
    await address.fill("http://10.255.255.1/")
    await address.press("Enter")
    notice = page.locator("#screen-notice")
    await notice.filter(has_text="The page did not load").wait_for()
    assert "egress policy refused" in (await notice.text_content() or "")
    await _status(page, "You have control")
    assert view_executor.control.state == "human"
    await page.get_by_role("button", name="Release").tap()
    await _status(page, "Observing")
