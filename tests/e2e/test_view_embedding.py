"""Embedding /view: a page of another origin (another loopback port) shows the screen in an
iframe when RAM_VIEW_FRAME_ANCESTORS lists it; the person takes control inside the frame
only while it is fully visible (covered by the page around it: refused); without the
setting the frame is refused, and the sign-in page is never framed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from playwright.async_api import BrowserContext, Frame

from accounts.models import Account
from executor.runtime import Executor
from tests.e2e.conftest import LeakGuard, ana_at_her_desk, sign_in
from tests.e2e.test_view import PASSWORD
from tests.support.waits import eventually_async

pytestmark = pytest.mark.e2e

EMBEDDER = """<!doctype html><title>Harness</title>
<style>body{{margin:0;font:16px sans-serif}} iframe{{width:1000px;height:900px;border:0}}
#cover{{position:absolute;left:0;top:0;width:1000px;height:900px;background:rgba(255,255,255,.02);display:none}}</style>
<h1>My agent harness</h1>
<iframe id="screen" src="{src}" title="The computer's screen"></iframe>
<div id="cover"></div>"""


@pytest.fixture
def embedder(human_origin: str) -> Iterator[str]:
    """A page of another origin (127.0.0.1 on another port) that frames RAM's /view."""
    page = EMBEDDER.format(src=f"{human_origin}/view?computer_id=screen-1").encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
async def desk(human_origin: str, leak_guard: LeakGuard, view_executor: Executor) -> Account:
    return await ana_at_her_desk(leak_guard, view_executor, PASSWORD)


async def _signed_in(desktop: BrowserContext, human_origin: str) -> None:
    """Sign in at the top level (the sign-in page is never framed)."""
    page = await desktop.new_page()
    await page.goto(f"{human_origin}/view?computer_id=screen-1")
    await sign_in(page, "ana", PASSWORD)
    await page.locator("#screen-canvas[data-frames]").wait_for()
    await page.close()


async def _screen_frame(desktop: BrowserContext, embedder: str) -> tuple[Any, Frame]:
    page = await desktop.new_page()
    await page.goto(embedder)
    frame = page.frame_locator("#screen")
    await frame.locator("#screen-canvas[data-frames]").wait_for()
    inner = next(f for f in page.frames if f.url.endswith("/view?computer_id=screen-1"))
    return page, inner


async def test_a_page_of_another_origin_embeds_the_screen_and_takes_control_only_while_it_is_visible(
    human_origin: str, desk: Account, desktop: BrowserContext, embedder: str, view_executor: Executor, settings: Any
) -> None:
    settings.RAM_VIEW_FRAME_ANCESTORS = [embedder]
    await _signed_in(desktop, human_origin)
    page, frame = await _screen_frame(desktop, embedder)
    take = frame.get_by_role("button", name="Take control")
    await frame.locator("#screen-state").filter(has_text="Observing. Nothing you do here").wait_for()

    # The page around it covers the screen (a nearly transparent layer): Take control is refused.
    await page.evaluate("document.getElementById('cover').style.display = 'block'")
    await frame.locator("#screen-state").filter(has_text="works only while the screen is fully visible").wait_for()
    assert await take.is_disabled()
    await take.evaluate("b => b.click()")  # even a scripted click asks for nothing
    assert view_executor.control.state == "available"

    # Uncovered: the person takes control inside the frame, and releases it.
    await page.evaluate("document.getElementById('cover').style.display = 'none'")
    await frame.locator("#screen-state").filter(has_text="Observing. Nothing you do here").wait_for()
    await take.click()
    await frame.locator("#screen-state").filter(has_text="You have control").wait_for()
    assert view_executor.control.state == "human"
    await frame.get_by_role("button", name="Release").click()
    await frame.locator("#screen-state").filter(has_text="Observing").wait_for()
    assert await eventually_async(seconds=20, thread=True, check=lambda: view_executor.control.state == "released")
    await page.close()


async def test_without_the_setting_the_screen_is_not_framed_and_sign_in_never_is(
    human_origin: str, desk: Account, desktop: BrowserContext, embedder: str, settings: Any
) -> None:
    page = await desktop.new_page()
    await page.goto(embedder)  # not signed in: /view sends the frame to the sign-in page
    await page.wait_for_timeout(1000)
    assert not [
        f for f in page.frames if f.url.startswith(human_origin) and await f.locator("#id_username, #screen").count()
    ]
    settings.RAM_VIEW_FRAME_ANCESTORS = [embedder]
    await page.reload()
    await page.wait_for_timeout(1000)
    # The setting frames /view only: its redirect to the sign-in page still shows nothing.
    assert not [f for f in page.frames if f.url.startswith(human_origin) and await f.locator("#id_username").count()]
    await page.close()
    # Signed in, but the setting empty again: /view refuses the frame.
    settings.RAM_VIEW_FRAME_ANCESTORS = []
    await _signed_in(desktop, human_origin)
    page = await desktop.new_page()
    await page.goto(embedder)
    await page.wait_for_timeout(1500)
    assert not [f for f in page.frames if f.url.startswith(human_origin) and await f.locator("#screen").count()]
    await page.close()
