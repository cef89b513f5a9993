"""The clean screen page /view in a real browser, used as a person would: plain
clicks and typing (desktop and a 390×844 phone) against the computer's real page."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from playwright.async_api import Browser, BrowserContext, Page
from websockets.asyncio.client import ClientConnection

from accounts.models import Account, ApiKey
from accounts.services import api_key_create
from computers.client import ExecutorClient
from computers.models import Computer
from executor.runtime import Executor
from tests.e2e.conftest import LeakGuard, ana_at_her_desk, orm, screenshot, sign_in
from tests.support.screen import on_executor, open_socket, reset_executor, take_control
from tests.support.waits import eventually_async
from visual.models import VisualSession

pytestmark = pytest.mark.e2e

PASSWORD = "correct horse battery"
TARGET = """<!doctype html><title>target</title>
<style>body{margin:0;background:#fff;font:20px sans-serif} #b{position:absolute;left:400px;top:150px;width:200px;height:80px}
#t{position:absolute;left:400px;top:300px;width:600px;height:40px;font-size:24px}
#pad{position:absolute;left:40px;top:400px;width:300px;height:300px;background:#cde}</style>
<h1 style="position:absolute;left:400px;top:20px;margin:0;font-size:40px">Verify it's you</h1>
<p style="position:absolute;left:400px;top:80px;margin:0">Confirm, then enter the code from your authenticator app.</p>
<button id="b" onclick="this.dataset.clicks=(+this.dataset.clicks||0)+1">Confirm</button>
<p style="position:absolute;left:400px;top:262px;margin:0">Code</p>
<input id="t" autocomplete="off"><div id="pad">drag here</div>
<script>window.mouse = []; for (const t of ["mousedown", "mouseup"]) document.addEventListener(t, e => mouse.push([t, e.button, e.buttons]));
window.keys = []; for (const t of ["keydown", "keyup"]) document.addEventListener(t, e => keys.push([t, e.key]));</script>"""


@pytest.fixture
async def desk(human_origin: str, leak_guard: LeakGuard, view_executor: Executor) -> Account:
    account = await ana_at_her_desk(leak_guard, view_executor, PASSWORD, html=TARGET)
    return account


async def _open(context: BrowserContext, human_origin: str, leak_guard: LeakGuard) -> Page:
    page = await context.new_page()
    page.on("request", leak_guard.record_request)
    await page.goto(f"{human_origin}/view?computer_id=screen-1")
    await sign_in(page, "ana", PASSWORD)
    await page.locator("#screen-canvas[data-frames]").wait_for()  # a frame was drawn
    return page




def _remote(executor: Executor, script: str) -> Any:
    return on_executor(executor, lambda: executor.page.evaluate(script))


async def _at(page: Page, x: float, y: float) -> tuple[float, float]:
    """Where on the person's page the computer's viewport point (x, y) is shown."""
    box = await page.locator("#screen-canvas").bounding_box()
    assert box is not None
    scale = min(box["width"] / 1280, box["height"] / 720)
    left = box["x"] + (box["width"] - 1280 * scale) / 2
    top = box["y"] + (box["height"] - 720 * scale) / 2
    return left + x * scale, top + y * scale


async def _click_at(page: Page, x: float, y: float) -> None:
    await page.mouse.click(*await _at(page, x, y))


async def _status(page: Page, text: str) -> None:
    """Wait until the page's status line says ``text``."""
    await page.locator("#screen-state").filter(has_text=text).wait_for()


async def _holder(page: Page, text: str) -> None:
    await page.locator("#screen-holder").filter(has_text=text).wait_for()


async def _take_control(page: Page) -> None:
    await page.get_by_role("button", name="Take control").click()
    await _status(page, "You have control")


async def _focus_remote_field(page: Page, executor: Executor) -> None:
    await _click_at(page, 700, 320)
    assert await eventually_async(lambda: _remote(executor, "document.activeElement.id") == "t", 20, thread=True)


def _field(executor: Executor) -> str:
    return str(_remote(executor, "document.getElementById('t').value"))


async def test_watching_opens_one_control_session_and_takes_control_only_on_click(
    human_origin: str, desk: Account, desktop: BrowserContext, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    page = await _open(desktop, human_origin, leak_guard)
    assert page.url.endswith("/view?computer_id=screen-1")
    await _status(page, "Observing. Nothing you do here reaches the computer.")
    await _holder(page, "Who has the computer: nobody.")
    # One control-mode session from the start: Take control needs no second socket.
    modes = await orm(lambda: list(VisualSession.objects.values_list("mode", flat=True)))
    assert modes == ["control"]
    # Watching sends nothing: a click on the image is not an input (checked below, once a later one landed).
    await _click_at(page, 500, 190)
    assert view_executor.control.state == "available"

    await _take_control(page)
    assert view_executor.control.state == "human"
    await _holder(page, "Who has the computer: you.")
    modes = await orm(lambda: sorted((s.mode, s.ended_at is None) for s in VisualSession.objects.all()))
    assert modes == [("control", True)]  # the same socket
    await screenshot(page, "view-controlling")
    # Inputs reach the computer in order: once this click on the field has, the click made while
    # watching would have landed before it.
    await _click_at(page, 700, 320)
    assert await eventually_async(lambda: _remote(view_executor, "document.activeElement.id") == "t", 20, thread=True)
    assert _remote(view_executor, "document.getElementById('b').dataset.clicks || '0'") == "0"
    await _click_at(page, 500, 190)
    assert await eventually_async(lambda: _remote(view_executor, "document.getElementById('b').dataset.clicks") == "1", 20, thread=True)
    await page.get_by_role("button", name="Release").click()
    await _status(page, "Observing")
    assert view_executor.control.state == "released"
    assert await page.get_by_role("button", name="Take control").is_enabled()
    # Asking again works on the same control session, and a click still lands.
    await _take_control(page)
    await _click_at(page, 500, 190)
    assert await eventually_async(lambda: _remote(view_executor, "document.getElementById('b').dataset.clicks") == "2", 20, thread=True)
    await page.get_by_role("button", name="Release").click()
    await _status(page, "Observing")
    assert await orm(lambda: VisualSession.objects.count()) == 1


async def test_fast_typing_reaches_the_computer_whole_as_text(
    human_origin: str, desk: Account, desktop: BrowserContext, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    page = await _open(desktop, human_origin, leak_guard)
    await page.evaluate("""() => { window.pendingSeen = []; const p = document.getElementById('screen-pending');
        if (p) new MutationObserver(() => { if (!p.classList.contains('idle')) pendingSeen.push(p.textContent); })
          .observe(p, {attributes: true, childList: true, subtree: true}); }""")
    await _take_control(page)
    await _focus_remote_field(page, view_executor)
    typed = "The quick brown fox jumps over the lazy dog; 0123456789 açãé€ß中!"
    assert len(typed) >= 60
    await page.keyboard.type(typed)  # as fast as Playwright types: no delay between keys
    # Shift held over several characters and released: nothing stays pressed afterwards.
    await page.keyboard.down("Shift")
    await page.keyboard.press("KeyX")
    await page.keyboard.press("KeyY")
    await page.keyboard.up("Shift")
    await page.keyboard.type("z")
    expected = typed + "XYz"
    assert await eventually_async(lambda: _field(view_executor) == expected, 20, thread=True), _field(view_executor)
    assert await page.evaluate("window.pendingSeen.length") > 0  # the person saw input waiting
    await page.locator("#screen-pending").wait_for(state="hidden")
    # Named keys still go as keys: Backspace removes the last character.
    await page.keyboard.press("Backspace")
    assert await eventually_async(lambda: _field(view_executor) == expected[:-1], 20, thread=True)
    # A shortcut goes as keys too: Ctrl+A then typing replaces everything.
    await page.keyboard.press("Control+a")
    await page.keyboard.type("ok")
    assert await eventually_async(lambda: _field(view_executor) == "ok", 20, thread=True)
    assert not await asyncio.to_thread(_remote, view_executor, "window.keys.filter(k => k[1] === 'Shift').length % 2")


async def test_composed_text_and_the_persons_clipboard_reach_the_computer(
    human_origin: str, desk: Account, browser: Browser, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    context = await browser.new_context(viewport={"width": 1400, "height": 1000}, permissions=["clipboard-read", "clipboard-write"])
    try:
        page = await _open(context, human_origin, leak_guard)
        await _take_control(page)
        await _focus_remote_field(page, view_executor)
        # An IME composes "ç" (pt-BR dead key, or any input method) and commits it.
        cdp = await context.new_cdp_session(page)
        await cdp.send("Input.imeSetComposition", {"text": "c", "selectionStart": 1, "selectionEnd": 1})
        await cdp.send("Input.imeSetComposition", {"text": "ç", "selectionStart": 1, "selectionEnd": 1})
        await cdp.send("Input.insertText", {"text": "ç"})
        assert await eventually_async(lambda: _field(view_executor) == "ç", 20, thread=True), _field(view_executor)
        # Paste: the person's own clipboard goes as text (not the computer's clipboard).
        await page.evaluate("navigator.clipboard.writeText('MFA 482913')")
        await page.keyboard.press("Control+v")
        assert await eventually_async(lambda: _field(view_executor) == "çMFA 482913", 20, thread=True), _field(view_executor)
        keys = _remote(view_executor, "window.keys.map(k => k[1])")
        assert "v" not in keys and "V" not in keys  # no Ctrl+V reached the computer
    finally:
        await context.close()


async def test_a_drag_that_ends_outside_the_image_releases_the_button(
    human_origin: str, desk: Account, desktop: BrowserContext, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    page = await _open(desktop, human_origin, leak_guard)
    await _take_control(page)
    await page.mouse.move(*await _at(page, 150, 500))
    await page.mouse.down()
    box = await page.locator("#screen-canvas").bounding_box()
    assert box is not None
    await page.mouse.move(box["x"] + box["width"] + 30, box["y"] + box["height"] + 40, steps=5)  # off the image
    await page.mouse.up()
    assert await eventually_async(lambda: [e[0] for e in _remote(view_executor, "window.mouse")] == ["mousedown", "mouseup"], 20, thread=True)
    assert _remote(view_executor, "window.mouse")[-1][2] == 0  # no button left down


async def test_the_page_tells_who_holds_the_computer_and_keeps_unavailable(
    human_origin: str, desk: Account, desktop: BrowserContext, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    page = await _open(desktop, human_origin, leak_guard)
    take = page.get_by_role("button", name="Take control")
    # The agent holds a lease: shown, and taking control (which stops the agent) is offered.
    computer = await orm(lambda: Computer.objects.get(pk="screen-1"))
    client = ExecutorClient(computer)
    lease = await asyncio.to_thread(client.lease_acquire)
    await _holder(page, "Who has the computer: the agent.")
    assert await take.is_enabled()
    await asyncio.to_thread(client.lease_release, lease)
    await _holder(page, "Who has the computer: nobody.")

    # Another person holds control: shown, and Take control is disabled (it could not work).

    key = await orm(lambda: api_key_create(account=desk, kind=ApiKey.Kind.RUNNER)[1])
    leak_guard.watch(key)
    other: ClientConnection = await open_socket(human_origin, key, "screen-1", "control")
    await take_control(other)
    await _holder(page, "Who has the computer: another person.")
    assert await take.is_disabled()
    await other.send(json.dumps({"type": "release"}))
    await other.close()
    await _holder(page, "Who has the computer: nobody.")
    assert await take.is_enabled()

    # The browser fails: `unavailable` stays on screen with Reconnect, frames or not.
    async def fail() -> None:
        view_executor.control.fail()

    on_executor(view_executor, fail)
    await _status(page, "The computer's screen is unavailable")
    frames = int(await page.locator("#screen-canvas").get_attribute("data-frames") or 0)
    on_executor(view_executor, lambda: view_executor.page.evaluate("document.body.style.background = '#fee'"))
    await asyncio.sleep(1.5)
    assert await page.locator("#screen-state").get_attribute("data-state") == "unavailable"
    assert await page.get_by_role("button", name="Reconnect").is_visible()
    assert await take.is_disabled()
    del frames
    reset_executor(view_executor, TARGET)
    await page.get_by_role("button", name="Reconnect").click()
    await _status(page, "Observing. Nothing you do here reaches the computer.")


async def test_keyboard_only_address_task_link_and_escape_chord(
    human_origin: str, desk: Account, desktop: BrowserContext, leak_guard: LeakGuard, view_executor: Executor, make_paused_run: Any
) -> None:
    computer = await orm(lambda: Computer.objects.get(pk="screen-1"))
    run = await orm(lambda: make_paused_run(desk, computer, "takeover"))
    on_executor(view_executor, lambda: view_executor.page.goto("data:text/html,<title>Portal</title><h1>Verify it's you</h1><p>Code from your authenticator app:</p><input id=t autofocus>"))
    page = await _open(desktop, human_origin, leak_guard)
    address = page.get_by_label("Page address")
    await page.wait_for_function("document.getElementById('screen-url').value.startsWith('data:text/html')")
    assert await address.get_attribute("readonly") is not None
    link = page.get_by_role("link", name="Back to the task")
    assert await link.get_attribute("href") == f"/tasks/{run.id}/intervention"

    # Keyboard only: Tab to Take control, Enter, type, Tab goes to the computer, the chord comes back.
    take = page.get_by_role("button", name="Take control")
    for _ in range(30):
        if await take.evaluate("b => b === document.activeElement"):
            break
        await page.keyboard.press("Tab")
    assert await take.evaluate("b => b === document.activeElement")
    await page.keyboard.press("Enter")
    await _status(page, "You have control")
    on_executor(view_executor, lambda: view_executor.page.focus("#t"))
    await page.keyboard.type("abc")
    await page.keyboard.press("Tab")
    assert await eventually_async(lambda: _remote(view_executor, "window.document.getElementById('t').value") == "abc", 20, thread=True)
    assert await eventually_async(lambda: _remote(view_executor, "document.activeElement.id") != "t", 20, thread=True)  # Tab went to the computer
    await asyncio.sleep(1)  # a frame with the typing on it
    await screenshot(page, "view-desktop")
    await page.keyboard.down("Control")
    await page.keyboard.down("Alt")
    await page.keyboard.down("Shift")
    await page.keyboard.up("Shift")
    await page.keyboard.up("Alt")
    await page.keyboard.up("Control")
    assert await page.evaluate("document.activeElement.id") == "release"
    await page.keyboard.press("Enter")
    await _status(page, "Observing")
    assert view_executor.control.state == "released"


async def test_on_a_phone_the_keyboard_control_types_a_code_and_the_screen_zooms(
    human_origin: str, desk: Account, phone: BrowserContext, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    page = await _open(phone, human_origin, leak_guard)
    stage = page.locator("#screen-stage")
    # Zoom in and pan while watching.
    await page.get_by_role("button", name="Zoom in").click()
    await page.get_by_role("button", name="Zoom in").click()
    assert await page.locator("#zoom-level").text_content() == "200%"
    assert await stage.evaluate("s => s.scrollWidth > s.clientWidth * 1.5")
    await stage.evaluate("s => s.scrollBy(200, 0)")
    assert await stage.evaluate("s => s.scrollLeft") > 0
    await page.get_by_role("button", name="Zoom out").click()
    await page.get_by_role("button", name="Zoom out").click()
    await screenshot(page, "view-phone")

    await page.get_by_role("button", name="Take control").tap()
    await _status(page, "You have control")
    x, y = await _at(page, 700, 320)
    await page.touchscreen.tap(x, y)
    assert await eventually_async(lambda: _remote(view_executor, "document.activeElement.id") == "t", 20, thread=True)
    await page.get_by_role("button", name="Keyboard").tap()
    field = page.get_by_label("Text for the computer")
    assert await field.is_visible()
    assert await field.evaluate("f => f === document.activeElement")
    await page.keyboard.insert_text("482913")  # what a phone's keyboard (or an authenticator's paste) delivers
    assert await eventually_async(lambda: _field(view_executor) == "482913", 20, thread=True), _field(view_executor)
    await asyncio.sleep(1)  # a frame with the code on it
    await screenshot(page, "view-phone-keyboard")
    await page.get_by_role("button", name="Release").tap()
    await _status(page, "Observing")


async def test_closing_the_page_while_holding_keys_and_a_button_leaves_nothing_pressed(
    human_origin: str, desk: Account, desktop: BrowserContext, leak_guard: LeakGuard, view_executor: Executor
) -> None:
    page = await _open(desktop, human_origin, leak_guard)
    await _take_control(page)
    await _focus_remote_field(page, view_executor)
    await page.keyboard.down("Shift")
    await page.mouse.move(*await _at(page, 150, 500))
    await page.mouse.down()
    assert await eventually_async(lambda: ["keydown", "Shift"] in _remote(view_executor, "window.keys"), 20, thread=True)
    # The focus click (down, up), then this press (down).
    assert await eventually_async(lambda: [e[0] for e in _remote(view_executor, "window.mouse")] == ["mousedown", "mouseup", "mousedown"], 20, thread=True)
    await page.close()  # no Release, no key-up: the tab is simply gone
    assert await eventually_async(lambda: view_executor.control.state == "released", 20, thread=True)
    assert await eventually_async(lambda: ["keyup", "Shift"] in _remote(view_executor, "window.keys"), 20, thread=True)
    on_executor(view_executor, lambda: view_executor.page.focus("#t"))
    computer = await orm(lambda: Computer.objects.get(pk="screen-1"))
    client = ExecutorClient(computer)
    lease = await asyncio.to_thread(client.lease_acquire)
    await asyncio.to_thread(client.press, lease, "a")
    await asyncio.to_thread(client.lease_release, lease)
    assert _field(view_executor) == "a"  # the agent's key is not shifted
    assert _remote(view_executor, "window.mouse")[-1][0] == "mouseup"
