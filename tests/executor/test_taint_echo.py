"""A page's own text that shows a secret is masked at the rendering like a tainted field
(executor/taint.py's echoes), against real Chromium: ``/echo`` copies what browser_login types
into a username field into a sentence ("Signing in as …"), a span of the value alone, a
paragraph inside an open shadow root and a read-only field. In the ``screenshot`` tool's PNG
(``masking.masked_png``, also every step's and pause's capture and the diagnostic) and in a raw
frame of the page as the screen feed captures it, none of them shows a glyph of the value:
each differs from the page's clear rendering of the same text (taken before the executor knew
the value), the sentence equals the page's own masked rendering of a line of its length, text
that holds no secret stays clear, and the pixels are identical for two values of one length."""

from __future__ import annotations

import base64
import io
import secrets
import string
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from PIL import Image, ImageChops

from executor import masking
from executor.runtime import Executor
from tests.executor.test_taint import client, fill_like_browser_login
from tests.support.hostile_pages import HostileSite, serve_hostile
from tests.support.screen import on_executor
from tests.support.waits import eventually

# Where /echo's lines are (tops), and the box read from each.
ECHO, COPY, PLAIN, SHADOW, SHOWN, REF = 40, 120, 200, 280, 360, 440


@pytest.fixture
def site(allow_egress: Callable[[str], None]) -> Iterator[HostileSite]:
    with serve_hostile() as served:
        allow_egress(served.origin)
        allow_egress(served.away)
        yield served


def a_secret() -> str:
    """A value of 12 characters no test typed before (the browser context keeps what was typed)."""
    return "".join(secrets.choice(string.ascii_letters) for _ in range(12))


def line(png: bytes, top: int) -> Image.Image:
    return Image.open(io.BytesIO(png)).convert("RGB").crop((40, top, 680, top + 30))


def same(a: Image.Image, b: Image.Image) -> bool:
    return ImageChops.difference(a, b).getbbox() is None


def raw(screen: Executor) -> bytes:
    """The page as the screen feed captures it (CDP, nothing re-applied before)."""

    async def shot() -> bytes:
        cdp = await screen.page.context.new_cdp_session(screen.page)
        try:
            return base64.b64decode((await cdp.send("Page.captureScreenshot", {"format": "png"}))["data"])
        finally:
            await cdp.detach()

    return on_executor(screen, shot)


def pictures(screen: Executor, site: HostileSite, secret: str) -> dict[str, bytes]:
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/echo")
        # The clear rendering: the page writes the text itself before the executor knows the value.
        on_executor(screen, lambda: screen.page.evaluate("v => show(v)", secret))
        clear = raw(screen)
        on_executor(screen, lambda: screen.page.evaluate("show('')"))
        fill_like_browser_login(screen, site, "#u", secret)  # the page echoes it as it lands
        live = raw(screen)  # the live path only: no re-scan before this frame
        tool = on_executor(screen, lambda: masking.masked_png(screen.page))
        # Text without the secret was masked only until the executor answered: clear again.
        eventually(lambda: same(line(raw(screen), PLAIN), line(clear, PLAIN)), what="the plain line shown clear")
        return {"clear": clear, "live": live, "tool": tool}
    finally:
        executor.lease_release(lease)


def test_a_page_that_echoes_a_secret_shows_no_glyph_of_it_in_any_picture(screen: Executor, site: HostileSite) -> None:
    first, second = a_secret(), a_secret()
    one = pictures(screen, site, first)
    other = pictures(screen, site, second)
    for name in ("live", "tool"):
        for top in (ECHO, COPY, SHADOW, SHOWN):
            assert not same(line(one[name], top), line(one["clear"], top)), (name, top)
            # Two values of one length: the same pixels.
            assert same(line(one[name], top), line(other[name], top)), (name, top)
        # Only the value is covered: the sentence's first words are as the page renders them.
        assert same(line(one[name], ECHO).crop((0, 0, 170, 30)), line(one["clear"], ECHO).crop((0, 0, 170, 30)))
    assert same(line(one["tool"], PLAIN), line(one["clear"], PLAIN))


def test_an_echo_inside_an_out_of_process_frame_is_covered(screen: Executor, site: HostileSite) -> None:
    """/echo of another site in a frame of /framed (its own process), at the same pixels: two
    values the executor knows show the same pixels there, unlike a value it does not know."""
    known = [a_secret(), a_secret()]
    executor = client()
    lease = executor.lease_acquire()
    try:
        executor.navigate(lease, site.origin + "/echo")
        for value in known:
            fill_like_browser_login(screen, site, "#u", value)
        executor.navigate(lease, site.origin + "/framed?echo")

        def the_frame() -> Any:
            return next((f for f in screen.page.frames if f.url.endswith("/echo")), None)

        frame = eventually(the_frame, what="the framed /echo")
        on_executor(screen, lambda: frame.wait_for_selector("#echo", state="attached"))
        shown = []
        for value in [*known, a_secret()]:
            on_executor(screen, lambda v=value: frame.evaluate("v => show(v)", v))
            shown.append(on_executor(screen, lambda: masking.masked_png(screen.page)))
        for top in (ECHO, COPY, SHADOW, SHOWN):
            assert same(line(shown[0], top), line(shown[1], top)), top
        # Text is covered while it shows a secret (a field that showed one stays tainted).
        for top in (ECHO, COPY, SHADOW):
            assert not same(line(shown[0], top), line(shown[2], top)), top
    finally:
        executor.lease_release(lease)
