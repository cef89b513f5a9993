"""The live stream is masked at the rendering: a runner-key observe socket (what a
bring-your-own-agent harness holds) receives frames while a tainted password field holds a
value, as a password field and after the page toggles it to ``type=text``, and the field's pixels
show no glyph: they equal the page's own masked rendering of the same value, differ from its
clear rendering, and are identical for two different secrets of one length (real uvicorn,
websockets, executor and Chromium; tests/support/hostile_pages.py's ``/toggle``)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
from typing import Any

from PIL import Image, ImageChops
from websockets.asyncio.client import ClientConnection

from executor import login
from tests.support.hostile_login import site_fixture  # noqa: F401 - the fixture
from tests.support.hostile_pages import HostileSite
from tests.support.screen import frame_pair, on_executor, open_socket
from tests.support.waits import eventually

FIRST = "Tr0ub4dor&3x"
SECOND = "Hunter2!Hunt"
# How long the socket is read after a change (the page is still; the last frame is its state).
SETTLE_SECONDS = 1.5


def field(frame: Image.Image, top: int) -> Image.Image:
    """The inside of the field at ``top`` (/toggle's fields: left 40, 400 x 40, a 1px border)."""
    return frame.crop((41, top + 1, 439, top + 39))


def differs(a: Image.Image, b: Image.Image) -> int:
    """How many pixels of ``a`` and ``b`` differ by more than JPEG's noise in any channel."""
    difference = ImageChops.difference(a, b).convert("L").point(lambda v: 255 if v > 24 else 0)
    return difference.histogram()[255]


async def latest_frame(ws: ClientConnection) -> Image.Image:
    """The last frame received within SETTLE_SECONDS (at least one)."""
    _, jpeg = await frame_pair(ws)
    try:
        async with asyncio.timeout(SETTLE_SECONDS):
            while True:
                _, jpeg = await frame_pair(ws)
    except TimeoutError:
        pass
    return Image.open(io.BytesIO(jpeg)).convert("RGB")


async def raw_png(page: Any) -> bytes:
    cdp = await page.context.new_cdp_session(page)
    try:
        return base64.b64decode((await cdp.send("Page.captureScreenshot", {"format": "png"}))["data"])
    finally:
        await cdp.detach()


async def fill_as_login(page: Any, site: HostileSite, secret: str, selector: str, kind: str) -> None:
    """``secret`` filled into ``selector`` as browser_login fills it."""
    cdp = await page.context.new_cdp_session(page)
    try:
        guard = login.Guard(page, cdp, (login.normal_origin(site.origin) or "",))
        handle = await page.query_selector(selector)
        assert handle is not None
        await guard.fill(handle, secret, kind)
    finally:
        await cdp.detach()


def prepare(screen: Any, site: HostileSite, secret: str) -> Image.Image:
    """/toggle with ``secret`` filled into ``#swap`` as browser_login fills it, and the page's
    references: ``#ref-masked`` (a password field) and ``#ref-clear`` (a text field) hold it too.
    Returns the clear reference's pixels as the page rendered them before the executor knew the
    value (from then on a field that shows it is masked too)."""

    async def go() -> Image.Image:
        page = screen.page
        await page.goto(site.origin + "/toggle")
        await page.evaluate("v => { document.body.dataset.v = v }", secret)
        await page.click("#refs")
        clear = field(Image.open(io.BytesIO(await raw_png(page))).convert("RGB"), 280)
        await fill_as_login(page, site, secret, "#swap", "password")
        await page.click("#refs")  # also moves focus off the field: no caret in the frames
        return clear

    return on_executor(screen, go)


async def stream_of(
    screen: Any, site: HostileSite, live_origin: str, runner_key: str, secret: str
) -> list[Image.Image]:
    """The field's pixels in the live stream: as a password field, then toggled to text, with
    the masked reference of the last frame and the clear one rendered before the fill."""
    clear = prepare(screen, site, secret)
    ws = await open_socket(live_origin, runner_key, "pc-1", "observe")
    try:
        as_password = await latest_frame(ws)
        on_executor(screen, lambda: screen.page.click("#eye"))  # the page's show-password toggle
        assert on_executor(screen, lambda: screen.page.evaluate("swap.type")) == "text"
        toggled = await latest_frame(ws)
    finally:
        await ws.close()
    return [field(as_password, 40), field(toggled, 40), field(toggled, 200), clear]


async def test_the_live_stream_shows_a_tainted_field_masked_whatever_its_type(
    screen: Any, live_origin: str, runner_key: str, site: HostileSite
) -> None:
    first = await stream_of(screen, site, live_origin, runner_key, FIRST)
    second = await stream_of(screen, site, live_origin, runner_key, SECOND)
    as_password, toggled, masked, clear = first
    # The clear rendering of the value shows glyphs: it is far from the masked one.
    assert differs(masked, clear) > 200
    # The field shows what the masked rendering shows, before and after the toggle, never the clear text.
    assert differs(as_password, masked) == 0
    assert differs(toggled, masked) == 0
    assert differs(toggled, clear) > 200
    # Two secrets of one length: the field's pixels are identical.
    assert ImageChops.difference(first[1], second[1]).getbbox() is None
    assert ImageChops.difference(first[0], second[0]).getbbox() is None


# /echo's lines that show the value (tests/support/hostile_pages.py's ECHO): the sentence, the
# span of the value alone, the paragraph in an open shadow root and the read-only field.
ECHO_LINES = (40, 120, 280, 360)
def echo_line(frame: Image.Image, top: int) -> Image.Image:
    return frame.crop((40, top, 680, top + 30))


async def echo_stream_of(
    screen: Any, site: HostileSite, live_origin: str, runner_key: str, secret: str
) -> tuple[list[list[Image.Image]], list[Image.Image]]:
    """/echo's lines in every frame of the live stream after browser_login's fill of ``#u`` (which
    the page echoes), and the same lines as the page rendered them before the executor knew the value."""

    async def go() -> list[Image.Image]:
        page = screen.page
        await page.goto(site.origin + "/echo")
        await page.evaluate("v => show(v)", secret)
        clear = Image.open(io.BytesIO(await raw_png(page))).convert("RGB")
        await page.evaluate("show('')")
        await fill_known(page, site, secret)
        return [echo_line(clear, top) for top in ECHO_LINES]

    unwatched(screen)
    clear = on_executor(screen, go)
    ws = await open_socket(live_origin, runner_key, "pc-1", "observe")
    try:
        frames = await every_frame(ws, SETTLE_SECONDS)
    finally:
        await ws.close()
    return [[echo_line(frame, top) for top in ECHO_LINES] for frame in frames], clear


def unwatched(screen: Any) -> None:
    """Until the last socket's subscription has ended (its screencast stopped): the next socket's
    first frame is then of the page as it is, never the latest of a page the test changed since."""
    eventually(lambda: not screen.feed.subscribers and not screen.feed.screencasting, what="the screencast stopped")


async def fill_known(page: Any, site: HostileSite, secret: str) -> None:
    """``secret`` filled into /echo's ``#u`` (the executor knows it from then on)."""
    await fill_as_login(page, site, secret, "#u", "username")
    await page.evaluate("document.activeElement.blur()")  # no caret in the frames


async def every_frame(ws: ClientConnection, seconds: float) -> list[Image.Image]:
    """Every frame received within ``seconds`` (at least one)."""
    _, jpeg = await frame_pair(ws)
    frames = [Image.open(io.BytesIO(jpeg)).convert("RGB")]
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            while True:
                _, jpeg = await frame_pair(ws)
                frames.append(Image.open(io.BytesIO(jpeg)).convert("RGB"))
    return frames


async def test_the_live_stream_shows_no_glyph_of_a_secret_the_page_echoes(
    screen: Any, live_origin: str, runner_key: str, site: HostileSite
) -> None:
    first, clear = await echo_stream_of(screen, site, live_origin, runner_key, "gVwXkqTzRbMa")
    second, _ = await echo_stream_of(screen, site, live_origin, runner_key, "HmPcYdNoLsJe")
    # No frame shows an echo in clear, the first one included.
    for lines in first + second:
        for top, shown, plain in zip(ECHO_LINES, lines, clear, strict=True):
            assert differs(shown, plain) > 100, top
    # Two values of one length: the same pixels once the page is still.
    for top, shown, other in zip(ECHO_LINES, first[-1], second[-1], strict=True):
        assert ImageChops.difference(shown, other).getbbox() is None, top


LATE = 600  # the top of a field the test adds to /echo (the page's field style: left 40, 400 x 40)


async def test_a_field_a_page_script_sets_to_a_secret_is_never_streamed_in_clear(
    screen: Any, live_origin: str, runner_key: str, site: HostileSite
) -> None:
    """A script sets a field's value (no event, no mutation record: nothing the page's world hears
    at once) while a socket watches: every frame is looked at before it is shown, so none shows
    the value in clear, and the frames once the page is still show it masked."""
    secret = "QzKvNwPxRtYb"
    add_late = "v => { document.body.insertAdjacentHTML('beforeend', `<input id=late style='top:600px'>`); late.value = v }"

    async def go() -> tuple[Image.Image, Image.Image]:
        page = screen.page
        # The clear reference: the same page in a browser context of its own (no secret known there).
        elsewhere = await page.context.browser.new_context(viewport={"width": 1280, "height": 720})
        try:
            other = await elsewhere.new_page()
            await other.goto(site.origin + "/echo")
            await other.evaluate(add_late, secret)
            clear = echo_line(Image.open(io.BytesIO(await raw_png(other))).convert("RGB"), LATE)
        finally:
            await elsewhere.close()
        await page.goto(site.origin + "/echo")
        await page.evaluate(add_late, "")
        empty = echo_line(Image.open(io.BytesIO(await raw_png(page))).convert("RGB"), LATE)
        await fill_known(page, site, secret)
        return clear, empty

    unwatched(screen)
    clear, empty = on_executor(screen, go)
    ws = await open_socket(live_origin, runner_key, "pc-1", "observe")
    try:
        await frame_pair(ws)
        later = "v => new Promise((done) => setTimeout(() => { late.value = v; done(true) }, 300))"
        on_executor(screen, lambda: screen.page.evaluate(later, secret))
        frames = await every_frame(ws, SETTLE_SECONDS)
    finally:
        await ws.close()
    glyphs = differs(clear, empty)  # the value's glyphs: a frame that shows them is within JPEG's noise of clear
    assert glyphs > 400
    assert on_executor(screen, lambda: screen.page.evaluate("late.value")) == secret
    for frame in frames:
        assert differs(echo_line(frame, LATE), clear) > glyphs / 2
    assert differs(echo_line(frames[-1], LATE), empty) > 100  # the value is shown, masked
